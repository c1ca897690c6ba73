"""``robot.fk(q, frames=[...])`` and ``robot.fk_jacobian(q, frames=[...])``: any frame of the model (links carrying
collision spheres, sensors, other hands), equal to Pinocchio to 1e-10 in float64 on the built-in robots, on a tree
with every joint kind and on robots we did not write (a floating base, locked joints); bad frames refused."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import FrameNotFound, IKLayerError
from ik_layer.testing import random_bases

F64 = torch.float64
SOLO = "solo_description/robots/solo12.urdf"
TALOS = "talos_data/robots/talos_reduced.urdf"


def body_frames(robot: ik_layer.Robot, most: int = 12) -> list[str]:
    """Up to ``most`` link frames of the model, spread over it (the universe left out)."""
    names = [f.name for f in robot.model.frames if f.type == pin.FrameType.BODY and f.name != "universe"]
    step = max(1, len(names) // most)
    return names[::step][:most]


def free_flyer_reference(robot: ik_layer.Robot, q: torch.Tensor, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio's pose and LOCAL_WORLD_ALIGNED Jacobian of ``frame`` on a floating-base robot's model: the base's
    six columns (its twist in its own frame), then the joints' in the robot's order."""
    model = robot.model
    data = model.createData()
    cols = [*range(6), *(model.joints[model.getJointId(n)].idx_v for n in robot.joint_names)]
    poses, jacs = np.empty((q.shape[0], 4, 4)), np.empty((q.shape[0], 6, robot.dof))
    for i, q_pin in enumerate(robot.to_pinocchio_q(q).numpy()):
        pin.framesForwardKinematics(model, data, q_pin)
        poses[i] = data.oMf[model.getFrameId(frame)].homogeneous
        jac = pin.computeFrameJacobian(model, data, q_pin, model.getFrameId(frame), pin.LOCAL_WORLD_ALIGNED)
        jacs[i] = jac[:, cols]
    return poses, jacs


def assert_matches_pinocchio(robot: ik_layer.Robot, pin_reference, frames: list[str]) -> None:
    if robot.floating_base:
        pin_reference = free_flyer_reference
    q = robot.random_q((8,), generator=torch.Generator().manual_seed(3))
    if robot.floating_base:
        q = random_bases(q, torch.Generator().manual_seed(4))
    pose, jac = robot.fk_jacobian(q, frames=frames)
    assert pose.shape == (8, len(frames), 4, 4) and jac.shape == (8, len(frames), 6, robot.dof)
    torch.testing.assert_close(robot.fk(q, frames=frames), pose, rtol=0, atol=0)
    for k, frame in enumerate(frames):
        ref_pose, ref_jac = pin_reference(robot, q, frame)
        torch.testing.assert_close(pose[:, k], torch.from_numpy(ref_pose), rtol=0, atol=1e-10)
        torch.testing.assert_close(jac[:, k], torch.from_numpy(ref_jac), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ik_layer.builtin_robots())
def test_builtin_robots_any_frame(name: str, pin_reference) -> None:
    robot = ik_layer.load_robot(name, dtype=F64)
    frames = body_frames(robot)
    assert len(frames) >= 3
    assert_matches_pinocchio(robot, pin_reference, frames)


def test_every_joint_kind_any_frame(tiny_urdf, pin_reference) -> None:
    """Continuous, off-axis, prismatic and negative-axis joints, frames on fixed links and on a side branch."""
    every_joint = ["j_cont", "j_side", "j_off", "j_prism", "j_neg", "j_cont_off"]
    robot = ik_layer.load_robot(tiny_urdf, "tool", active_joints=every_joint, dtype=F64)
    assert_matches_pinocchio(robot, pin_reference, ["l2b", "side_tip", "l4", "base"])


def test_floating_base_and_locked_joints_any_frame(erd_urdf, pin_reference) -> None:
    solo = ik_layer.load_robot(erd_urdf(SOLO), ee_frames=["FL_FOOT", "HR_FOOT"], floating_base=True, dtype=F64)
    assert_matches_pinocchio(solo, pin_reference, body_frames(solo))
    talos = ik_layer.load_robot(erd_urdf(TALOS), "gripper_left_base_link", dtype=F64)  # the rest locked
    assert_matches_pinocchio(talos, pin_reference, body_frames(talos))


def test_frame_poses_are_differentiable_and_follow_the_robot() -> None:
    robot = ik_layer.load_robot("panda", dtype=F64)
    q = robot.random_q((4,), generator=torch.Generator().manual_seed(5)).requires_grad_()
    position = robot.fk(q, frames=["panda_link4"])[:, 0, :3, 3]
    grad = torch.stack([torch.autograd.grad(position[:, k].sum(), q, retain_graph=True)[0] for k in range(3)], 1)
    _, jac = robot.fk_jacobian(q.detach(), frames=["panda_link4"])
    torch.testing.assert_close(grad, jac[:, 0, :3], rtol=0, atol=1e-12)
    robot.to(torch.float32)  # the chains follow the robot's dtype
    assert robot.fk(q.detach().float(), frames=["panda_link4"]).dtype == torch.float32


def test_bad_frames_are_refused() -> None:
    robot = ik_layer.load_robot("panda")
    q = robot.neutral_q()
    with pytest.raises(FrameNotFound, match="panda_link99"):
        robot.fk(q, frames=["panda_link99"])
    for bad in ("panda_link3", [], [3]):
        with pytest.raises(IKLayerError, match="frames must be a non-empty list of frame names"):
            robot.fk(q, frames=bad)  # type: ignore[arg-type]
