"""``ik_layer.ik_trajectory``: a trajectory whose joints are differentiable w.r.t. every frame's target.

Each frame's answer is the solution nearest its pull point (:mod:`ik_layer.trajectory.problem`), so with
``r_t = W^1/2 pose_error(T_t, fk(q_t))`` (m rows), ``P_t`` the projector on the null space of ``W^1/2 J(q_t)`` and
``D`` the joints' rows (a floating base is not pulled), the clip is a root of the stacked system

    F_t(q_t, q_{t-1}, q_{t-2}, T_t) = [r_t; c_t P_t D (q_t - p_t)] = 0,   t = 0 .. T-1   ((m + dof) rows each)

(``c_t = 0`` for a first frame without a warm start or a posture: it is the minimum-norm solution). ``p_t`` depends
on the two previous frames only, so ``dF/dq`` is block lower-triangular with two sub-diagonals: the diagonal blocks
``A_t = dF_t/dq_t`` (autograd, one batched call over every frame), the sub-diagonal ones ``B_tk = -c_t s_k [0; P_t D]``
(``s_k = dp_t/dq_{t-k}``, scalars). :func:`ik_trajectory` first polishes the answers of :func:`solve_trajectory` to
that root (Newton steps, each a forward substitution ``dq_t = -A_t^+ (F_t + B_t1 dq_{t-1} + B_t2 dq_{t-2})``), then
its backward runs the transposed substitution from the last frame to the first:

    w_t = (A_t^+)^T (v_t - B_{t+1,1}^T w_{t+1} - B_{t+2,2}^T w_{t+2}),   dL/dT_t = -(dr_t/dT_t)^T w_t[:m]

so a frame's target moves every later frame's joints. Frames that failed, or were solved inside their velocity box
(``bounded``: a velocity limit or the look-ahead's plan is what holds them there, not ``F``), are constants: zero
gradient, as :func:`ik`'s failed rows, and the frames after them do not reach back past them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ik_layer.core.options import SolveOptions
from ik_layer.core.result import DEADLINE
from ik_layer.layer.implicit import damped_pseudo_inverse
from ik_layer.layer.jacobian import batch_jacobian
from ik_layer.model.lie import pose_error
from ik_layer.model.robot import Robot
from ik_layer.trajectory.bounded import frame_errors_of
from ik_layer.trajectory.problem import TrajectoryProblem, base_nv, joint_difference
from ik_layer.trajectory.solve import TrajectoryResult, result_of, solve_frames

__all__ = ["ik_trajectory"]

_NEWTON_STEPS = 3  # polish steps from the engine's answers (within tolerance: quadratic convergence from there)


def ik_trajectory(
    robot: Robot,
    target: Tensor,
    options: SolveOptions | None = None,
    *,
    dt: float,
    generator: torch.Generator | None = None,
    **arguments: Any,
) -> TrajectoryResult:
    """:func:`~ik_layer.solve_trajectory` with ``q`` differentiable w.r.t. ``target`` over the whole sequence.

    The answers are polished to the trajectory's optimality condition (see :mod:`ik_layer.trajectory.gradient`),
    so they differ from :func:`~ik_layer.solve_trajectory`'s within the tolerances.

    Args:
        robot: the robot.
        target: (..., T, [F,] 4, 4) or (..., T, [F,] 7) targets; may require grad.
        options: the solver's options.
        dt: [s] time between frames.
        generator: random generator of the engine's seeds.
        **arguments: :func:`~ik_layer.solve_trajectory`'s other arguments (``velocity_limit``, ``acceleration``,
            ``warm_start``, ``weights``, ``posture``, ``posture_weight``, ``engine``, option changes).

    Returns:
        A :class:`~ik_layer.TrajectoryResult` whose ``q`` (..., T, nq) carries implicit gradients w.r.t. ``target``;
        frames with ``success=False`` or ``bounded=True`` get zero gradient.
    """
    engine = arguments.pop("engine", None)
    checked = TrajectoryProblem.prepare(robot, target, options, dt=dt, **arguments)
    target_fm = checked.problem.target  # frame-major, as differentiable as given
    with torch.no_grad():
        detached = replace(checked, problem=replace(checked.problem, target=target_fm.detach()))
        plain = solve_frames(robot, detached, generator=generator, engine=engine)
        q = _frame_major(checked, plain.q)
        valid = _frame_major(checked, plain.success & ~plain.bounded)
        system = _System(robot, checked, target_fm.detach(), valid)
        polished = system.polish(q)
        kept = _within_limits(robot, checked, polished, q) | ~valid
        if not bool(kept.all()):  # the root lies past a limit: those frames keep their answers and become constants
            system = _System(robot, checked, target_fm.detach(), valid & kept)
            polished = system.polish(q)
        system.linearise(polished)
    at_solution = polished.new_zeros(*polished.shape[:-1], robot.dof)
    dq = _TrajectoryRoot.apply(at_solution, target_fm.reshape(*polished.shape[:2], *robot.target_shape), system)
    q_out = robot.integrate(polished, dq)
    with torch.no_grad():
        flat_target = target_fm.detach()
        _, position, orientation = frame_errors_of(
            robot, polished.reshape(-1, robot.nq), flat_target, checked.problem.weights
        )
        opts = checked.problem.options
        success = (position <= opts.position_tolerance) & (orientation <= opts.orientation_tolerance)
    shape = polished.shape[:2]
    return result_of(
        robot,
        checked,
        q_out,
        success.reshape(shape) & _frame_major(checked, plain.success),
        position.reshape(shape),
        orientation.reshape(shape),
        _frame_major(checked, plain.bounded),
        _frame_major(checked, plain.status == DEADLINE),
    )


def _frame_major(checked: TrajectoryProblem, x: Tensor) -> Tensor:
    """A result's field (..., T, ...) as (T, clips, ...)."""
    return x.reshape(checked.clips, checked.frames, *x.shape[len(checked.batch) + 1 :]).transpose(0, 1)


