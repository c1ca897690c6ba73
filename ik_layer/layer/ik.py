"""The differentiable IK layer: :func:`solve` forward, implicit-function-theorem backward.

The solution ``q*`` of a target ``T`` is a root of the weighted pose residual

    r(q, T, tool, base) = W^1/2 pose_error(T, base @ fk(q) @ tool)   (6,)

so at a converged row ``dq = -(dr/dq)^+ (dr/dT dT + dr/dtool dtool + dr/dbase dbase)``.
With ``dr/dq = -W^1/2 J`` (J: the tool frame's Jacobian in the world, exact at
zero error) this is ``dq = (W^1/2 J)^+ W^1/2 twist``: the unique inverse for a
6-DoF arm, the minimum-norm (damped) solution for a redundant one, and the
least-squares one for an arm with fewer than 6 joints. The backward pass never
re-runs the solver: it is one damped solve per row plus one vector-Jacobian
product of ``r``. Rows that did not converge get zero gradient.

Secondary terms (:mod:`ik_layer.terms`: a posture, ``centring``, ``manipulability``) add their share to the
optimality condition: with ``S`` the gain-weighted sum of their costs and ``P = I - A^+ A`` the projector on the
null space of ``A = W^1/2 J``, the solution is a root of

    F(q, T, tool, base) = [r; P grad S]   (6 + dof,)

so the gradient follows the optimum of ``S`` on the target's solutions (a redundant arm moves its null-space
motion as that optimum moves, not by the minimum norm). This is exact where the returned ``q`` is that optimum
(``P grad S = 0``); the solver polishes its successes towards it (:data:`ik_layer.core.lm.LM`'s ``polish_*``), and
where a polish stopped short it is the motion that keeps ``P grad S`` as it is. Without secondary terms ``F = r``.

Several end-effector frames (``load_robot(..., ee_frames=[...])``): ``r`` stacks the F frames'
residuals (6F rows) and J their Jacobians; targets are (..., F, 4, 4), the tool is per frame
((..., F, 4, 4), or one (4, 4) for all) and the base is the robot's, shared by its frames ((..., 4, 4)).

The unknown of the implicit function is the tangent ``dq`` (dof) at the solution: ``q = integrate(q*, dq)``
at ``dq = 0`` (:meth:`Robot.integrate`). Without a floating base this is ``q* + dq``; with one, ``dq`` is
``[base twist in the base frame (6), joints]`` and the gradient reaches the base's position and
quaternion through the exponential map.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from ik_layer.api import solve_problem
from ik_layer.collision.cost import CollisionCost
from ik_layer.collision.shapes import Obstacle, Scenes
from ik_layer.core.options import OPTION_SPECS, SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.core.result import IKResult
from ik_layer.exceptions import IKLayerError, ShapeError
from ik_layer.layer.implicit import damped_pseudo_inverse, implicit_root
from ik_layer.model.lie import as_transform, from_rotation_translation, invert_transform, pose_error, skew
from ik_layer.model.robot import Robot
from ik_layer.terms.objective import Objective

__all__ = ["IKLayer", "ik", "ik_solve", "target_gradient"]

_RUN_ARGUMENTS = ("generator", "reference", "engine", "timeout", "num_solutions", "objective")
"""The arguments of :func:`ik_layer.api.solve_problem` among :func:`ik_solve`'s (the rest prepare the problem)."""


