"""A look-ahead for the clips whose greedy frames fell out of reach: the clip re-planned whole, then re-solved.

Frame after frame, each answer is the solution nearest its pull point; on a redundant arm that choice drifts along
the self-motion (a panda's elbow straightening into its joint limit) into configurations from which the path needs
joints faster than their limits, and frames later fail inside their velocity box although the clip is feasible. On a
6-joint arm the same happens where its elbow passes through its straight (singular) position: the nearest solution
there may be the other elbow branch, which cannot follow the path in time.

0. **Momentum** (a robot without a self-motion, such as a 6-joint arm; on a panda it only cost time): the failing
   clips' frames solved greedily again with an acceleration weight, each of ``MOMENTUM`` above the solve's
   ``acceleration`` in turn, for the clips still failing (:func:`with_momentum`); the momentum carries the elbow
   through the singularity on its branch. Its answers are the plan.

Each plan is re-solved frame by frame inside the velocity boxes from its own configurations (:func:`resolved_along`),
and the solver keeps, per clip, whichever answers meet the most frames. For a robot with a self-motion (more joints
than weighted pose rows, no floating base), a clip still failing then gets the plans:

1. **Search** (:func:`searched_plan`): ``SAMPLES`` configurations along the first frame's self-motion (up to
   ``SPAN`` rad of joint motion each way) are each followed through the clip by the engine, warm-started frame after
   frame; a dynamic programme over keyframes every ``KEYFRAME`` frames picks, per stretch, which of these chains to
   follow or to blend into (linearly over the stretch), such that every step of the blend stays within
   ``PLAN_SPEED`` of its velocity bound and inside the joint limits, with the least sum of squared steps.
2. **Smoothing** (:func:`smoothed_plan`), from the better answers so far, their failed frames put back on target:
   every frame moves along its self-motion (the null space ``N_t`` of its weighted Jacobian, ``q_t + N_t y_t``,
   then back on target by minimum-norm Gauss-Newton steps) and the ``y_t`` of all frames are chosen together by
   Levenberg-Marquardt steps on ``sum_t |q_t - q_{t-1}|^2 + mu (|excess_t|^2 + |outside_t|^2)`` (the steps' part
   beyond ``PLAN_SPEED`` of their bound, the joints' part beyond their limits), a block-tridiagonal system in the
   frames; ``SMOOTHING_ROUNDS`` rounds, each from the last one's re-solved answers.
3. **Local search**: a clip that still fails is searched again (as 1.) from its answer ``LOCAL_BACK`` frames before
   its first failed frame, ``LOCAL_ROUNDS`` times; the frames before stay as they are.

A plan's re-solve stops early once it has failed more frames than the answers it would replace. Each stage starts
only before the solve's ``timeout``.

The re-solved frames are solved inside their velocity boxes (``bounded``), so the limits hold exactly, and their
answers are the plan's, not the ones nearest their pull points: :func:`~ik_layer.ik_trajectory` holds them constant.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import torch
from torch import Tensor

from ik_layer.api import solve_problem
from ik_layer.core.options import SolveOptions
from ik_layer.engine import Engine
from ik_layer.model.lie import pose_error
from ik_layer.model.robot import Robot
from ik_layer.trajectory.bounded import frame_errors_of, solve_in_box
from ik_layer.trajectory.problem import TrajectoryProblem, base_nv, joint_difference

__all__ = [
    "KEYFRAME",
    "LOCAL_BACK",
    "LOCAL_ROUNDS",
    "MOMENTUM",
    "PLAN_SPEED",
    "SAMPLES",
    "SMOOTHING_ROUNDS",
    "SPAN",
    "has_self_motion",
    "resolved_along",
    "searched_plan",
    "smoothed_plan",
    "with_momentum",
]

MOMENTUM = (10.0, 30.0, 100.0)
"""The acceleration weights of the momentum plans (the greedy frames of a clip solved again with each in turn)."""

SAMPLES = 48
"""Configurations sampled along the first frame's self-motion (the search's chains)."""

SPAN = 3.0
"""[rad or m] how far the samples reach along the self-motion, each way (joint motion, in steps of 2 SPAN/SAMPLES)."""

KEYFRAME = 30
"""Frames between the search's keyframes, where it may switch chains."""

