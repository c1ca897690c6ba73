"""``load_robot(..., base_frame=...)``: the chain from any frame to the end-effector(s), the joints moving that frame
locked. FK and Jacobians equal Pinocchio's placement relative to the base frame (1e-10); IK answers, checked by
Pinocchio, reach targets given in that frame; gradients flow; bad base frames get clear errors."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import FrameNotFound, IKLayerError
from ik_layer.testing import example_robot_data_dir

ERD = example_robot_data_dir()
needs_erd = pytest.mark.skipif(ERD is None, reason="example-robot-data not installed")
ARMS = {  # model, base frame, end-effector frame, a joint the base frame's own motion depends on
    "talos": ("talos_data/robots/talos_reduced.urdf", "torso_2_link", "gripper_left_base_link", "torso_2_joint"),
    "tiago": ("tiago_description/robots/tiago.urdf", "torso_lift_link", "arm_tool_link", "torso_lift_joint"),
}


def arm(name: str) -> tuple[ik_layer.Robot, str]:
    """The arm ``name`` of :data:`ARMS` loaded from its base frame, and that frame."""
    path, base, ee, _ = ARMS[name]
    assert ERD is not None
    return ik_layer.load_robot(ERD / path, ee, base_frame=base, collision=None), base


def relative(robot: ik_layer.Robot, base: str, q: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio's placement (4, 4) of the end-effector in ``base`` and its Jacobian (6, dof) in ``base``'s axes
    (origin at the end-effector), at the robot's ``q`` (its full model, locked joints held)."""
    model, data = robot.full_model, robot.full_model.createData()
    full = robot.to_full_pinocchio_q(q[None])[0].numpy()
    pin.computeJointJacobians(model, data, full)
    pin.framesForwardKinematics(model, data, full)
    ee, frame = model.getFrameId(robot.ee_frame), model.getFrameId(base)
    world_base, world_ee = data.oMf[frame], data.oMf[ee]
    jac = pin.getFrameJacobian(model, data, ee, pin.LOCAL_WORLD_ALIGNED)
    columns = [model.joints[model.getJointId(name)].idx_v for name in robot.joint_names]
    rot = world_base.rotation.T
    return (world_base.inverse() * world_ee).homogeneous, np.vstack((rot @ jac[:3, columns], rot @ jac[3:, columns]))


@needs_erd
@pytest.mark.parametrize("name", sorted(ARMS))
def test_fk_and_jacobians_are_pinocchio_s_in_the_base_frame(name: str) -> None:
    robot, base = arm(name)
    moves_base = ARMS[name][3]
    assert robot.base_frame == base and moves_base not in robot.joint_names
    q = robot.random_q((16,), generator=torch.Generator().manual_seed(1))
    pose, jac = robot.fk_jacobian(q)
    torch.testing.assert_close(robot.fk(q), pose, atol=1e-12, rtol=0)
    for k in range(16):
        expected_pose, expected_jac = relative(robot, base, q[k])
        np.testing.assert_allclose(pose[k].numpy(), expected_pose, atol=1e-10, rtol=0)
        np.testing.assert_allclose(jac[k].numpy(), expected_jac, atol=1e-10, rtol=0)
    torch.testing.assert_close(
        robot.fk(q, frames=[base])[:, 0], torch.eye(4, dtype=torch.float64).expand(16, 4, 4), atol=1e-12, rtol=0
    )


@needs_erd
@pytest.mark.parametrize("name", sorted(ARMS))
def test_ik_reaches_targets_given_in_the_base_frame(name: str) -> None:
    robot, base = arm(name)
    q = robot.random_q((32,), generator=torch.Generator().manual_seed(2))
    target = torch.stack([torch.as_tensor(relative(robot, base, qk)[0]) for qk in q])
    result = ik_layer.solve(robot, target, generator=torch.Generator().manual_seed(3))
    assert float(result.success.float().mean()) >= 0.95
    for k in torch.nonzero(result.success).squeeze(-1).tolist():
        reached = relative(robot, base, result.q[k])[0]
        assert np.linalg.norm(reached[:3, 3] - target[k, :3, 3].numpy()) <= 1e-4
        assert np.linalg.norm(pin.log3(target[k, :3, :3].numpy() @ reached[:3, :3].T)) <= 1e-3
    # gradients through the implicit layer: the base frame's Jacobian
    xi = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    moved = target[0].clone()
    moved[:3, 3] = moved[:3, 3] + xi
    q_star = ik_layer.ik(robot, moved, warm_start=result.q[0])
    (grad,) = torch.autograd.grad(q_star.sum(), xi)
    expected = ik_layer.target_gradient(robot, q_star.detach())[:, :3].sum(0)
    torch.testing.assert_close(grad, expected, atol=1e-6, rtol=0)


@needs_erd
def test_bad_base_frames_are_refused_naming_them() -> None:
    path, base, ee, moves_base = ARMS["tiago"]
    assert ERD is not None
    with pytest.raises(FrameNotFound, match="nowhere"):
        ik_layer.load_robot(ERD / path, ee, base_frame="nowhere", collision=None)
    with pytest.raises(IKLayerError, match=rf"active joints \['{moves_base}'\] move base_frame"):
        ik_layer.load_robot(ERD / path, ee, base_frame=base, active_joints=[moves_base, "arm_1_joint"], collision=None)
    with pytest.raises(IKLayerError, match="excludes floating_base"):
        ik_layer.load_robot(ERD / path, ee, base_frame=base, floating_base=True, collision=None)
    with pytest.raises(ik_layer.UnsupportedModelError, match="no joint moves"):
        ik_layer.load_robot(ERD / path, base, base_frame=ee, collision=None)  # the tool as the base of the torso


@needs_erd
def test_the_cli_and_a_server_robot_spec_take_the_base_frame(tmp_path) -> None:
    import json

    from ik_layer.cli.main import main
    from ik_layer.server.served_robots import load_robots

    path, _, ee, _ = ARMS["tiago"]
    robot, base = arm("tiago")
    q = robot.random_q((3,), generator=torch.Generator().manual_seed(4))
    np.save(tmp_path / "q.npy", q.numpy())
    out = tmp_path / "poses.npz"
    assert (
        main(["fk", str(ERD / path), str(tmp_path / "q.npy"), "-o", str(out), "--ee-frame", ee, "--base-frame", base])
        == 0
    )
    with np.load(out) as data:
        poses = data["pose"]
    np.testing.assert_allclose(poses, ik_layer.matrix_to_pose(robot.fk(q)).numpy(), atol=1e-12)
    spec = tmp_path / "robots.json"
    spec.write_text(json.dumps([{"source": str(ERD / path), "ee_frame": ee, "base_frame": base, "name": "arm"}]))
    served = load_robots([f"@{spec}"], torch.device("cpu"), torch.float64)["arm"].robot
    assert served.base_frame == base
    torch.testing.assert_close(served.fk(q), robot.fk(q), atol=1e-12, rtol=0)