def ik_solve(
    robot: Robot,
    target: Tensor,
    options: SolveOptions | None = None,
    *,
    tool: Tensor | None = None,
    base: Tensor | None = None,
    weights: Tensor | None = None,
    **solve_arguments: Any,
) -> IKResult:
    """Solve IK and return an :class:`IKResult` whose ``q`` is differentiable.

    Args:
        robot: the robot.
        target: ``T_world_tool`` targets, (..., 4, 4) or poses (..., 7); may require grad. With F
            end-effector frames (..., F, 4, 4) or (..., F, 7).
        options: the solver's options (default: :class:`SolveOptions` defaults).
        tool: optional ``T_ee_tool`` (4, 4) or (..., 4, 4) tool offset; may require grad. With F frames one
            per frame, (..., F, 4, 4), or one (4, 4) for all.
        base: optional ``T_world_base`` (4, 4) or (..., 4, 4) base transform, shared by all frames; may
            require grad.
        weights: per-axis weights of the error, as in :func:`solve`.
        **solve_arguments: passed to :func:`solve` (``warm_start``, ``posture``, ``obstacles``, ``generator``,
            option changes such as ``num_seeds=8``).

    Returns:
        The solution; ``q`` (..., nq) carries implicit gradients w.r.t. ``target``, ``tool``, ``base`` and the
        tensors of the ``obstacles`` (centres, radii, poses, sizes, end points) that require grad; rows with
        ``success=False`` get zero gradient.
    """
    if not isinstance(robot, Robot):
        raise IKLayerError(f"robot must be an ik_layer.Robot (see load_robot), got {type(robot).__name__}")
    running = {name: solve_arguments.pop(name) for name in _RUN_ARGUMENTS if name in solve_arguments}
    problem = Problem.prepare(robot, target, options, weights=weights, **solve_arguments)  # the one check
    targets = problem.batch
    target_t = problem.target.reshape(*targets, *robot.target_shape)  # checked, as differentiable as given
    frames = len(robot.target_shape) - 2  # 1 with several end-effector frames: the base is shared by them
    tool_t = _transform_or_identity(tool, "tool", target_t, target_t.shape[:-2])
    base_t = _transform_or_identity(base, "base", target_t, targets)
    with torch.no_grad():
        solved = problem
        if tool is not None or base is not None:  # the end-effector's targets: products of rigid transforms
            ee_target = _per_frame(robot, invert_transform(base_t)) @ target_t @ invert_transform(tool_t)
            solved = replace(problem, target=ee_target.reshape(problem.target.shape))
        result = solve_problem(robot, solved, **running)
    sqrt_w = _sqrt_weights(robot, weights)
    if result.goal is not None:  # a goal set: the inputs of the goal each row reached
        goal, goals = result.goal, target_t.shape[result.goal.dim()]
        target_t = _reached(target_t, goal, goals, 2 + frames)
        tool_t, base_t = _reached(tool_t, goal, goals, 2 + frames), _reached(base_t, goal, goals, 2)
        sqrt_w = _reached(sqrt_w, goal, goals, 1 + frames)
    posture = solve_arguments.get("posture")
    opts, obstacles = problem.options, problem.obstacles
    if result.q.dim() > len(targets) + 1:  # num_solutions > 1: each input gains the solutions' axis
        target_t = _per_solution(target_t, 2 + frames)
        tool_t, base_t = _per_solution(tool_t, 2 + frames), _per_solution(base_t, 2)
        sqrt_w = _per_solution(sqrt_w, 1 + frames)
        posture = None if posture is None else _per_solution(torch.as_tensor(posture), 1)
    if posture is not None:  # as the solve took it: one per target row
        posture = posture.expand_as(result.q)
    added = {name: replace(term, data=_term_rows(problem, term.data, result)) for name, term in problem.terms.items()}
    objective = Objective.of(robot, opts, posture, CollisionCost.of(robot, obstacles, opts), added)

    def residual(dq: Tensor, target_: Tensor, tool_: Tensor, base_: Tensor, *tensors: Tensor) -> Tensor:
        q = robot.integrate(result.q, dq)
        pose, jac = robot.kinematics(q, jacobian=True)  # torch kinematics: differentiable in q
        r = (sqrt_w * pose_error(target_, _per_frame(robot, base_) @ pose @ tool_)).flatten(dq.dim() - 1)
        if not objective.active:
            return r
        weighted = (sqrt_w[..., None] * _tool_jacobian(robot, pose, jac, tool_, base_)).flatten(dq.dim() - 1, -2)
        collision = None  # with the obstacles' tensors as the residual takes them (their gradients)
        if objective.collision is not None:
            collision = CollisionCost.of(robot, _with_tensors(obstacles, tensors), opts)
            assert collision is not None  # as above
            collision = collision.reshaped(targets)
        grad = replace(objective, collision=collision).gradient(q, jac.flatten(dq.dim() - 1, -2))
        return torch.cat((r, _null_space_part(weighted, grad)), -1)

    jac = None  # the secondary rows' Jacobian: by autograd
    if not objective.active:
        with torch.no_grad():
            pose, ee_jac = robot.fk_jacobian(result.q)
            jac = -sqrt_w[..., None] * _tool_jacobian(robot, pose, ee_jac, tool_t, base_t)
            jac = jac.flatten(result.q.dim() - 1, -2)
    at_solution = result.q.new_zeros(*result.q.shape[:-1], robot.dof)
    inputs = (target_t, tool_t, base_t, *_obstacle_tensors(obstacles))
    dq = implicit_root(at_solution, residual, inputs, jacobian=jac, valid=result.success)
    q = robot.integrate(result.q, dq)
    return replace(result, q=q)


