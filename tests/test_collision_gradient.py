"""Gradients of collision-aware IK (issue: dq/d(target) and dq/d(obstacle) through the implicit layer): with the
collision term active at the answer, ``ik()``'s gradient is the derivative of the answer's optimality condition
``[pose error; P grad S]`` (S: the collision cost), checked against central differences of re-found optima; far
from every obstacle it is the plain minimum-norm gradient and the obstacles get none."""

from __future__ import annotations

import pytest
import torch

import ik_layer
from ik_layer import Box, Sphere
from ik_layer.collision.cost import CollisionCost
from ik_layer.model.lie import pose_error, so3_exp

F64 = torch.float64
MARGIN, ACTIVATION = 0.01, 0.2  # a wide activation: the cost stays positive at the optimum, which is then unique


def perturbed(target: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
    """``target`` moved by ``xi = [v, w]``: translated by ``v`` and rotated by ``exp(w)`` (world axes)."""
    out = target.clone()
    out[:3, :3] = so3_exp(xi[3:]) @ target[:3, :3]
    out[:3, 3] = target[:3, 3] + xi[:3]
    return out


def collision_cost(robot: ik_layer.Robot, q: torch.Tensor, centre: torch.Tensor, radius: torch.Tensor) -> torch.Tensor:
    """The collision cost ``1/2 sum max(0, margin + activation - d)^2`` of the sphere obstacle, by autograd-able
    torch (the library's distances, not its closed-form gradient)."""
    options = ik_layer.SolveOptions.build(collision_margin=MARGIN, collision_activation=ACTIVATION)
    cost = CollisionCost.of(robot, [Sphere(centre, radius)], options)
    assert cost is not None
    d = cost.distances(cost.spheres.centres(robot, q, jacobian=False)[0])
    return 0.5 * (MARGIN + ACTIVATION - d).clamp_min(0).square().sum()


def optimality(robot, q, target, centre, radius) -> torch.Tensor:
    """``[pose error; P grad S]``, ``grad S`` by autograd, ``P`` by the pseudo-inverse."""
    error = pose_error(target, robot.kinematics(q, jacobian=False)[0])
    jac = robot.kinematics(q, jacobian=True)[1]
    grad = torch.autograd.grad(collision_cost(robot, q, centre, radius), q, create_graph=True)[0]
    projector = torch.eye(robot.dof, dtype=q.dtype) - torch.linalg.pinv(jac) @ jac
    return torch.cat((error, projector @ grad))


def optimum(robot, q, target, centre, radius) -> torch.Tensor:
    """The configuration near ``q`` reaching ``target`` at a minimum of the collision cost on its solutions."""
    for _ in range(60):
        x = q.detach().requires_grad_(True)
        residual = optimality(robot, x, target, centre, radius)
        if float(residual.detach().abs().max()) < 1e-13:
            return q
        rows = [torch.autograd.grad(r, x, retain_graph=True)[0] for r in residual]
        q = q - torch.linalg.lstsq(torch.stack(rows), residual.detach()[:, None]).solution[:, 0]
    raise AssertionError(f"no optimum: residual {float(residual.detach().abs().max())}")


@pytest.fixture(scope="module")
def scene() -> tuple[ik_layer.Robot, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """panda, a target, a ball obstacle (centre, radius) within the activation of the elbow, and the optimum."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    middle = (robot.lower + robot.upper) / 2
    q0 = middle + 0.4 * (robot.random_q((1,), generator=torch.Generator().manual_seed(10))[0] - middle)
    centre = torch.tensor([0.2389, 0.1205, 0.5462], dtype=F64)  # 6 cm from the elbow's spheres at q0
    radius = torch.tensor(0.05, dtype=F64)
    target = robot.fk(q0)
    q_star = optimum(robot, q0, target, centre, radius)
    cost = CollisionCost.of(robot, [Sphere(centre, radius)], ik_layer.SolveOptions.build(collision_margin=MARGIN))
    assert cost is not None
    least = float(cost.min_distance(robot, q_star))
    assert MARGIN < least < MARGIN + ACTIVATION  # free, and the term active
    return robot, target, centre, radius, q_star


def test_the_gradient_follows_the_optimum_as_the_target_and_the_obstacle_move(scene) -> None:
    robot, target, centre, radius, q_star = scene
    xi = torch.zeros(6, dtype=F64, requires_grad=True)
    c = centre.clone().requires_grad_(True)
    r = radius.clone().requires_grad_(True)
    q = ik_layer.ik(
        robot,
        perturbed(target, xi),
        warm_start=q_star,
        obstacles=[Sphere(c, r)],
        collision_margin=MARGIN,
        collision_activation=ACTIVATION,
    )
    torch.testing.assert_close(q.detach(), q_star, atol=1e-12, rtol=0)  # free and within tolerance: kept as it is
    rows = [torch.autograd.grad(q[j], (xi, c, r), retain_graph=True) for j in range(7)]
    analytic = torch.stack([torch.cat((dxi, dc, dr[None])) for dxi, dc, dr in rows])

    h = 1e-6
    numeric = torch.zeros(7, 10, dtype=F64)
    for k in range(10):
        ends = []
        for sign in (1.0, -1.0):
            step = torch.zeros(10, dtype=F64)
            step[k] = sign * h
            moved = perturbed(target, step[:6])
            ends.append(optimum(robot, q_star, moved, centre + step[6:9], radius + step[9]))
        numeric[:, k] = (ends[0] - ends[1]) / (2 * h)
    # the obstacle moves the answer (its null-space motion), and the target's gradient is not the minimum-norm one
    assert float(numeric[:, 6:].abs().max()) > 0.1
    minimum_norm = ik_layer.target_gradient(robot, q_star)
    assert float((minimum_norm - numeric[:, :6]).abs().max()) > 0.05
    torch.testing.assert_close(analytic, numeric, atol=2e-5, rtol=0)


def test_far_obstacles_leave_the_plain_gradient_and_get_none(scene) -> None:
    robot, target, _centre, _radius, q_star = scene
    xi = torch.zeros(6, dtype=F64, requires_grad=True)
    size = torch.tensor([0.2, 0.2, 0.2], dtype=F64, requires_grad=True)
    far = Box(torch.tensor([5.0, 5.0, 5.0, 0, 0, 0, 1], dtype=F64), size)
    q = ik_layer.ik(robot, perturbed(target, xi), warm_start=q_star, obstacles=[far])
    analytic = torch.stack([torch.autograd.grad(q[j], xi, retain_graph=True)[0] for j in range(7)])
    # At the answer found: both solves are damped (the backward's [J; 0] as target_gradient's J), and at this redundant
    # arm's answers they differ by 4.2e-7 (this file alone, residual 5e-16) to 1.25e-6 (two full-suite runs, whose
    # answer differs).
    torch.testing.assert_close(analytic, ik_layer.target_gradient(robot, q.detach()), atol=1e-5, rtol=0)
    (q**2).sum().backward()
    assert size.grad is not None and float(size.grad.abs().max()) == 0.0


def test_the_layer_takes_obstacles_per_call_and_passes_their_gradient(scene) -> None:
    robot, target, centre, radius, q_star = scene
    layer = ik_layer.IKLayer(robot, warm_start=q_star, collision_margin=MARGIN, collision_activation=ACTIVATION)
    c = centre.clone().requires_grad_(True)
    result = layer(target, obstacles=[Sphere(c, radius)])
    direct = ik_layer.ik_solve(
        robot, target, warm_start=q_star, obstacles=[Sphere(c, radius)], collision_margin=MARGIN,
        collision_activation=ACTIVATION,
    )  # fmt: skip
    assert result.min_distance is not None and float(result.min_distance) > MARGIN
    weights = torch.linspace(-1, 1, 7, dtype=F64)  # a loss the obstacle moves (the plain sum nearly cancels)
    (grad_layer,) = torch.autograd.grad((weights * result.q).sum(), c)
    (grad_direct,) = torch.autograd.grad((weights * direct.q).sum(), c)
    torch.testing.assert_close(grad_layer, grad_direct, atol=1e-12, rtol=0)
    assert float(grad_layer.abs().max()) > 0.1
    plain = layer(target)  # without obstacles: the target alone
    assert plain.min_distance is None


def test_each_target_gets_the_gradient_of_its_own_scene(scene) -> None:
    """Two targets, each with its own ball (same place, separate tensors): each answer moves with its own ball
    as the single target does with it, and not with the other's."""
    robot, target, centre, radius, q_star = scene
    options = {"collision_margin": MARGIN, "collision_activation": ACTIVATION}
    c = centre.clone().requires_grad_(True)
    alone = ik_layer.ik(robot, target, warm_start=q_star, obstacles=[Sphere(c, radius)], **options)
    weights = torch.linspace(-1, 1, 7, dtype=F64)
    (expected,) = torch.autograd.grad((weights * alone).sum(), c)
    balls = [centre.clone().requires_grad_(True) for _ in range(2)]
    both = ik_layer.ik(
        robot, torch.stack([target, target]), warm_start=torch.stack([q_star, q_star]),
        obstacles=[[Sphere(balls[0], radius)], [Sphere(balls[1], radius)]], **options,
    )  # fmt: skip
    for row in range(2):
        grads = torch.autograd.grad((weights * both[row]).sum(), balls, retain_graph=True)
        torch.testing.assert_close(grads[row], expected, atol=1e-9, rtol=0)
        assert float(grads[1 - row].abs().max()) == 0.0
    assert float(expected.abs().max()) > 0.1
