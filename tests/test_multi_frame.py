"""Several end-effector frames in one problem: both hands of a humanoid, the four feet of a quadruped.

FK and Jacobians against Pinocchio, one LM over the stacked residual (eager reference path), worst-frame
errors, locked joints held, implicit gradients against finite differences, and the arguments' errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import FrameNotFound, IKLayerError, ShapeError
from ik_layer.model.lie import from_rotation_translation, pose_error

F64 = torch.float64
TALOS = "talos_data/robots/talos_reduced.urdf"
HANDS = ["gripper_left_base_link", "gripper_right_base_link"]
SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
POSITION_ONLY = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=F64)
TIGHT = {"position_tolerance": 1e-14, "orientation_tolerance": 1e-14, "num_seeds": 1}


@pytest.fixture(scope="module")
def hands(erd_urdf) -> ik_layer.Robot:
    """Talos reaching with both hands: torso and both arms move, legs and head are locked."""
    return ik_layer.load_robot(erd_urdf(TALOS), ee_frames=HANDS)


@pytest.fixture(scope="module")
def feet(erd_urdf) -> ik_layer.Robot:
    return ik_layer.load_robot(erd_urdf(SOLO), ee_frames=FEET)


def full_values(robot: ik_layer.Robot, q_full: torch.Tensor, names: list[str]) -> torch.Tensor:
    return q_full[..., [robot.full_model.joints[robot.full_model.getJointId(n)].idx_q for n in names]]


@pytest.mark.parametrize(
    ("urdf", "frames", "dof"),
    [
        (TALOS, HANDS, 16),
        (SOLO, FEET, 12),
        ("baxter_description/urdf/baxter.urdf", ["left_gripper", "right_gripper"], 14),
    ],
    ids=["talos-hands", "solo12-feet", "baxter-arms"],
)
def test_fk_and_jacobian_of_every_frame_match_pinocchio(erd_urdf, pin_reference, rng, urdf, frames, dof):
    robot = ik_layer.load_robot(erd_urdf(urdf), ee_frames=frames)
    assert robot.dof == dof and robot.ee_frames == tuple(frames) and robot.target_shape == (len(frames), 4, 4)
    q = robot.random_q((200,), generator=rng)
    pose, jac = robot.fk_jacobian(q)
    assert pose.shape == (200, len(frames), 4, 4) and jac.shape == (200, len(frames), 6, dof)
    for f, frame in enumerate(frames):
        ref_pose, ref_jac = pin_reference(robot, q, frame)
        np.testing.assert_allclose(pose[:, f].numpy(), ref_pose, atol=1e-10, rtol=0)
        np.testing.assert_allclose(jac[:, f].numpy(), ref_jac, atol=1e-10, rtol=0)
    torch.testing.assert_close(robot.fk(q), pose, atol=0, rtol=0)


def test_one_frame_given_as_a_list_keeps_the_frame_dimension(erd_urdf, rng):
    single = ik_layer.load_robot(erd_urdf(SOLO), "FL_FOOT")
    listed = ik_layer.load_robot(erd_urdf(SOLO), ee_frames=["FL_FOOT"])
    q = single.random_q((5,), generator=rng)
    assert single.ee_frames is None and list(listed.ee_frames) == ["FL_FOOT"]
    torch.testing.assert_close(listed.fk(q), single.fk(q)[:, None], atol=0, rtol=0)
    torch.testing.assert_close(listed.fk_jacobian(q)[1], single.fk_jacobian(q)[1][:, None], atol=0, rtol=0)


def test_both_hands_solve_and_locked_joints_stay(hands, rng):
    q = hands.random_q((300,), generator=rng)
    result = ik_layer.solve(hands, hands.fk(q), generator=torch.Generator().manual_seed(1))
    assert result.success.double().mean() >= 0.99
    assert float(result.position_error[result.success].max()) <= 1e-4
    assert float(result.orientation_error[result.success].max()) <= 1e-3
    q_full = hands.to_full_pinocchio_q(result.q)
    others = [n for n in hands.full_model.names[1:] if n not in hands.joint_names]
    assert len(others) == 16  # legs and head
    assert (full_values(hands, q_full, others) == full_values(hands, q_full[:1], others)).all()


def test_four_feet_position_only(feet, rng):
    q = feet.random_q((300,), generator=rng)
    target = feet.fk(q)
    target[..., :3, :3] = torch.eye(3, dtype=F64)  # orientations are ignored: any will do
    result = ik_layer.solve(feet, target, weights=POSITION_ONLY, generator=torch.Generator().manual_seed(2))
    assert result.success.double().mean() >= 0.99
    assert float(result.orientation_error.abs().max()) == 0.0  # no weighted rotation axis
    reached = feet.fk(result.q)[..., :3, 3]
    worst = (reached - target[..., :3, 3]).norm(dim=-1).amax(-1)
    torch.testing.assert_close(result.position_error, worst, atol=1e-12, rtol=0)  # the worst foot's error
    assert float(worst[result.success].max()) <= 1e-4


def test_locked_torso_with_both_hands(erd_urdf, rng):
    torso = {"torso_1_joint": 0.2, "torso_2_joint": 0.1}
    robot = ik_layer.load_robot(erd_urdf(TALOS), ee_frames=HANDS, locked=torso)
    assert robot.dof == 14
    q = robot.random_q((100,), generator=rng)
    result = ik_layer.solve(robot, robot.fk(q), generator=torch.Generator().manual_seed(3))
    assert result.success.double().mean() >= 0.99
    held = full_values(robot, robot.to_full_pinocchio_q(result.q), list(torso))
    torch.testing.assert_close(held, torch.tensor([[0.2, 0.1]] * 100, dtype=F64), atol=0, rtol=0)


def test_success_needs_every_frame(feet, rng):
    q = feet.random_q((4,), generator=rng)
    target = feet.fk(q)
    target[1, 2, :3, 3] += 5.0  # one foot of the second target out of reach
    result = ik_layer.solve(feet, target, weights=POSITION_ONLY, max_iterations=40)
    assert result.success.tolist() == [True, False, True, True]
    assert float(result.position_error[1]) > 1.0


def test_per_frame_weights(hands, rng):
    q = hands.random_q((100,), generator=rng)
    target = hands.fk(q)
    target[:, 1, :3, :3] = torch.eye(3, dtype=F64)  # the right hand's orientation is ignored: any will do
    weights = torch.ones(2, 6, dtype=F64)
    weights[1, 3:] = 0
    result = ik_layer.solve(hands, target, weights=weights, generator=torch.Generator().manual_seed(4))
    assert result.success.double().mean() >= 0.99
    reached = hands.fk(result.q)[result.success]
    position = (reached[..., :3, 3] - target[result.success][..., :3, 3]).norm(dim=-1)
    assert float(position.max()) <= 1e-4
    left = pose_error(target[result.success][:, 0], reached[:, 0])[:, 3:].norm(dim=-1)
    torch.testing.assert_close(result.orientation_error[result.success], left, atol=1e-12, rtol=0)  # left hand only
    weights[1] = 0
    with pytest.raises(IKLayerError, match="at least one non-zero entry"):  # every frame needs a weight
        ik_layer.solve(hands, target, weights=weights)


def test_implicit_gradient_of_four_feet_matches_finite_differences(feet):
    q = torch.tensor([0.1, 0.8, -1.6, -0.1, 0.7, -1.5, 0.2, -0.8, 1.6, -0.2, -0.7, 1.4], dtype=F64)
    target = feet.fk(q)
    position = target[..., :3, 3].clone()
    cotangent = torch.randn(12, dtype=F64, generator=torch.Generator().manual_seed(5))

    def loss(p: torch.Tensor) -> torch.Tensor:
        moved = from_rotation_translation(target[..., :3, :3], p)
        return (cotangent * ik_layer.ik(feet, moved, weights=POSITION_ONLY, warm_start=q, **TIGHT)).sum()

    leaf = position.clone().requires_grad_()
    (analytic,) = torch.autograd.grad(loss(leaf), leaf)
    h, numeric = 1e-6, torch.zeros_like(position)
    for f in range(4):
        for axis in range(3):
            step = torch.zeros_like(position)
            step[f, axis] = h
            numeric[f, axis] = (loss(position + step) - loss(position - step)) / (2 * h)
    torch.testing.assert_close(analytic, numeric, atol=1e-6, rtol=1e-5)
    grad = ik_layer.target_gradient(feet, q, POSITION_ONLY)  # (dof, F, 6)
    assert grad.shape == (12, 4, 6)
    torch.testing.assert_close((cotangent @ grad.flatten(1)).reshape(4, 6)[:, :3], analytic, atol=1e-8, rtol=1e-6)


def central_differences(loss, x: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    """d loss / dx (x's shape) by central differences of re-solved IK."""
    steps = h * torch.eye(x.numel(), dtype=x.dtype).reshape(-1, *x.shape)
    return torch.stack([(loss(x + step) - loss(x - step)) / (2 * h) for step in steps]).reshape(x.shape)


def test_shared_base_gradient_of_four_feet_matches_finite_differences(feet):
    q = torch.tensor([0.1, 0.8, -1.6, -0.1, 0.7, -1.5, 0.2, -0.8, 1.6, -0.2, -0.7, 1.4], dtype=F64)
    base_pos = torch.tensor([0.05, -0.02, 0.3], dtype=F64)
    eye = torch.eye(3, dtype=F64)
    target = from_rotation_translation(eye, base_pos) @ feet.fk(q)
    cotangent = torch.randn(12, dtype=F64, generator=torch.Generator().manual_seed(6))

    def loss(b: torch.Tensor) -> torch.Tensor:
        base = from_rotation_translation(eye, b)  # one base for the four feet
        return (cotangent * ik_layer.ik(feet, target, base=base, weights=POSITION_ONLY, warm_start=q, **TIGHT)).sum()

    leaf = base_pos.clone().requires_grad_()
    (analytic,) = torch.autograd.grad(loss(leaf), leaf)
    torch.testing.assert_close(analytic, central_differences(loss, base_pos), atol=1e-6, rtol=1e-5)


def test_tool_per_frame_gradient_of_both_hands_matches_finite_differences(hands, rng):
    # Redundant (16 joints, 12 rows): re-solving from the solution takes the minimum-norm step, as the layer does.
    q = hands.random_q((1,), generator=rng)[0]
    eye = torch.eye(3, dtype=F64)
    offsets = torch.tensor([[0.0, 0.02, -0.1], [0.01, -0.02, -0.12]], dtype=F64)  # one tool per hand
    target = hands.fk(q) @ from_rotation_translation(eye, offsets)
    cotangent = torch.randn(16, dtype=F64, generator=torch.Generator().manual_seed(8))

    def loss(t: torch.Tensor) -> torch.Tensor:
        tool = from_rotation_translation(eye, t)
        return (cotangent * ik_layer.ik(hands, target, tool=tool, warm_start=q, **TIGHT)).sum()

    leaf = offsets.clone().requires_grad_()
    (analytic,) = torch.autograd.grad(loss(leaf), leaf)
    torch.testing.assert_close(analytic, central_differences(loss, offsets), atol=1e-5, rtol=1e-4)


def test_redundant_bimanual_gradient_is_a_right_inverse(hands, rng):
    q = hands.random_q((3,), generator=rng)
    grad = ik_layer.target_gradient(hands, q)  # (3, 16, 2, 6)
    _, jac = hands.fk_jacobian(q)
    stacked = jac.flatten(1, 2)  # (3, 12, 16)
    torch.testing.assert_close(stacked @ grad.flatten(2), torch.eye(12, dtype=F64).expand(3, 12, 12), atol=1e-8, rtol=0)
    target = hands.fk(q).requires_grad_()
    solved = ik_layer.ik_solve(hands, target, warm_start=q, **TIGHT)
    assert bool(solved.success.all())
    cotangent = torch.randn(3, 16, dtype=F64, generator=torch.Generator().manual_seed(7))
    (grad_target,) = torch.autograd.grad(solved.q, target, cotangent)
    expected = (cotangent[:, None, :] @ grad.flatten(2)).reshape(3, 2, 6)[..., :3]
    torch.testing.assert_close(grad_target[..., :3, 3], expected, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({"ee_frames": []}, IKLayerError, "non-empty sequence", id="empty"),
        pytest.param({"ee_frames": "FL_FOOT"}, IKLayerError, "non-empty sequence", id="lone-string"),
        pytest.param({"ee_frames": ["FL_FOOT", 3]}, IKLayerError, "non-empty sequence", id="not-a-name"),
        pytest.param({"ee_frames": ["FL_FOOT", "FL_FOOT"]}, IKLayerError, "repeat", id="repeated"),
        pytest.param({"ee_frames": ["FL_FOOT", "nope"]}, FrameNotFound, "unknown frame 'nope'", id="unknown"),
        pytest.param({"ee_frame": "FL_FOOT", "ee_frames": ["FR_FOOT"]}, IKLayerError, "not both", id="both"),
    ],
)
def test_bad_frames(erd_urdf, kwargs, error, match):
    with pytest.raises(error, match=match):
        ik_layer.load_robot(erd_urdf(SOLO), **kwargs)


def test_targets_and_weights_need_one_entry_per_frame(feet, rng):
    target = feet.fk(feet.random_q((3,), generator=rng))
    with pytest.raises(ShapeError, match=r"\(\.\.\., 4, 4, 4\) or \(\.\.\., 4, 7\)"):
        ik_layer.solve(feet, target[:, :2])
    with pytest.raises(ShapeError, match="target must have shape"):
        ik_layer.solve(feet, target[0, 0])
    with pytest.raises(ShapeError, match="weights of shape"):
        ik_layer.solve(feet, target, weights=torch.ones(3, 6, dtype=F64))
    with pytest.raises(ShapeError, match="target must have shape"):
        ik_layer.ik(feet, target[:, :3])
    with pytest.raises(ShapeError, match="base has batch shape"):
        ik_layer.ik(feet, target, base=torch.eye(4, dtype=F64).expand(3, 4, 4, 4))