def ik(robot: Robot, target: Tensor, options: SolveOptions | None = None, **arguments: Any) -> Tensor:
    """Configurations (..., nq) of ``target`` with implicit gradients; see :func:`ik_solve`."""
    return ik_solve(robot, target, options, **arguments).q


class IKLayer(nn.Module):
    """IK as an ``nn.Module``: ``layer(target, tool=None, base=None, obstacles=None) -> IKResult``.

    The robot is a submodule, so ``layer.to(device)`` moves it; ``options`` and
    ``solve_arguments`` (``weights``, ``posture``, option changes such as
    ``num_seeds=8``) apply to every call.
    """

    def __init__(self, robot: Robot, options: SolveOptions | None = None, **solve_arguments: Any) -> None:
        super().__init__()
        self.robot = robot
        changes = {k: v for k, v in solve_arguments.items() if k in OPTION_SPECS}
        self.options = SolveOptions.build(options, **changes)
        self.solve_arguments = {k: v for k, v in solve_arguments.items() if k not in changes}

    def to(self, *args: Any, **kwargs: Any) -> IKLayer:
        """``nn.Module.to``, refusing what the robot refuses (see :meth:`Robot.to`) with an IKLayerError."""
        self.robot.to(*args, **kwargs)
        return super().to(*args, **kwargs)

    def forward(
        self,
        target: Tensor,
        tool: Tensor | None = None,
        base: Tensor | None = None,
        obstacles: Sequence[Obstacle] | Sequence[Sequence[Obstacle]] | None = None,
    ) -> IKResult:
        """Solve for ``target`` (..., 4, 4) or (..., 7) (among ``obstacles``, if given: they replace the layer's);
        ``result.q`` is differentiable."""
        arguments = self.solve_arguments if obstacles is None else {**self.solve_arguments, "obstacles": obstacles}
        return ik_solve(self.robot, target, self.options, tool=tool, base=base, **arguments)


def target_gradient(robot: Robot, q: Tensor, weights: Tensor | None = None) -> Tensor:
    """``dq/d(target twist)`` (..., dof, 6) at solutions ``q`` (..., nq); (..., dof, F, 6) with F frames.

    The twist ``[dv; dw]`` moves the target (of frame f) in the base frame (``T <- exp(twist) T``);
    this is the matrix ``(W^1/2 J)^+ W^1/2`` that :func:`ik` applies in its backward pass (J and W
    stacked over the frames). ``dq`` is the tangent at ``q`` (with a floating base: its twist, then the joints).
    """
    sqrt_w = _sqrt_weights(robot, weights)
    _, jac = robot.fk_jacobian(q)
    weighted = (sqrt_w[..., None] * jac).flatten(q.dim() - 1, -2)  # (..., 6F, dof)
    scale = sqrt_w.expand(jac.shape[:-1]).flatten(q.dim() - 1)[..., None, :]
    return (damped_pseudo_inverse(weighted) * scale).unflatten(-1, (*robot.target_shape[:-2], 6))


def _obstacle_tensors(scenes: Scenes) -> list[Tensor]:
    """The tensors of the obstacles of ``scenes`` (centres, radii, poses, sizes, end points), in order: inputs
    of the layer."""
    return [tensor for scene in scenes for shape in scene for tensor in vars(shape).values()]


def _with_tensors(scenes: Scenes, tensors: Sequence[Tensor]) -> Scenes:
    """``scenes`` whose obstacles hold ``tensors`` (as :func:`_obstacle_tensors` lists them) instead of their
    own."""
    given = iter(tensors)
    return tuple(tuple(_holding(shape, given) for shape in scene) for scene in scenes)