def _within_limits(robot: Robot, checked: TrajectoryProblem, q: Tensor, start: Tensor) -> Tensor:
    """(T, clips) whether the polished ``q`` keeps its joints inside their limits and its steps within the velocity
    limits (``start``: the unpolished answers, whose first frame's predecessor is the warm start or itself)."""
    joints = q[..., robot.nq - len(robot.joint_names) :]
    inside = torch.where(robot.continuous, True, (joints >= robot.lower) & (joints <= robot.upper)).all(-1)
    first = start[:1] if checked.start is None else checked.start[None]
    previous = torch.cat((first, q[:-1]))
    slow = (joint_difference(robot, q, previous).abs() <= checked.limit * checked.dt).all(-1)
    return inside & slow


class _System:
    """The stacked optimality system of a clip at its answers: residuals, diagonal blocks, projectors.

    ``target`` (T * clips, [F,] 4, 4) frame-major, detached; ``valid`` (T, clips) the frames that are roots of ``F``
    (the others are constants). :meth:`linearise` sets ``q``, ``f``, ``a_plus``, ``projector`` and ``m``.
    """

    q: Tensor
    f: Tensor
    a_plus: Tensor
    projector: Tensor
    m: int

    def __init__(self, robot: Robot, checked: TrajectoryProblem, target: Tensor, valid: Tensor) -> None:
        self.robot, self.checked, self.valid = robot, checked, valid
        frames, clips = checked.frames, checked.clips
        self.target = target.reshape(frames, clips, *robot.target_shape)
        self.sqrt_w = self.checked.problem.weights.reshape(frames, clips, -1).sqrt()
        pulled = [self.checked.pulled(t) for t in range(frames)]
        self.pulled = torch.tensor(pulled, dtype=self.target.dtype, device=self.target.device)[:, None, None]
        self.slopes = [self.checked.pull_slopes(t) for t in range(frames)]
        joints = torch.ones(self.robot.dof, dtype=self.target.dtype, device=self.target.device)
        self.joints = torch.cat((joints[: base_nv(self.robot)] * 0, joints[base_nv(self.robot) :]))

    def pulls(self, q: Tensor) -> Tensor:
        """Each frame's pull point (T, clips, nq) from the answers ``q`` (T, clips, nq)."""
        first = self.checked.start if self.checked.start is not None else q[0]
        prev = torch.cat((first[None], q[:-1]))
        before = torch.cat((first[None], prev[:-1]))
        pull = self.checked.pull(self.robot, prev, before)
        assert pull is not None  # prev and before are given
        if self.checked.start is None and self.checked.posture is not None:
            pull = torch.cat((self.checked.posture[None], pull[1:]))
        return pull

    def residual(self, dq: Tensor, q: Tensor, pull: Tensor, target: Tensor) -> Tensor:
        """``F`` (T, clips, m + dof) at ``q`` moved by ``dq`` (T, clips, dof), the pull points held."""
        moved = self.robot.integrate(q, dq)
        pose, jac = self.robot.kinematics(moved, jacobian=True)
        r = self.sqrt_w * pose_error(target, pose).reshape(self.sqrt_w.shape)
        a = self.sqrt_w[..., None] * jac.reshape(*self.sqrt_w.shape, self.robot.dof)
        pulled = joint_difference(self.robot, moved, pull)
        g = torch.cat((pulled.new_zeros(*pulled.shape[:-1], base_nv(self.robot)), pulled), -1)
        projected = g - (damped_pseudo_inverse(a) @ (a @ g[..., None])).squeeze(-1)
        return torch.cat((r, self.pulled * projected), -1)

    def linearise(self, q: Tensor) -> None:
        """The blocks at ``q``: ``F``, ``A_t^+`` (T, clips, dof, m + dof) and ``P_t`` (T, clips, dof, dof)."""
        self.q, pull = q, self.pulls(q)
        frames, clips = q.shape[:2]
        zero = q.new_zeros(frames * clips, self.robot.dof)

        def flat(dq: Tensor) -> Tensor:
            return self.residual(dq.reshape(frames, clips, -1), q, pull, self.target).reshape(frames * clips, -1)

        self.f = flat(zero).reshape(frames, clips, -1)
        a = batch_jacobian(flat, zero).reshape(frames, clips, -1, self.robot.dof)
        self.a_plus = damped_pseudo_inverse(a)
        _, jac = self.robot.fk_jacobian(q)
        weighted = self.sqrt_w[..., None] * jac.reshape(*self.sqrt_w.shape, self.robot.dof)
        eye = torch.eye(self.robot.dof, dtype=q.dtype, device=q.device)
        self.projector = eye - damped_pseudo_inverse(weighted) @ weighted
        self.m = self.sqrt_w.shape[-1]

    def below(self, t: int, k: int, x: Tensor) -> Tensor:
        """``B_tk x`` (clips, m + dof) for a tangent ``x`` (clips, dof) of frame ``t - k``."""
        scale = -self.pulled[t] * self.slopes[t][k - 1]
        bottom = (self.projector[t] @ (self.joints * x)[..., None]).squeeze(-1)
        return torch.cat((x.new_zeros(*x.shape[:-1], self.m), scale * bottom), -1)

    def below_t(self, t: int, k: int, w: Tensor) -> Tensor:
        """``B_tk^T w`` (clips, dof) for ``w`` (clips, m + dof)."""
        scale = -self.pulled[t] * self.slopes[t][k - 1]
        return scale * self.joints * (self.projector[t] @ w[..., self.m :, None]).squeeze(-1)

    def polish(self, q: Tensor) -> Tensor:
        """``q`` (T, clips, nq) after Newton steps on ``F`` (forward substitution; constant frames held)."""
        for _ in range(_NEWTON_STEPS):
            self.linearise(q)
            steps: list[Tensor] = []
            for t in range(q.shape[0]):
                rhs = self.f[t]
                for k in (1, 2):
                    if t >= k and self.slopes[t][k - 1]:
                        rhs = rhs + self.below(t, k, steps[t - k])
                steps.append(-(self.a_plus[t] @ rhs[..., None]).squeeze(-1) * self.valid[t, :, None])
            q = self.robot.integrate(q, torch.stack(steps))
        return q

    def target_vjp(self, v: Tensor) -> Tensor:
        """``(dq/dT)^T v``: the cotangent (T, clips, [F,] 4, 4) of the targets for ``v`` (T, clips, dof) on ``dq``."""
        frames = v.shape[0]
        w: list[Tensor] = [v.new_zeros(0)] * frames
        for t in reversed(range(frames)):
            a = v[t]
            for k in (1, 2):
                if t + k < frames and self.slopes[t + k][k - 1]:
                    a = a - self.below_t(t + k, k, w[t + k])
            w[t] = (self.a_plus[t].mT @ a[..., None]).squeeze(-1) * self.valid[t, :, None]
        cotangent = -torch.stack(w)[..., : self.m]
        with torch.enable_grad():
            leaf = self.target.detach().requires_grad_(True)
            pose = self.robot.fk(self.q)
            r = self.sqrt_w * pose_error(leaf, pose).reshape(self.sqrt_w.shape)
            (grad,) = torch.autograd.grad(r, leaf, cotangent)
        return grad


class _TrajectoryRoot(torch.autograd.Function):
    """Identity on the tangent ``dq`` (T, clips, dof) at the polished answers; the backward of the module
    docstring w.r.t. the targets (T, clips, [F,] 4, 4)."""

    @staticmethod
    def forward(dq: Tensor, target: Tensor, system: _System) -> Tensor:
        return dq.clone()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        ctx.system = inputs[2]

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        wanted = ctx.needs_input_grad[1]
        return None, ctx.system.target_vjp(grad) if wanted else None, None
