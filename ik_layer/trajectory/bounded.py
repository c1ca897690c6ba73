"""A frame re-solved inside its velocity box: projected Levenberg-Marquardt on the frames the engine got wrong.

The engine solves a frame from its pull point, but where that seed stalls it restarts at random and may land on
another branch (a UR5e's elbow or wrist flip), a step no joint can make in ``dt``. Those frames, and the ones it
failed, are solved again here from the pull point with every joint held inside

    [max(lower, q_prev - v dt), min(upper, q_prev + v dt)]

by Levenberg-Marquardt steps whose joints at a bound that push outwards are left out of the step (an active set),
at most ``BOX_ITERATIONS`` (or ``max_iterations``) of them (a row whose damping has climbed to 1e4, making no
progress, stops there), so an answer never steps faster than the limits allow;
a frame that cannot be reached inside its box comes back with ``success=False`` and the closest configuration found
there.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ik_layer.core.options import SolveOptions
from ik_layer.core.result import frame_errors
from ik_layer.model.lie import pose_error
from ik_layer.model.robot import Robot
from ik_layer.trajectory.problem import base_nv, joint_difference

__all__ = ["BOX_ITERATIONS", "BOX_MARGIN", "frame_errors_of", "solve_in_box"]

BOX_MARGIN = 1e-6
"""The box's half-width is ``v dt (1 - BOX_MARGIN)``: an answer's step stays below ``v dt`` after rounding."""

BOX_ITERATIONS = 50
"""Most LM steps of a frame in its box: from a seed this near a reachable frame converges in a few."""

_DAMPING = 1e-3  # first LM damping, relative to the mean diagonal of J^T J; x0.3 after a good step, x10 after a bad
_STALLED = 1e4  # a row whose damping climbed this far makes no progress: it stops
_ACTIVE_SET_ROUNDS = 2  # solves per step: the joints pushing out of the box leave the step, then once more


def frame_errors_of(robot: Robot, q: Tensor, target: Tensor, weights: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The pose error (n, 6F) of ``q`` (n, nq) at ``target`` (n, [F,] 4, 4), and its position [m] and orientation
    [rad] error norms (n,) over the axes ``weights`` (n, [F,] 6) keeps (the worst frame's)."""
    error = pose_error(target, robot.fk(q)).reshape(q.shape[0], -1)
    position, orientation = frame_errors(error, weights.reshape(q.shape[0], -1))
    return error, position, orientation


def solve_in_box(
    robot: Robot,
    target: Tensor,
    weights: Tensor,
    seed: Tensor,
    prev: Tensor,
    step: Tensor,
    options: SolveOptions,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Solve ``target`` from ``seed`` with every joint within ``step`` of ``prev`` and inside its limits.

    Args:
        robot: the robot.
        target: (n, [F,] 4, 4) targets.
        weights: (n, [F,] 6) their error weights.
        seed: (n, nq) first configurations (clamped into the box first).
        prev: (n, nq) the previous frame's configurations.
        step: (joints,) the largest step of each joint [rad or m] (``inf``: none).
        options: the tolerances and ``max_iterations`` (at most :data:`BOX_ITERATIONS` are run).

    Returns:
        ``q`` (n, nq) inside the box and the joint limits, ``success`` (n,), position [m] and orientation [rad]
        errors (n,).
    """
    base_q, base_v = robot.nq - len(robot.joint_names), base_nv(robot)
    half = step * (1 - BOX_MARGIN)
    prev_j = prev[:, base_q:]
    lower = torch.where(robot.continuous, -torch.inf, robot.lower)
    upper = torch.where(robot.continuous, torch.inf, robot.upper)
    low, high = torch.maximum(lower, prev_j - half), torch.minimum(upper, prev_j + half)

    def boxed(q: Tensor) -> Tensor:  # joints unwrapped around prev, then clamped into the box
        joints = prev_j + joint_difference(robot, q, prev)
        return torch.cat((q[:, :base_q], torch.minimum(torch.maximum(joints, low), high)), -1)

    sqrt_w = weights.sqrt()
    q = boxed(seed)
    error, position, orientation = frame_errors_of(robot, q, target, weights)
    cost = ((sqrt_w.reshape(q.shape[0], -1) * error) ** 2).sum(-1)
    damping = torch.full_like(cost, _DAMPING)
    for _ in range(min(options.max_iterations, BOX_ITERATIONS)):
        done = (position <= options.position_tolerance) & (orientation <= options.orientation_tolerance)
        done = done | (damping >= _STALLED)
        if bool(done.all()):
            break
        _, jac = robot.fk_jacobian(q)
        a = (sqrt_w[..., None] * jac).reshape(q.shape[0], -1, robot.dof)
        r = sqrt_w.reshape(q.shape[0], -1) * error
        free = torch.ones(q.shape[0], robot.dof, dtype=q.dtype, device=q.device)
        for _ in range(_ACTIVE_SET_ROUNDS):
            dq = _damped_step(a * free[:, None, :], r, damping)
            joints, moves = q[:, base_q:], dq[:, base_v:]
            out = ((joints <= low) & (moves < 0)) | ((joints >= high) & (moves > 0))
            free = torch.cat((free[:, :base_v], (~out).to(q.dtype)), -1)
        dq = dq * (~done)[:, None]
        trial = boxed(robot.integrate(q, dq))
        t_error, t_position, t_orientation = frame_errors_of(robot, trial, target, weights)
        t_cost = ((sqrt_w.reshape(q.shape[0], -1) * t_error) ** 2).sum(-1)
        better = (t_cost < cost) & ~done
        q = torch.where(better[:, None], trial, q)
        error = torch.where(better[:, None], t_error, error)
        position, orientation = (
            torch.where(better, t_position, position),
            torch.where(better, t_orientation, orientation),
        )
        cost = torch.where(better, t_cost, cost)
        damping = torch.where(better, damping * 0.3, damping * 10).clamp(1e-12, 1e12)
    success = (position <= options.position_tolerance) & (orientation <= options.orientation_tolerance)
    return robot.wrap(q), success, position, orientation


def _damped_step(a: Tensor, r: Tensor, damping: Tensor) -> Tensor:
    """The LM step (n, dof) ``(A^T A + lam I)^-1 A^T r`` for ``A`` (n, m, dof), ``r`` (n, m), ``lam`` relative to
    the mean diagonal of ``A^T A``."""
    gram = a.mT @ a
    scale = gram.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1e-12)
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    return torch.linalg.solve(gram + (damping * scale)[:, None, None] * eye, (a.mT @ r[..., None])).squeeze(-1)
