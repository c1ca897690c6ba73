"""ik_trajectory: dq/dtargets over the whole sequence by the implicit function theorem, against finite differences."""

from __future__ import annotations

import pytest
import torch

import ik_layer
from ik_layer.trajectory.synthetic import joint_paths

DT = 0.01
TALOS_FRAMES = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]


def directional_check(robot: ik_layer.Robot, pose: torch.Tensor, generator: torch.Generator, **arguments) -> float:
    """Relative difference of ``v . (dq/dpose) d`` by the backward and by central differences (random v, d)."""
    pose = pose.detach().requires_grad_(True)
    result = ik_layer.ik_trajectory(robot, pose, dt=DT, **arguments)
    assert result.success.all() and not result.bounded.any()
    v = torch.randn(result.q.shape, generator=generator, dtype=torch.float64)
    (result.q * v).sum().backward()
    d = torch.randn(pose.shape, generator=generator, dtype=torch.float64)
    analytic = float((pose.grad * d).sum())
    eps = 1e-6
    with torch.no_grad():
        ahead = ik_layer.ik_trajectory(robot, pose.detach() + eps * d, dt=DT, **arguments).q
        behind = ik_layer.ik_trajectory(robot, pose.detach() - eps * d, dt=DT, **arguments).q
    numeric = float(((ahead - behind) * v).sum() / (2 * eps))
    return abs(analytic - numeric) / abs(numeric)


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("panda", {}),
        ("panda", {"acceleration": 2.0}),
        ("panda", {"posture_weight": 0.1}),
        ("ur5e", {}),
    ],
)
def test_gradient_equals_finite_differences(name, arguments, rng):
    robot = ik_layer.load_robot(name)
    path = joint_paths(robot, 2, 8, DT, speed=0.5, generator=rng)
    if "posture_weight" in arguments:
        arguments = {**arguments, "posture": path[:, 0] + 0.05}  # a pull of 0.1/1.1 of 0.05 rad per frame
    pose = ik_layer.matrix_to_pose(robot.fk(path))
    assert directional_check(robot, pose, rng, warm_start=path[:, 0], **arguments) < 1e-5


def test_gradient_without_warm_start_and_position_only(rng):
    robot = ik_layer.load_robot("panda")
    path = joint_paths(robot, 1, 6, DT, speed=0.3, generator=rng)
    pose = ik_layer.matrix_to_pose(robot.fk(path))
    weights = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64)
    start = path[:, 0] + 0.005  # within one frame's step of the first answer
    posture = path[0, 0] - 0.05
    assert directional_check(robot, pose, rng, warm_start=start, weights=weights) < 1e-5
    assert directional_check(robot, pose, rng, posture=posture) < 1e-5  # frame 0 from the posture


def test_floating_base_gradient(erd_urdf, rng):
    robot = ik_layer.load_robot(
        erd_urdf("talos_data/robots/talos_reduced.urdf"), ee_frames=TALOS_FRAMES, floating_base=True
    )
    stance = robot.neutral_q()  # knees bent, arms off their limits (a joint at a limit is held: zero gradient)
    for side, sign in (("left", 1), ("right", -1)):
        for joint, angle in (("leg_%s_3_joint", -0.4), ("leg_%s_4_joint", 0.8), ("leg_%s_5_joint", -0.4),
                             ("arm_%s_2_joint", 0.2 * sign), ("arm_%s_4_joint", -0.6)):  # fmt: skip
            stance[7 + robot.joint_names.index(joint % side)] = angle
    target = robot.fk(stance).expand(5, -1, -1, -1).clone()
    target[:, 2:, 0, 3] += 0.002 * torch.arange(5, dtype=torch.float64)[:, None]  # hands forward at 0.2 m/s
    pose = ik_layer.matrix_to_pose(target)
    assert directional_check(robot, pose, rng, warm_start=stance) < 1e-5


def test_a_frame_target_moves_later_frames_and_failed_frames_get_zero(rng):
    robot = ik_layer.load_robot("panda")
    path = joint_paths(robot, 1, 12, DT, speed=0.3, generator=rng)[0]
    path[8:, 0] += 0.3  # a jump of 0.3 rad at 2 rad/s: frames 8.. are solved in their velocity box
    pose = ik_layer.matrix_to_pose(robot.fk(path)).requires_grad_(True)
    result = ik_layer.ik_trajectory(robot, pose, dt=DT, warm_start=path[0])
    assert result.bounded[8] and not result.success[8]
    result.q[5].sum().backward(retain_graph=True)
    assert pose.grad[:5].abs().sum() > 0  # the pull chain: earlier targets move frame 5 of a redundant arm
    assert pose.grad[6:].abs().sum() == 0  # later targets do not
    pose.grad = None
    result.q[8:].sum().backward()
    assert pose.grad.abs().sum() == 0  # frames held by their velocity box are constants
    assert torch.isfinite(pose.grad).all()