PLAN_SPEED = 0.9
"""The plans keep each joint step within this fraction of its velocity bound (the rest is the box solves' room)."""

SMOOTHING_ROUNDS = 2
"""Rounds of the smoothing plan, each from the last one's re-solved answers."""

LOCAL_ROUNDS = 4
"""Rounds of a search from ``LOCAL_BACK`` frames before a clip's first failed frame, for the clips still failing (each
its own engine restarts)."""

LOCAL_BACK = 100
"""Frames before a failure that a local search starts from."""

_SMOOTHING_STEPS = 60  # Levenberg-Marquardt steps per smoothing round
_EXCESS = 1e4  # mu: the weight of the velocity excess and of the joints past their limits, against the steps'
_DAMPING = 10.0  # first LM damping (absolute: the steps' weight is 1); x0.3 after a good step, x10 after a bad
_RESTORATIONS = 4  # minimum-norm Gauss-Newton steps that put a moved frame back on its target
_POSE = 1e8  # weight of what the restoration leaves of the pose residuals (a frame it could not put back)
_CHUNK = 8  # clips per dynamic programme (its edges hold (KEYFRAME + 1) SAMPLES^2 configurations per clip)


def has_self_motion(robot: Robot, checked: TrajectoryProblem) -> bool:
    """Whether the look-ahead applies: no floating base and more joints than weighted pose rows."""
    rows = int((checked.problem.weights.reshape(checked.problem.target.shape[0], -1) > 0).sum(-1).max())
    return base_nv(robot) == 0 and robot.dof > rows


def with_momentum(checked: TrajectoryProblem, clips: Tensor, acceleration: float) -> TrajectoryProblem:
    """The clips ``clips`` (n,) (indices) of ``checked`` as a problem of their own, its acceleration weight
    ``acceleration`` (one of ``MOMENTUM``: a momentum plan's frames, solved greedily)."""
    problem, frames, n = checked.problem, checked.frames, clips.shape[0]

    def rows(x: Tensor) -> Tensor:
        return x.reshape(frames, checked.clips, *x.shape[1:])[:, clips].reshape(frames * n, *x.shape[1:])

    part = replace(problem, batch=torch.Size([frames * n]), target=rows(problem.target), weights=rows(problem.weights))
    return replace(
        checked,
        problem=part,
        batch=torch.Size([n]),
        clips=n,
        acceleration=acceleration,
        start=None if checked.start is None else checked.start[clips],
        posture=None if checked.posture is None else checked.posture[clips],
    )


