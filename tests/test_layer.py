"""The IK layer's implicit gradients against finite differences of re-solved IK, gradcheck and closed forms."""

from __future__ import annotations

import pytest
import torch

import ik_layer
from ik_layer.model.lie import from_rotation_translation, matrix_to_pose, so3_exp

F64 = torch.float64
# Solve to the float64 floor: a residual e moves q by up to cond(J) |e|, which finite differences divide by h.
TIGHT = {"position_tolerance": 1e-14, "orientation_tolerance": 1e-14, "num_seeds": 1}


def reachable(name: str, n: int, seed: int, margin: float = 0.2) -> tuple[ik_layer.Robot, torch.Tensor, torch.Tensor]:
    """A robot, configurations away from its limits, and their poses."""
    robot = ik_layer.load_robot(name)
    g = torch.Generator().manual_seed(seed)
    span = robot.upper - robot.lower
    q = robot.lower + margin * span + (1 - 2 * margin) * span * torch.rand(n, robot.dof, generator=g, dtype=F64)
    return robot, q, robot.fk(q)


def moved(target: torch.Tensor, twist: torch.Tensor) -> torch.Tensor:
    """The target moved by a twist [dv; dw] about its own origin: p + dv, exp([dw]x) R."""
    return from_rotation_translation(so3_exp(twist[..., 3:]) @ target[..., :3, :3], target[..., :3, 3] + twist[..., :3])


def assert_gradient_matches_central_differences(loss, x: torch.Tensor, h: float = 1e-6) -> None:
    """The autograd gradient of the scalar ``loss`` at ``x`` (n,) equals central differences of re-solved IK."""
    leaf = x.clone().requires_grad_()
    (analytic,) = torch.autograd.grad(loss(leaf), leaf)
    steps = h * torch.eye(x.shape[0], dtype=x.dtype)
    numeric = torch.stack([(loss(x + step) - loss(x - step)) / (2 * h) for step in steps])
    torch.testing.assert_close(analytic, numeric.detach(), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["ur5e", "planar3"])
def test_target_gradient_matches_finite_differences_of_resolved_ik(name: str) -> None:
    robot, q, target = reachable(name, 8, seed=1)
    _, jac = robot.fk_jacobian(q)
    conditioned = torch.linalg.svdvals(jac).min(-1).values > 0.05  # finite differences need distance from singularities
    q, target = q[conditioned][:4], target[conditioned][:4]
    assert len(q) == 4
    grad = ik_layer.target_gradient(robot, q)
    h = 1e-5
    twist_dirs = torch.eye(6, dtype=F64)
    if name == "planar3":  # in-plane motions only: x, y, yaw
        twist_dirs = twist_dirs[[0, 1, 5]]
    for direction in twist_dirs:
        plus = ik_layer.solve(robot, moved(target, h * direction), warm_start=q, **TIGHT).q
        minus = ik_layer.solve(robot, moved(target, -h * direction), warm_start=q, **TIGHT).q
        numeric = (plus - minus) / (2 * h)
        torch.testing.assert_close(grad @ direction, numeric, atol=1e-6, rtol=1e-5)


def test_autograd_through_ik_equals_target_gradient() -> None:
    robot, q, target = reachable("ur5e", 3, seed=2)
    pose = matrix_to_pose(target).requires_grad_()
    result = ik_layer.ik_solve(robot, pose, warm_start=q, **TIGHT)
    assert bool(result.success.all())
    cotangent = torch.randn(3, robot.dof, dtype=F64, generator=torch.Generator().manual_seed(3))
    (grad_position,) = torch.autograd.grad(result.q, pose, cotangent)
    expected = (cotangent[:, None, :] @ ik_layer.target_gradient(robot, q)).squeeze(1)[:, :3]
    torch.testing.assert_close(grad_position[:, :3], expected, atol=1e-8, rtol=1e-6)


