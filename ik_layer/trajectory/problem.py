"""A trajectory problem, checked once: clips of T frames, the joint velocity limits, and each frame's pull point.

Each frame ``t`` of a clip is solved as the configuration nearest its *pull point* ``p_t`` among the frame's
solutions, which minimises (the joints only; a floating base goes where the frames take it)

    1/2 |q_t - q_{t-1}|^2 + a/2 |q_t - 2 q_{t-1} + q_{t-2}|^2 + b/2 |q_t - posture|^2
    = (1 + a + b)/2 |q_t - p_t|^2 + const,
    p_t = q_{t-1} + (a (q_{t-1} - q_{t-2}) + b (posture - q_{t-1})) / (1 + a + b)

(``a``: ``acceleration``, ``b``: ``posture_weight``; joint differences of continuous joints wrapped to (-pi, pi]).
Before the first frame the robot rests at ``warm_start`` (``q_{-1} = q_{-2}``); without one the first frame is solved
freely (pulled to the posture, if any) and the clip starts at rest there (``q_{-1} = q_0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.exceptions import IKLayerError, ShapeError
from ik_layer.model.floating import BASE_NQ, BASE_NV
from ik_layer.model.robot import Robot

__all__ = ["TrajectoryProblem", "joint_difference", "velocity_limits"]

_NO_LIMIT = 1e5  # [rad/s or m/s] URDF velocity limits at or above this (or <= 0, or missing) mean "unbounded"


def velocity_limits(robot: Robot) -> Tensor:
    """The joints' velocity limits (joints,) [rad/s or m/s] from the model's ``<limit velocity=...>``.

    Indexed as ``robot.joint_names``; ``inf`` where the model gives none (0, negative, or at least 1e5, as
    ROS's 999999). The floating base has no limit.
    """
    if not isinstance(robot, Robot):
        raise IKLayerError(f"robot must be an ik_layer.Robot (see load_robot), got {type(robot).__name__}")
    model = robot.model
    values = [float(model.velocityLimit[model.joints[model.getJointId(name)].idx_v]) for name in robot.joint_names]
    limits = torch.tensor(values, dtype=torch.float64)
    limits = torch.where((limits > 0) & (limits < _NO_LIMIT), limits, math.inf)
    return limits.to(dtype=robot.dtype, device=robot.device)


def joint_difference(robot: Robot, q: Tensor, start: Tensor) -> Tensor:
    """The joints' motion (..., joints) from ``start`` to ``q`` (both (..., nq)) [rad or m]: continuous joints'
    wrapped to (-pi, pi], the others as they are."""
    d = q[..., _base_nq(robot) :] - start[..., _base_nq(robot) :]
    if not robot.any_continuous:
        return d
    return torch.where(robot.continuous, torch.remainder(d + torch.pi, 2 * torch.pi) - torch.pi, d)


@dataclass(frozen=True, kw_only=True)
class TrajectoryProblem:
    """The checked inputs of a trajectory solve, frame-major: frame ``t`` of every clip is one engine problem.

    Attributes:
        problem: the frames as one checked :class:`~ik_layer.Problem` of ``frames * clips`` rows, frame-major
            (row ``t * clips + c``), without warm starts or posture (the frame loop gives each frame its own).
        batch: the clips' batch shape ``(...)``.
        frames: T, frames per clip.
        clips: the number of clips ``prod(batch)``.
        dt: [s] time between frames.
        limit: (joints,) joint velocity limits [rad/s or m/s] (``inf``: none).
        acceleration: ``a``, weight of the acceleration cost (0: none).
        posture_weight: ``b``, weight of the posture cost (0 without a posture).
        start: (clips, nq) the configuration at rest before frame 0, or None.
        posture: (clips, nq) preferred configurations, or None.
    """

    problem: Problem
    batch: torch.Size
    frames: int
    clips: int
    dt: float
    limit: Tensor
    acceleration: float
    posture_weight: float
    start: Tensor | None
    posture: Tensor | None

    @staticmethod
    def prepare(
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
        **option_changes: Any,
    ) -> TrajectoryProblem:
        """Check the arguments of :func:`~ik_layer.solve_trajectory` (same names and meaning).

        Raises:
            IKLayerError: an argument is invalid; the message names it.
        """
        if not isinstance(robot, Robot):
            raise IKLayerError(f"robot must be an ik_layer.Robot (see load_robot), got {type(robot).__name__}")
        dt_s = _positive("dt", dt)
        a = _weight("acceleration", acceleration)
        b = _weight("posture_weight", posture_weight)
        limit = _limits(robot, velocity_limit)
        checked = Problem.prepare(
            robot,
            target,
            options,
            warm_start=_per_clip(warm_start),
            weights=weights,
            posture=_per_clip(posture),
            **option_changes,
        )
        opts = checked.options
        if opts.centring or opts.manipulability or opts.self_collision or checked.terms:
            raise IKLayerError(
                "solve_trajectory takes no centring, manipulability, self_collision or added terms: a frame's answer "
                "is the one nearest its pull point (see ik_layer.trajectory.problem)"
            )
        if len(checked.batch) == 0 or checked.batch[-1] == 0:
            shape = ", ".join(map(str, robot.target_shape[:-2]))
            raise ShapeError(
                f"target must have a frame dimension, (..., T, {shape + ', ' if shape else ''}4, 4) or "
                f"(..., T, {shape + ', ' if shape else ''}7) with T >= 1 frames, got {tuple(target.shape)}"
            )
        batch, frames = checked.batch[:-1], checked.batch[-1]
        clips = math.prod(batch)

        def frame_major(x: Tensor) -> Tensor:
            return x.reshape(clips, frames, *x.shape[1:]).transpose(0, 1).reshape(clips * frames, *x.shape[1:])

        def first_frame(x: Tensor | None) -> Tensor | None:
            return None if x is None else x.reshape(clips, frames, -1)[:, 0]

        return TrajectoryProblem(
            problem=replace(
                checked,
                batch=torch.Size([frames * clips]),
                target=frame_major(checked.target),
                weights=frame_major(checked.weights),
                warm_start=None,
                posture=None,
            ),
            batch=batch,
            frames=frames,
            clips=clips,
            dt=dt_s,
            limit=limit,
            acceleration=a,
            posture_weight=b if posture is not None else 0.0,
            start=first_frame(checked.warm_start),
            posture=first_frame(checked.posture),
        )

    def frame(self, t: int) -> Problem:
        """Frame ``t`` of every clip, a problem of ``clips`` rows (no warm start yet)."""
        return self.problem.select(slice(t * self.clips, (t + 1) * self.clips))

    def pulled(self, t: int) -> bool:
        """Whether frame ``t`` has a pull point (all but a first frame without a warm start or a posture)."""
        return t > 0 or self.start is not None or self.posture is not None

    def pull(self, robot: Robot, prev: Tensor | None, before: Tensor | None) -> Tensor | None:
        """The pull point (clips, nq) of a frame whose two predecessors are ``prev`` and ``before`` (clips, nq)
        (None, None for frame 0 without a warm start: the posture, or None); the joints unwrapped, the base
        ``prev``'s."""
        if prev is None or before is None:
            return self.posture
        scale = 1.0 + self.acceleration + self.posture_weight
        joints = self.acceleration * joint_difference(robot, prev, before)
        if self.posture is not None:
            joints = joints + self.posture_weight * joint_difference(robot, self.posture, prev)
        base = _base_nq(robot)
        return torch.cat((prev[..., :base], prev[..., base:] + joints / scale), -1)

    def pull_slopes(self, t: int) -> tuple[float, float]:
        """``(dp_t/dq_{t-1}, dp_t/dq_{t-2})`` of the pull point's joints, as scalars (0 where that predecessor is the
        warm start, a constant, or the same configuration as the other)."""
        scale = 1.0 + self.acceleration + self.posture_weight
        if t == 0:
            return 0.0, 0.0
        if t == 1:
            merged = self.start is None  # q_{-1} = q_0: both predecessors are frame 0
            return (1.0 + self.acceleration if merged else 1.0 + 2 * self.acceleration) / scale, 0.0
        return (1.0 + 2 * self.acceleration) / scale, -self.acceleration / scale


def _base_nq(robot: Robot) -> int:
    return BASE_NQ if robot.floating_base else 0


def base_nv(robot: Robot) -> int:
    """Tangent entries of the floating base: 6, or 0 without one."""
    return BASE_NV if robot.floating_base else 0


def _per_clip(x: Tensor | None) -> Tensor | None:
    """A per-clip configuration (..., nq) given a frame axis to broadcast over ((nq,) as it is)."""
    return x.unsqueeze(-2) if isinstance(x, Tensor) and x.dim() >= 2 else x


def _positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise IKLayerError(f"{name} must be a positive finite number of seconds, got {value!r}")
    return float(value)


def _weight(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise IKLayerError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _limits(robot: Robot, velocity_limit: Tensor | float | None) -> Tensor:
    """The velocity limits (joints,): the model's, one number for every joint, or one per joint."""
    if velocity_limit is None:
        return velocity_limits(robot)
    joints = len(robot.joint_names)
    if isinstance(velocity_limit, bool) or not isinstance(velocity_limit, (int, float, Tensor)):
        raise IKLayerError(f"velocity_limit must be a number or a tensor ({joints},), got {velocity_limit!r}")
    limit = torch.as_tensor(velocity_limit, dtype=robot.dtype).to(robot.device)
    if limit.dim() > 1 or (limit.dim() == 1 and limit.shape[0] != joints):
        raise ShapeError(
            f"velocity_limit must be a number or have shape ({joints},): one per joint of {robot.name} "
            f"({', '.join(robot.joint_names)}), got shape {tuple(limit.shape)}"
        )
    if bool(torch.isnan(limit).any()) or bool((limit <= 0).any()):
        raise IKLayerError(f"velocity_limit must be > 0 [rad/s or m/s] (inf: none), got {velocity_limit!r}")
    return limit.expand(joints).clone()