def resolved_along(
    robot: Robot,
    target: Tensor,
    weights: Tensor,
    plan: Tensor,
    start: Tensor | None,
    step: Tensor,
    options: SolveOptions,
    allowed: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Every frame of ``plan`` (T, n, nq) solved again inside its velocity box, from the plan's configuration.

    Returns ``q`` (T, n, nq), ``success``, position and orientation errors (T, n); ``start`` (n, nq) or None (the
    first frame is then bounded by the joint limits alone). Once every clip has failed more than ``allowed`` (n,)
    frames (the answers it would replace fail no more), the frames left answer the plan, failed.
    """
    free = torch.full_like(step, torch.inf)
    prev, answers = start, []
    failed = torch.zeros_like(allowed)
    for t in range(plan.shape[0]):
        if bool((failed > allowed).all()):
            _, position, orientation = frame_errors_of(robot, plan[t], target[t], weights[t])
            answers.append((plan[t], torch.zeros_like(failed, dtype=torch.bool), position, orientation))
            continue
        box = (plan[t], free) if prev is None else (prev, step)
        answers.append(solve_in_box(robot, target[t], weights[t], plan[t], box[0], box[1], options))
        failed = failed + (~answers[-1][1]).to(failed.dtype)
        prev = answers[-1][0]
    q, success, position, orientation = (torch.stack(x) for x in zip(*answers, strict=True))
    return q, success, position, orientation


def searched_plan(
    robot: Robot,
    checked: TrajectoryProblem,
    clips: Tensor,
    first: Tensor,
    before: Tensor | None,
    step: Tensor,
    *,
    offset: int = 0,
    generator: torch.Generator | None = None,
    engine: Engine | None = None,
) -> Tensor:
    """The search's plan (T - offset, n, nq) of frames ``offset`` on of the clips ``clips`` (n,) (indices), its
    samples walked from ``first`` (n, nq) (an answer of frame ``offset``); ``before`` (n, nq): the configuration
    before frame ``offset`` (None: frame ``offset`` is free)."""
    frames, n = checked.frames - offset, clips.shape[0]
    target = checked.problem.target.reshape(checked.frames, checked.clips, *checked.problem.target.shape[1:])
    weights = checked.problem.weights.reshape(checked.frames, checked.clips, *checked.problem.weights.shape[1:])
    target, weights = target[offset:, clips], weights[offset:, clips]
    samples = _self_motion(robot, first, target[0], weights[0])  # (S, n, nq)
    count = samples.shape[0]
    q, chains = samples.reshape(count * n, -1), [samples.reshape(count * n, -1)]
    for t in range(1, frames):
        rows = replace(
            checked.frame(offset + t),
            batch=torch.Size([count * n]),
            target=target[t].repeat(count, *[1] * (target.dim() - 2)),
            weights=weights[t].repeat(count, *[1] * (weights.dim() - 2)),
            warm_start=q,
        )
        q = solve_problem(robot, rows, generator=generator, engine=engine).q
        chains.append(q)
    stacked = torch.stack(chains).reshape(frames, count, n, -1)
    plans = [
        _programme(robot, stacked[:, :, c : c + _CHUNK], None if before is None else before[c : c + _CHUNK], step)
        for c in range(0, n, _CHUNK)
    ]
    return torch.cat(plans, 1)


def smoothed_plan(
    robot: Robot,
    target: Tensor,
    weights: Tensor,
    q: Tensor,
    start: Tensor | None,
    step: Tensor,
    options: SolveOptions,
) -> Tensor:
    """The smoothing plan (T, n, nq) from the answers ``q`` (T, n, nq) of ``target`` (T, n, [F,] 4, 4) (weights
    (T, n, [F,] 6)); ``start`` (n, nq) or None; ``step`` (joints,) each joint's bound per frame."""
    frames, n = q.shape[:2]
    flat_target = target.reshape(frames * n, *target.shape[2:])
    sqrt_w = weights.reshape(frames * n, -1).sqrt()
    cap = step * PLAN_SPEED
    linked = torch.ones(frames, 1, 1, dtype=q.dtype, device=q.device)  # 0 where a frame has no predecessor
    if start is None:
        linked[0] = 0.0
    lower = torch.where(robot.continuous, -torch.inf, robot.lower)
    upper = torch.where(robot.continuous, torch.inf, robot.upper)

    def restored(x: Tensor) -> Tensor:
        return _restored(robot, x.reshape(frames * n, -1), flat_target, sqrt_w).reshape(x.shape)

    def terms(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Joint steps (T, n, J), velocity excess (T, n, J), joints past their limits (T, n, J), cost (n,)."""
        r = sqrt_w * pose_error(flat_target, robot.fk(x.reshape(frames * n, -1))).reshape(sqrt_w.shape)
        s = joint_difference(robot, x, torch.cat((x[:1] if start is None else start[None], x[:-1]))) * linked
        excess = torch.sign(s) * (s.abs() - cap).clamp_min(0)
        outside = (x - upper).clamp_min(0) + (x - lower).clamp_max(0)
        cost = (s**2).sum((0, 2)) + _EXCESS * ((excess**2).sum((0, 2)) + (outside**2).sum((0, 2)))
        return s, excess, outside, cost + _POSE * (r**2).reshape(frames, n, -1).sum((0, 2))

    # Failed frames first put on target from the frame before, inside the joint limits.
    _, position, orientation = frame_errors_of(robot, q.reshape(frames * n, -1), flat_target, sqrt_w**2)
    missed = ((position > options.position_tolerance) | (orientation > options.orientation_tolerance)).reshape(
        frames, n
    )
    free = torch.full_like(step, torch.inf)
    chained: list[Tensor] = []
    for t in range(frames):
        if not bool(missed[t].any()):
            chained.append(q[t])
            continue
        seed = q[t] if t == 0 and start is None else (start if t == 0 else chained[-1])
        assert seed is not None
        moved, *_ = solve_in_box(robot, target[t], weights[t], seed, seed, free, options)
        chained.append(torch.where(missed[t, :, None], moved, q[t]))
    q = torch.stack(chained)
    s, excess, outside, cost = terms(q)
    damping = torch.full_like(cost, _DAMPING)
    for _ in range(_SMOOTHING_STEPS):
        _, jac = robot.fk_jacobian(q.reshape(frames * n, -1))
        a = sqrt_w[..., None] * jac.reshape(frames * n, -1, robot.dof)
        null = torch.linalg.svd(a, full_matrices=True).Vh[..., a.shape[-2] :, :].mT.reshape(frames, n, robot.dof, -1)
        # Per joint: the weight w_t of step t (frames t-1 to t) and the cost's slope u_t along it.
        w = linked + _EXCESS * (excess != 0)
        u = s + _EXCESS * excess
        w_next = torch.cat((w[1:], w.new_zeros(1, n, w.shape[-1])))
        u_next = torch.cat((u[1:], u.new_zeros(1, n, u.shape[-1])))
        eye = torch.eye(null.shape[-1], dtype=q.dtype, device=q.device)
        diagonal = null.mT @ ((w + w_next + _EXCESS * (outside != 0))[..., None] * null) + damping[:, None, None] * eye
        rhs = -(null.mT @ (u - u_next + _EXCESS * outside)[..., None]).squeeze(-1)
        link = -(null[1:].mT @ (w[1:, ..., None] * null[:-1]))  # the block of frames t, t-1: -N_t^T W_t N_{t-1}
        y = _block_thomas(diagonal, link, rhs)
        trial = restored(q + (null @ y[..., None]).squeeze(-1))
        t_s, t_excess, t_outside, t_cost = terms(trial)
        better = t_cost < cost
        q = torch.where(better[None, :, None], trial, q)
        s = torch.where(better[None, :, None], t_s, s)
        excess = torch.where(better[None, :, None], t_excess, excess)
        outside = torch.where(better[None, :, None], t_outside, outside)
        cost = torch.where(better, t_cost, cost)
        damping = torch.where(better, damping * 0.3, damping * 10).clamp(1e-12, 1e12)
    return q


def _self_motion(robot: Robot, q: Tensor, target: Tensor, weights: Tensor) -> Tensor:
    """(SAMPLES + 1, n, nq): ``q`` (n, nq) and configurations walked from it along the self-motion of ``target``,
    both ways, inside the joint limits."""
    sqrt_w = weights.reshape(q.shape[0], -1).sqrt()
    half = SAMPLES // 2
    walked: dict[int, Tensor] = {0: q}
    for sign in (1, -1):
        current, heading = q, None
        for i in range(1, half + 1):
            _, jac = robot.fk_jacobian(current)
            a = sqrt_w[..., None] * jac.reshape(*sqrt_w.shape, -1)
            direction = torch.linalg.svd(a, full_matrices=True).Vh[..., -1, :]
            reference = direction[:, :1] if heading is None else (direction * heading).sum(-1, keepdim=True)
            direction = direction * torch.where(reference < 0, -1.0, 1.0)
            heading = direction
            moved = robot.integrate(current, sign * (SPAN / half) * direction)
            current = _restored(robot, moved, target, sqrt_w)
            inside = torch.minimum(torch.maximum(current, robot.lower), robot.upper)
            current = torch.where(robot.continuous, current, inside)
            walked[sign * i] = current
    return torch.stack([walked[k] for k in sorted(walked)])


def _programme(robot: Robot, chains: Tensor, start: Tensor | None, step: Tensor) -> Tensor:
    """The dynamic programme over ``chains`` (T, S, n, nq): per stretch between keyframes, the chain to follow or
    blend into, each blended step within ``PLAN_SPEED`` of ``step`` and inside the limits, the least sum of squared
    steps; the plan (T, n, nq) (clips without such a plan: the blend of least velocity excess)."""
    frames, n = chains.shape[0], chains.shape[2]
    lower = torch.where(robot.continuous, -torch.inf, robot.lower)
    upper = torch.where(robot.continuous, torch.inf, robot.upper)
    inside = ((chains >= lower) & (chains <= upper)).all(-1)  # (T, S, n)
    keys = [*range(0, frames - 1, KEYFRAME), frames - 1] if frames > 1 else [0]
    # Cost so far (S, n): infeasible entries carry their excess times a large weight, so a clip without a feasible
    # plan still gets the least bad one.
    if start is None:
        cost = torch.where(inside[0], 0.0, 1e12).to(chains.dtype)
    else:
        moved = joint_difference(robot, chains[0], start[None])
        excess = ((moved.abs() / step).amax(-1) - PLAN_SPEED).clamp_min(0)
        cost = (moved**2).sum(-1) + 1e12 * (excess + (~inside[0]).to(moved.dtype))
    choices: list[Tensor] = []
    for a, b in itertools.pairwise(keys):
        alpha = torch.linspace(0, 1, b - a + 1, dtype=chains.dtype, device=chains.device)[:, None, None, None, None]
        left, right = chains[a : b + 1, :, None], chains[a : b + 1, None, :]  # (L+1, S, 1, n, nq), (L+1, 1, S, n, nq)
        blend = left + alpha * joint_difference(robot, right, left)
        steps = joint_difference(robot, blend[1:], blend[:-1])
        excess = ((steps.abs() / step).amax(-1).amax(0) - PLAN_SPEED).clamp_min(0)  # (S, S, n)
        outside = (~((blend >= lower) & (blend <= upper)).all(-1).all(0)).to(blend.dtype)
        edge = (steps**2).sum((0, -1)) + 1e12 * (excess + outside + (~inside[b][None]).to(blend.dtype))
        cost, choice = (cost[:, None] + edge).min(0)
        choices.append(choice)
    chosen = [cost.argmin(0)]
    for choice in reversed(choices):
        chosen.append(choice.gather(0, chosen[-1][None])[0])
    chosen.reverse()
    clip = torch.arange(n, device=chains.device)
    plan = chains[:, 0].clone()
    plan[0] = chains[0, chosen[0], clip]
    for k, (a, b) in enumerate(itertools.pairwise(keys)):
        alpha = torch.linspace(0, 1, b - a + 1, dtype=chains.dtype, device=chains.device)[:, None, None]
        left, right = chains[a : b + 1, chosen[k], clip], chains[a : b + 1, chosen[k + 1], clip]
        plan[a : b + 1] = left + alpha * joint_difference(robot, right, left)
    return plan


def _restored(robot: Robot, q: Tensor, target: Tensor, sqrt_w: Tensor) -> Tensor:
    """``q`` (N, nq) after ``_RESTORATIONS`` minimum-norm Gauss-Newton steps on each row's pose: back on its target
    with the least joint motion."""
    for _ in range(_RESTORATIONS):
        pose, jac = robot.fk_jacobian(q)
        r = sqrt_w * pose_error(target, pose).reshape(sqrt_w.shape)
        a = sqrt_w[..., None] * jac.reshape(*sqrt_w.shape, -1)
        gram = a @ a.mT
        eye = torch.eye(gram.shape[-1], dtype=q.dtype, device=q.device)
        scale = gram.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1e-12)[:, None, None]
        q = robot.integrate(q, (a.mT @ torch.linalg.solve(gram + 1e-9 * scale * eye, r[..., None])).squeeze(-1))
    return q


def _block_thomas(diagonal: Tensor, link: Tensor, rhs: Tensor) -> Tensor:
    """``x`` (T, n, k) solving the symmetric block-tridiagonal system with diagonal blocks ``diagonal`` (T, n, k, k),
    the block of row t, column t-1 ``link[t-1]`` ((T-1), n, k, k), right-hand side ``rhs`` (T, n, k)."""
    frames = diagonal.shape[0]
    factors: list[Tensor] = []
    ys: list[Tensor] = []
    for t in range(frames):
        block, y = diagonal[t], rhs[t][..., None]
        if t:
            solved = torch.cholesky_solve(torch.cat((link[t - 1].mT, ys[-1]), -1), factors[-1])
            block = block - link[t - 1] @ solved[..., :-1]
            y = y - link[t - 1] @ solved[..., -1:]
        factors.append(torch.linalg.cholesky(block))
        ys.append(y)
    x: list[Tensor] = [rhs.new_zeros(0)] * frames
    for t in reversed(range(frames)):
        y = ys[t] if t + 1 == frames else ys[t] - link[t].mT @ x[t + 1]
        x[t] = torch.cholesky_solve(y, factors[t])
    return torch.stack(x).squeeze(-1)