def test_gradcheck_ik_on_six_dof_arm() -> None:
    robot, q, target = reachable("ur5e", 2, seed=4)
    pose = matrix_to_pose(target).requires_grad_()

    def solve(p: torch.Tensor) -> torch.Tensor:
        return ik_layer.ik(robot, p, warm_start=q, **TIGHT)

    assert torch.autograd.gradcheck(solve, (pose,), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_redundant_arm_gradient_is_a_right_inverse_and_minimum_norm() -> None:
    robot, q, _ = reachable("panda", 5, seed=5)
    grad = ik_layer.target_gradient(robot, q)
    _, jac = robot.fk_jacobian(q)
    torch.testing.assert_close(jac @ grad, torch.eye(6, dtype=F64).expand(5, 6, 6), atol=1e-8, rtol=0)
    # Minimum norm: the columns of dq/dtwist lie in the row space of J (orthogonal to its null space).
    null = torch.linalg.svd(jac, full_matrices=True).Vh[:, -1]  # (5, 7)
    assert float((null[:, None, :] @ grad).abs().max()) < 1e-8


def test_tool_offset_gradient_matches_finite_differences() -> None:
    robot, q, flange = reachable("ur5e", 3, seed=6)
    eye = torch.eye(3, dtype=F64)
    offset = torch.tensor([0.01, -0.02, 0.1], dtype=F64)
    target = flange @ from_rotation_translation(eye, offset)
    weights = torch.randn(3, robot.dof, dtype=F64, generator=torch.Generator().manual_seed(7))

    def loss(t: torch.Tensor) -> torch.Tensor:
        tool = from_rotation_translation(eye, t)
        return (weights * ik_layer.ik(robot, target, tool=tool, warm_start=q, **TIGHT)).sum()

    assert_gradient_matches_central_differences(loss, offset)


def test_base_transform_gradient_matches_finite_differences() -> None:
    robot, q, target_base = reachable("ur5e", 2, seed=8)
    base_pos = torch.tensor([0.3, -0.1, 0.05], dtype=F64)
    eye = torch.eye(3, dtype=F64)
    target = from_rotation_translation(eye, base_pos) @ target_base

    def loss(p: torch.Tensor) -> torch.Tensor:
        return ik_layer.ik(robot, target, base=from_rotation_translation(eye, p), warm_start=q, **TIGHT)[:, 2].sum()

    assert_gradient_matches_central_differences(loss, base_pos)


def test_failed_rows_get_zero_gradient_without_nan() -> None:
    robot, _q, target = reachable("ur5e", 3, seed=9)
    target = target.clone()
    target[1, :3, 3] += 5.0  # 5 m away: unreachable
    target.requires_grad_()
    result = ik_layer.ik_solve(robot, target, max_iterations=60, generator=torch.Generator().manual_seed(0))
    assert result.success.tolist() == [True, False, True]
    result.q.sum().backward()
    assert torch.isfinite(target.grad).all()
    assert float(target.grad[1].abs().max()) == 0.0
    assert float(target.grad[0].abs().max()) > 0.0


def test_singular_configuration_gives_finite_gradient() -> None:
    robot = ik_layer.load_robot("ur5e")
    q = torch.tensor([[0.3, -1.2, 1.0, -1.4, 0.0, 0.7]], dtype=F64)  # wrist_2 = 0: wrist singularity
    target = robot.fk(q).requires_grad_()
    result = ik_layer.ik_solve(robot, target, warm_start=q)
    assert bool(result.success.all())
    result.q.sum().backward()
    assert torch.isfinite(target.grad).all()
    assert torch.isfinite(ik_layer.target_gradient(robot, q)).all()


def test_ik_layer_module_matches_function() -> None:
    robot, q, target = reachable("ur5e", 2, seed=10)
    layer = ik_layer.IKLayer(robot, warm_start=q, **TIGHT)
    torch.testing.assert_close(layer(target).q, ik_layer.ik(robot, target, warm_start=q, **TIGHT))
    assert list(layer.buffers())  # the robot's tensors move with the layer
    assert layer.options == ik_layer.SolveOptions(**TIGHT)
    from_options = ik_layer.IKLayer(robot, ik_layer.SolveOptions(**TIGHT), warm_start=q)
    torch.testing.assert_close(from_options(target).q, layer(target).q, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["tool", "base"])
def test_tool_or_base_batch_must_broadcast_to_the_targets(name: str) -> None:
    robot, _, target = reachable("ur5e", 2, seed=11)
    offsets = torch.eye(4, dtype=F64).expand(3, 4, 4)  # batch (3,) against targets (2,)
    with pytest.raises(ik_layer.ShapeError, match=name):
        ik_layer.ik(robot, target, **{name: offsets})
    with pytest.raises(ik_layer.ShapeError, match=name):  # would widen the targets' batch
        ik_layer.ik(robot, target[0], **{name: offsets[:2]})


def test_ik_without_a_robot_raises() -> None:
    _, _, target = reachable("ur5e", 1, seed=12)
    with pytest.raises(ik_layer.IKLayerError, match="robot"):
        ik_layer.ik(None, target)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [torch.int64, torch.float16, "gpu0"])
def test_ik_layer_to_refuses_what_the_robot_refuses(bad: object) -> None:
    layer = ik_layer.IKLayer(ik_layer.load_robot("planar3"))
    with pytest.raises(ik_layer.IKLayerError):
        layer.to(bad)
    assert layer.robot.dtype == F64