def _holding(shape: Obstacle, given: Iterator[Tensor]) -> Obstacle:
    """``shape`` with its tensors taken in order from ``given``."""
    fields: dict[str, Any] = {name: next(given) for name in vars(shape)}
    return replace(shape, **fields)


def _reached(x: Tensor, goal: Tensor, goals: int, own: int) -> Tensor:
    """``x`` (own dims, with batch dims broadcasting against the goal set's (..., G)) at each row's reached
    ``goal`` (...): (..., own dims); ``x`` without batch dims as it is."""
    if x.dim() == own:
        return x
    full = x.expand(*goal.shape, goals, *x.shape[-own:] if own else ())
    index = goal.reshape(*goal.shape, 1, *([1] * own)).expand(*goal.shape, 1, *full.shape[goal.dim() + 1 :])
    return full.gather(goal.dim(), index).squeeze(goal.dim())


def _term_rows(problem: Problem, data: Tensor | None, result: IKResult) -> Tensor | None:
    """A term's data (n, D) as the problem holds it, one row per answer of ``result`` (..., D)."""
    if data is None:
        return None
    rows = data.reshape(*problem.batch, data.shape[-1])
    if result.goal is not None:  # a goal set's data is per row, the same for each of its goals
        rows = rows[..., 0, :]
    if result.q.dim() > rows.dim():  # num_solutions > 1
        rows = rows.unsqueeze(-2)
    return rows.expand(*result.q.shape[:-1], rows.shape[-1])


def _per_solution(x: Tensor, own: int) -> Tensor:
    """``x`` (..., own dims) given per target, with an axis for the solutions after the targets' batch (none where
    ``x`` has no batch: it broadcasts)."""
    return x.unsqueeze(-own - 1) if x.dim() > own else x


def _per_frame(robot: Robot, base: Tensor) -> Tensor:
    """``base`` (..., 4, 4) ready to multiply the robot's poses: (..., 1, 4, 4) with several frames."""
    return base if robot.ee_frames is None else base.unsqueeze(-3)


def _null_space_part(jac: Tensor, grad: Tensor) -> Tensor:
    """``P grad`` (..., dof): ``grad`` (..., dof) projected on the null space of ``jac`` (..., m, dof),
    ``P = I - J^+ J`` with the backward's own damped pseudo-inverse (zero where ``jac`` has no null space)."""
    return grad - (damped_pseudo_inverse(jac) @ (jac @ grad[..., None])).squeeze(-1)


def _tool_jacobian(robot: Robot, pose: Tensor, jac: Tensor, tool: Tensor, base: Tensor) -> Tensor:
    """Jacobian (..., [F,] 6, dof) of ``base @ pose @ tool`` from the end-effector's ``pose`` and Jacobian ``jac``
    (:meth:`Robot.fk_jacobian`): origin at the tool, axes of the world."""
    lever = pose[..., :3, :3] @ tool[..., :3, 3:]  # ee -> tool origin, base axes
    linear = jac[..., :3, :] - skew(lever.squeeze(-1)) @ jac[..., 3:, :]
    rot = _per_frame(robot, base)[..., :3, :3]
    return torch.cat((rot @ linear, rot @ jac[..., 3:, :]), dim=-2)


def _transform_or_identity(x: Tensor | None, name: str, like: Tensor, batch: torch.Size) -> Tensor:
    """``x`` as a transform whose batch shape broadcasts to ``batch`` (the identity if None)."""
    if x is None:
        eye = torch.eye(3, dtype=like.dtype, device=like.device)
        return from_rotation_translation(eye, like.new_zeros(3))
    t = as_transform(x, name)
    if t.dtype != like.dtype or t.device != like.device:
        raise IKLayerError(f"{name} must match the target's dtype and device ({like.dtype}, {like.device})")
    try:
        fits = torch.broadcast_shapes(t.shape[:-2], batch) == batch
    except RuntimeError:
        fits = False
    if not fits:
        raise ShapeError(
            f"{name} has batch shape {tuple(t.shape[:-2])}, which does not broadcast to the targets' {tuple(batch)}"
        )
    return t


def _sqrt_weights(robot: Robot, weights: Tensor | None) -> Tensor:
    if weights is None:
        return torch.ones(6, dtype=robot.dtype, device=robot.device)
    return torch.as_tensor(weights, dtype=robot.dtype, device=robot.device).clamp_min(0).sqrt()
