"""``ik_layer.solve_trajectory``: clips of T frames solved frame by frame on the engine, within velocity limits.

Frame ``t`` of every clip is one engine solve (:func:`ik_layer.api.solve_problem`), seeded at the frame's pull point
(:mod:`ik_layer.trajectory.problem`: the previous answer, moved by the acceleration and posture terms). From a seed
that close, the engine's damped least-squares steps land on the nearest solution, which is (to first order) the
one nearest the pull point: what the trajectory's cost asks for, at the cost of a plain warm-started solve (the
engine's posture term polishes towards it too, but costs 10x at 64 clips). Where the engine's answer steps a joint
faster than its limit (a restart landed on another branch) or it failed, the frame is solved again inside its
velocity box (:mod:`ik_layer.trajectory.bounded`), so no answer ever exceeds the limits.

A clip that still has failed frames is re-planned whole by the look-ahead (:mod:`ik_layer.trajectory.lookahead`:
on a robot with a self-motion, more joints than pose rows and no floating base, a search along the self-motion, then
a smoothing of the whole clip; on any other, its frames solved greedily again with an acceleration cost) and
re-solved frame by frame inside the velocity boxes from the plan; where that meets more of its frames, the clip takes
those answers, all of them ``bounded`` (they are the plan's, not the ones nearest their pull points).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from ik_layer.api import check_timeout, solve_problem
from ik_layer.core.options import SolveOptions
from ik_layer.core.result import DEADLINE, EXHAUSTED, SOLVED
from ik_layer.engine import Engine
from ik_layer.model.robot import Robot
from ik_layer.trajectory.bounded import frame_errors_of, solve_in_box
from ik_layer.trajectory.lookahead import (
    LOCAL_BACK,
    LOCAL_ROUNDS,
    MOMENTUM,
    SMOOTHING_ROUNDS,
    has_self_motion,
    resolved_along,
    searched_plan,
    smoothed_plan,
    with_momentum,
)
from ik_layer.trajectory.problem import TrajectoryProblem, joint_difference

__all__ = ["TrajectoryResult", "result_of", "solve_frames", "solve_trajectory"]


@dataclass(frozen=True)
class TrajectoryResult:
    """Solutions of clips of T frames; every field has the clips' batch shape and the frame axis, ``(..., T)``.

    Attributes:
        q: (..., T, nq) configurations (a floating base first), inside the joint limits.
        success: (..., T) bool: the frame's pose within the tolerances, its step within the velocity limits.
        position_error: (..., T) [m] (the worst end-effector frame's).
        orientation_error: (..., T) [rad] (the worst end-effector frame's).
        max_step: (..., T) [rad or m] the largest joint motion from the previous frame (from ``warm_start`` for
            the first frame; 0 there without one); a floating base's motion is not counted.
        velocity_ratio: (..., T) the largest ``|step_j| / (v_max_j dt)``: at most 1 (within the limits).
        bounded: (..., T) bool: frames solved again inside their velocity box (the engine's answer stepped too
            far or failed, or the look-ahead re-planned their clip); :func:`~ik_layer.ik_trajectory` gives them zero
            gradient.
        status: (..., T) int32: why each frame stopped, as :attr:`ik_layer.IKResult.status`: ``SOLVED`` (its
            success), ``DEADLINE`` (the ``timeout`` ran out during the frame or before it: from there on every
            frame holds the last configuration reached), ``EXHAUSTED`` (no solution within the budget and the
            velocity box).
    """

    q: Tensor
    success: Tensor
    position_error: Tensor
    orientation_error: Tensor
    max_step: Tensor
    velocity_ratio: Tensor
    bounded: Tensor
    status: Tensor


def solve_trajectory(
    robot: Robot,
    target: Tensor,
    options: SolveOptions | None = None,
    *,
    dt: float,
    velocity_limit: Tensor | float | None = None,
    acceleration: float = 0.0,
    warm_start: Tensor | None = None,
    weights: Tensor | None = None,
    posture: Tensor | None = None,
    posture_weight: float = 0.01,
    generator: torch.Generator | None = None,
    engine: Engine | None = None,
    timeout: float | None = None,
    **option_changes: Any,
) -> TrajectoryResult:
    """Solve clips of T targets each, frame after frame, every step within the joint velocity limits.

    Args:
        robot: the robot; its dtype and device are used throughout.
        target: (..., T, [F,] 4, 4) or (..., T, [F,] 7) ``T_base_ee`` targets: T frames per clip (F end-effector
            frames as :func:`~ik_layer.solve` takes them), clips in the leading dimensions.
        options: the solver's options (default: :class:`~ik_layer.SolveOptions` defaults); secondary terms
            (``centring``, ``manipulability``, ``self_collision``) are refused.
        dt: [s] time between frames (> 0).
        velocity_limit: joint velocity limits [rad/s or m/s], one number or (joints,) (``inf``: none); default
            the model's ``<limit velocity>`` (:func:`~ik_layer.trajectory.problem.velocity_limits`).
        acceleration: weight of the acceleration cost against the velocity cost (0: none), see
            :mod:`ik_layer.trajectory.problem`.
        warm_start: (nq,) or (..., nq) the configuration each clip rests at before its first frame: the first
            frame's seed, and its step is bounded from it. Without one, the first frame is solved freely.
        weights: (6,), (..., T, 6) or per frame (..., T, F, 6) error weights, as :func:`~ik_layer.solve` takes them.
        posture: (nq,) or (..., nq) preferred configuration each frame is pulled towards (joints only).
        posture_weight: weight of the posture cost against the velocity cost (per frame).
        generator: random generator of the engine's seeds (reproducible results).
        engine: the :class:`~ik_layer.Engine` of ``robot`` to solve on (default: its shared one).
        timeout: the most seconds the solve may take, from when the arguments are checked (None: the iteration
            budgets alone bound it). The frame in progress then stops with its best configuration so far, and the
            frames after it hold it (velocity 0); they all answer ``status == DEADLINE``, ``success=False``.
        **option_changes: options to change, by name (``position_tolerance=1e-5``), over ``options``.

    Returns:
        A :class:`TrajectoryResult` of shape (..., T).

    Raises:
        IKLayerError: an argument is invalid (a target without a frame axis, NaN targets, ``dt <= 0``, a velocity
            limit <= 0, ...); the message names it.
    """
    checked = TrajectoryProblem.prepare(
        robot,
        target,
        options,
        dt=dt,
        velocity_limit=velocity_limit,
        acceleration=acceleration,
        warm_start=warm_start,
        weights=weights,
        posture=posture,
        posture_weight=posture_weight,
        **option_changes,
    )
    deadline = None if timeout is None else time.monotonic() + check_timeout(timeout)
    return solve_frames(robot, checked, generator=generator, engine=engine, deadline=deadline)


def solve_frames(
    robot: Robot,
    checked: TrajectoryProblem,
    *,
    generator: torch.Generator | None = None,
    engine: Engine | None = None,
    deadline: float | None = None,
) -> TrajectoryResult:
    """:func:`solve_trajectory` of a checked problem, taken as it is, by ``deadline`` (``time.monotonic()``)."""
    q, success, position, orientation, bounded, late = greedy_frames(
        robot, checked, generator=generator, engine=engine, deadline=deadline
    )
    in_time = deadline is None or time.monotonic() < deadline
    if in_time and not bool(late.any()) and bool((~success).any()):
        answers = (q, success, position, orientation)
        _look_ahead(robot, checked, answers, bounded, generator=generator, engine=engine, deadline=deadline)
    return result_of(robot, checked, q, success, position, orientation, bounded, late)


def greedy_frames(
    robot: Robot,
    checked: TrajectoryProblem,
    *,
    generator: torch.Generator | None = None,
    engine: Engine | None = None,
    deadline: float | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The frame loop alone (no look-ahead): q (T, clips, nq), success, position and orientation errors, bounded and
    late (T, clips), frame-major."""
    frames, clips, problem = checked.frames, checked.clips, checked.problem
    step = checked.limit * checked.dt
    q = problem.target.new_empty(frames, clips, robot.nq)
    success = torch.zeros(frames, clips, dtype=torch.bool, device=robot.device)
    position, orientation = (problem.target.new_empty(frames, clips) for _ in range(2))
    bounded = torch.zeros(frames, clips, dtype=torch.bool, device=robot.device)
    late = torch.zeros(frames, clips, dtype=torch.bool, device=robot.device)
    prev = before = checked.start
    for t in range(frames):
        part = checked.frame(t)
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:  # out of time: the frames from here hold the last configuration
            _hold(robot, checked, t, robot.neutral_q().expand(clips, -1) if prev is None else prev, q, position,
                  orientation)  # fmt: skip
            late[t:] = True
            break
        pull = checked.pull(robot, prev, before)
        seed = None if pull is None else robot.wrap(pull)
        answer = solve_problem(robot, replace(part, warm_start=seed), generator=generator, engine=engine, timeout=left)
        if answer.status is not None:
            late[t] = answer.status == DEADLINE
        q[t], success[t] = answer.q, answer.success
        position[t], orientation[t] = answer.position_error, answer.orientation_error
        if prev is not None:
            too_far = (joint_difference(robot, answer.q, prev).abs() > step).any(-1) | ~answer.success
            if bool(too_far.any()):
                rows = too_far.nonzero().squeeze(-1)
                assert seed is not None  # a frame with a predecessor has a pull point
                fixed = solve_in_box(
                    robot, part.target[rows], part.weights[rows], seed[rows], prev[rows], step, part.options
                )
                q[t, rows], success[t, rows], position[t, rows], orientation[t, rows] = fixed
                bounded[t, rows] = True
        before = q[t] if prev is None else prev
        prev = q[t]
    return q, success, position, orientation, bounded, late


def _look_ahead(
    robot: Robot,
    checked: TrajectoryProblem,
    answers: tuple[Tensor, Tensor, Tensor, Tensor],
    bounded: Tensor,
    *,
    generator: torch.Generator | None,
    engine: Engine | None,
    deadline: float | None,
) -> None:
    """The clips with failed frames re-planned (:mod:`ik_layer.trajectory.lookahead`): where a plan's answers meet
    more frames, they replace the clip's ``answers`` (q, success, position, orientation, (T, clips, ...), in place)
    and all its frames are ``bounded``. Each stage starts only before ``deadline``, and only for the clips that
    still fail."""
    frames, options, step = checked.frames, checked.problem.options, checked.limit * checked.dt
    clips = (~answers[1]).any(0).nonzero().squeeze(-1)
    target = checked.problem.target.reshape(frames, checked.clips, *checked.problem.target.shape[1:])[:, clips]
    weights = checked.problem.weights.reshape(frames, checked.clips, *checked.problem.weights.shape[1:])[:, clips]
    start = None if checked.start is None else checked.start[clips]
    best = [x[:, clips] for x in answers]
    replaced = torch.zeros_like(clips, dtype=torch.bool)

    def keep(rows: Tensor, candidate: Sequence[Tensor]) -> None:
        better = candidate[1].sum(0) > best[1][:, rows].sum(0)
        for mine, theirs in zip(best, candidate, strict=True):
            mine[:, rows] = torch.where(better.view(1, -1, *[1] * (mine.dim() - 2)), theirs, mine[:, rows])
        replaced[rows] |= better

    every = torch.arange(clips.shape[0], device=clips.device)

    def left() -> Tensor:  # the clips still failing, none once the time is up
        late = deadline is not None and time.monotonic() >= deadline
        return every[:0] if late else every[~best[1].all(0)]

    self_motion = has_self_motion(robot, checked)
    for acceleration in () if self_motion else MOMENTUM:  # the momentum plans: greedy frames with an acceleration cost
        rows = left()
        if checked.acceleration >= acceleration or not rows.numel():
            continue
        momentum = with_momentum(checked, clips[rows], acceleration)
        plan = greedy_frames(robot, momentum, generator=generator, engine=engine, deadline=deadline)[0]
        part_start = None if start is None else start[rows]
        allowed = (~best[1][:, rows]).sum(0)
        keep(rows, resolved_along(robot, target[:, rows], weights[:, rows], plan, part_start, step, options, allowed))
    rows = left()
    if not rows.numel() or not self_motion:
        _write_back(answers, best, bounded, clips, replaced)
        return
    part_start = None if start is None else start[rows]
    first = best[0][0, rows] if part_start is None else part_start
    plan = searched_plan(robot, checked, clips[rows], first, part_start, step, generator=generator, engine=engine)
    allowed = (~best[1][:, rows]).sum(0)
    keep(rows, resolved_along(robot, target[:, rows], weights[:, rows], plan, part_start, step, options, allowed))

    for _ in range(SMOOTHING_ROUNDS):
        rows = left()
        if not rows.numel():
            break
        part_start = None if start is None else start[rows]
        plan = smoothed_plan(robot, target[:, rows], weights[:, rows], best[0][:, rows], part_start, step, options)
        allowed = (~best[1][:, rows]).sum(0)
        keep(rows, resolved_along(robot, target[:, rows], weights[:, rows], plan, part_start, step, options, allowed))
    for _ in range(LOCAL_ROUNDS):  # each failing clip searched again from LOCAL_BACK frames before its failure
        for row in left().tolist():
            failed = int((~best[1][:, row]).nonzero()[0])
            offset = max(0, failed - LOCAL_BACK)
            rows = every[row : row + 1]
            before = (None if start is None else start[rows]) if offset == 0 else best[0][offset - 1, rows]
            plan = searched_plan(robot, checked, clips[rows], best[0][offset, rows], before, step, offset=offset,
                                 generator=generator, engine=engine)  # fmt: skip
            allowed = (~best[1][offset:, rows]).sum(0)
            tail = resolved_along(
                robot, target[offset:, rows], weights[offset:, rows], plan, before, step, options, allowed
            )
            keep(rows, tuple(torch.cat((mine[:offset, rows], theirs)) for mine, theirs in zip(best, tail, strict=True)))
    _write_back(answers, best, bounded, clips, replaced)


def _write_back(
    answers: tuple[Tensor, Tensor, Tensor, Tensor],
    best: Sequence[Tensor],
    bounded: Tensor,
    clips: Tensor,
    replaced: Tensor,
) -> None:
    """The look-ahead's ``best`` answers of ``clips`` into ``answers``; the ``replaced`` clips' frames ``bounded``."""
    for mine, theirs in zip(answers, best, strict=True):
        mine[:, clips] = theirs
    bounded[:, clips[replaced]] = True


def _hold(
    robot: Robot, checked: TrajectoryProblem, t: int, held: Tensor, q: Tensor, position: Tensor, orientation: Tensor
) -> None:
    """Frames ``t`` on of every clip at the configuration ``held`` (clips, nq), with their errors there."""
    rest = slice(t * checked.clips, None)
    frames = checked.frames - t
    q[t:] = held
    _, pos, ori = frame_errors_of(
        robot, q[t:].reshape(-1, robot.nq), checked.problem.target[rest], checked.problem.weights[rest]
    )
    position[t:], orientation[t:] = pos.reshape(frames, -1), ori.reshape(frames, -1)


def result_of(
    robot: Robot,
    checked: TrajectoryProblem,
    q: Tensor,
    success: Tensor,
    position: Tensor,
    orientation: Tensor,
    bounded: Tensor,
    late: Tensor,
) -> TrajectoryResult:
    """The frame-major answers (T, clips, ...) as a :class:`TrajectoryResult` of shape (..., T); ``late``: the frames
    the deadline stopped or never let start."""
    previous = torch.cat((q[:1] if checked.start is None else checked.start[None], q[:-1]))
    moved = joint_difference(robot, q, previous).abs()
    ratio = (moved / (checked.limit * checked.dt)).amax(-1) if moved.shape[-1] else moved.sum(-1)
    steps = moved.amax(-1) if moved.shape[-1] else moved.sum(-1)

    def clip_major(x: Tensor) -> Tensor:
        return x.transpose(0, 1).reshape(*checked.batch, checked.frames, *x.shape[2:])

    solved = success & (ratio <= 1) & ~late
    status = torch.where(solved, SOLVED, torch.where(late, DEADLINE, EXHAUSTED)).to(torch.int32)
    return TrajectoryResult(
        q=clip_major(q),
        success=clip_major(solved),
        position_error=clip_major(position),
        orientation_error=clip_major(orientation),
        max_step=clip_major(steps),
        velocity_ratio=clip_major(ratio),
        bounded=clip_major(bounded),
        status=clip_major(status),
    )
