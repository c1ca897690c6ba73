"""Trajectory requests: decoded at the edge, solved by :func:`ik_layer.solve_trajectory` in a bounded line of threads.

A clip is solved frame after frame (each frame seeded by the previous answers, see :mod:`ik_layer.trajectory`), so
it does not join the IK worker's continuous batching: :class:`TrajectoryLine` runs each request's
:func:`ik_layer.solve_trajectory` call whole, as the library runs it, in one of ``max_trajectories_in_flight``
threads of its own, on an engine of the robot that no other thread uses at the time (never on the event loop).

Bounds, as for IK requests:

* a clip holds at most ``max_trajectory_frames`` frames (413 naming ``targets`` and the limit);
* at most ``max_trajectories_in_flight`` requests solve at once and ``trajectory_queue_limit`` more wait for a
  thread; past that, 503 with ``Retry-After``;
* every request has a deadline (``timeout``, default the server's ``trajectory_timeout``, at most ``max_timeout``),
  the library's ``timeout``: the frame in progress stops at it with its best configuration so far, the frames after
  it hold that configuration, and they answer ``status: "deadline"``, as an IK request's rows past their deadline;
* a request whose client disconnects stops at its next frame (:class:`Abandoned`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ik_layer import (
    OPTION_SPECS,
    ROW_STATUS,
    Engine,
    IKLayerError,
    IKResult,
    Problem,
    Robot,
    SolveOptions,
    TrajectoryResult,
    solve_trajectory,
)
from ik_layer.server.admission import MAX_SEEDS
from ik_layer.server.decode import configurations, error_weights, pose_targets
from ik_layer.server.exceptions import FieldError, ServiceUnavailable, TooManyRows
from ik_layer.server.settings import Settings
from ik_layer.server.trajectory_schemas import TrajectoryRequest, TrajectoryResponse

__all__ = ["TERMS", "Abandoned", "TrajectoryJob", "TrajectoryLine", "encode", "trajectory_job"]

TERMS = ("centring", "manipulability", "self_collision")
"""Secondary terms of the solver options that trajectories do not take (see :func:`ik_layer.solve_trajectory`)."""

_NO_TIME = 1e-9  # [s] the timeout of a request already past its deadline: every frame answers DEADLINE

_ARGUMENTS = {"target": "targets", "velocity_limit": "velocity_limit", "warm_start": "warm_start", "dt": "dt"}
_ARGUMENTS |= {name: name for name in ("posture", "posture_weight", "acceleration", "weights", *OPTION_SPECS)}


class Abandoned(Exception):
    """A trajectory request whose client left before its clip was solved: its solve stops at the next frame."""


@dataclass(frozen=True)
class TrajectoryJob:
    """One trajectory request as CPU tensors in the robot's dtype: :func:`ik_layer.solve_trajectory`'s arguments.

    Attributes:
        targets: (T, 7) poses ``[x, y, z, qx, qy, qz, qw]``, or (T, F, 7) for a robot with F end-effector frames.
        options: the solver options, the server's defaults for those the request left out (no secondary terms).
        dt, velocity_limit, acceleration, warm_start, posture, posture_weight, weights: as
            :func:`ik_layer.solve_trajectory` takes them (``warm_start`` and ``posture`` (nq,), ``weights`` (6,) or
            (F, 6), ``velocity_limit`` a number, (joints,), or None for the model's).
        timeout: time limit of the request [s], from its arrival.
        seed: seed of the solver's random generator, or None.
    """

    targets: Tensor
    options: SolveOptions
    dt: float
    timeout: float
    velocity_limit: Tensor | float | None = None
    acceleration: float = 0.0
    warm_start: Tensor | None = None
    posture: Tensor | None = None
    posture_weight: float = 0.01
    weights: Tensor | None = None
    seed: int | None = None

    @property
    def frames(self) -> int:
        """T, the frames of the clip."""
        return self.targets.shape[0]


def trajectory_job(robot: Robot, request: TrajectoryRequest, settings: Settings) -> TrajectoryJob:
    """The job of a trajectory request.

    Raises:
        TooManyRows: more frames than ``settings.max_trajectory_frames``.
        FieldError: a target or weights not keyed by the robot's frames, a warm start or posture of the wrong length
            (or a floating base's zero quaternion), velocity limits not one per joint, a secondary term asked for,
            or a timeout over ``settings.max_timeout``.
    """
    frames, limit = len(request.targets), settings.max_trajectory_frames
    if frames > limit:
        raise TooManyRows(f"targets has {frames} frames; this server takes at most {limit} per trajectory", limit)
    default = settings.max_timeout if settings.trajectory_timeout is None else settings.trajectory_timeout
    timeout = default if request.timeout is None else request.timeout
    if timeout > settings.max_timeout:
        raise FieldError(
            ("body", "timeout"), f"timeout is {timeout:g} s; this server allows at most {settings.max_timeout:g} s"
        )
    for name in TERMS:
        if getattr(request, name):
            raise FieldError(
                ("body", name),
                f"trajectories take no {name}: each frame's answer is the one nearest its pull point "
                "(the previous frames, acceleration and posture)",
            )
    given = {name: getattr(request, name) for name in OPTION_SPECS}  # None: the server's default
    given |= {name: OPTION_SPECS[name].default for name in TERMS}  # whatever the server's: none
    options = SolveOptions.build(settings.solve_options(), **given)
    # validated, every target is a Pose or frame -> Pose (the schema's validators turn vectors and matrices into Poses)
    targets = torch.from_numpy(pose_targets(robot, request.targets, [(t,) for t in range(frames)]))  # type: ignore[arg-type]
    return TrajectoryJob(
        targets=targets,
        options=options,
        dt=request.dt,
        timeout=timeout,
        velocity_limit=_velocity_limit(robot, request.velocity_limit),
        acceleration=request.acceleration,
        warm_start=_one_configuration(robot, request.warm_start, "warm_start"),
        posture=_one_configuration(robot, request.posture, "posture"),
        posture_weight=request.posture_weight,
        weights=None if request.weights is None else error_weights(robot, request.weights),
        seed=request.random_seed,
    )


def _one_configuration(robot: Robot, values: list[float] | None, field: str) -> Tensor | None:
    return None if values is None else configurations(robot, [values], field, one=True)[0]


def _velocity_limit(robot: Robot, given: float | list[float] | None) -> Tensor | float | None:
    """The velocity limits of a request: one number, one per joint (checked against the robot's joints), or None."""
    if given is None or isinstance(given, float):
        return given
    joints = robot.joint_names
    if len(given) != len(joints):
        raise FieldError(
            ("body", "velocity_limit"),
            f"velocity_limit has {len(given)} values but {robot.name} has {len(joints)} joints "
            f"({', '.join(joints)}); give one per joint, or one number for all",
        )
    return torch.tensor(given, dtype=robot.dtype)


def solve(robot: Robot, job: TrajectoryJob, engine: Engine, deadline: float) -> TrajectoryResult:
    """:func:`ik_layer.solve_trajectory` of ``job`` on ``engine`` (on the robot's device) by ``deadline``
    (``time.monotonic()``; once past, every frame answers ``DEADLINE``).

    Raises:
        FieldError: the library refused an argument (named by the request's field).
    """
    device = robot.device

    def there(x: Tensor | None) -> Tensor | None:
        return None if x is None else x.to(device)

    generator = None
    if job.seed is not None:
        generator = torch.Generator(device=device).manual_seed(job.seed)
    limit = job.velocity_limit.to(device) if isinstance(job.velocity_limit, Tensor) else job.velocity_limit
    try:
        return solve_trajectory(
            robot,
            job.targets.to(device),
            job.options,
            dt=job.dt,
            velocity_limit=limit,
            acceleration=job.acceleration,
            warm_start=there(job.warm_start),
            weights=there(job.weights),
            posture=there(job.posture),
            posture_weight=job.posture_weight,
            generator=generator,
            engine=engine,
            timeout=max(deadline - time.monotonic(), _NO_TIME),
        )
    except IKLayerError as err:
        if isinstance(err, FieldError):
            raise
        named = re.match(r"\w+", str(err))
        field = _ARGUMENTS.get(named.group(0)) if named else None
        raise FieldError(("body", field) if field else ("body",), str(err)) from None


def encode(robot: Robot, result: TrajectoryResult) -> bytes:
    """The JSON body answering a trajectory request with ``result`` (one clip, (T, ...))."""
    response = TrajectoryResponse.model_construct(
        robot=robot.name,
        q=result.q.tolist(),
        success=result.success.tolist(),
        position_error=result.position_error.tolist(),
        orientation_error=result.orientation_error.tolist(),
        max_step=result.max_step.tolist(),
        velocity_ratio=result.velocity_ratio.tolist(),
        bounded=result.bounded.tolist(),
        status=[ROW_STATUS[code] for code in result.status.tolist()],  # type: ignore[misc]  # the three names
    )
    return response.model_dump_json().encode()


class _StoppableEngine(Engine):
    """An engine whose next solve raises :class:`Abandoned` once ``stopped`` is set (the request's client left)."""

    stopped: threading.Event | None = None

    def solve(self, problem: Problem[Tensor | np.ndarray], seed: int, deadline: float | None = None) -> IKResult:
        if self.stopped is not None and self.stopped.is_set():
            raise Abandoned
        return super().solve(problem, seed, deadline)


@dataclass(eq=False)
class _Ticket:
    robot: Robot
    job: TrajectoryJob
    deadline: float
    stopped: threading.Event = field(default_factory=threading.Event)


class TrajectoryLine:
    """Runs trajectory requests in ``solving`` threads, ``waiting`` more queued at most (see the module's docstring).

    Each thread solves on an engine of its own per robot (built on first use: a few milliseconds; the robot's
    kernels are compiled by the IK worker's warm-up).
    """

    def __init__(self, solving: int, waiting: int) -> None:
        self.solving = solving
        self.waiting = waiting
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=solving, thread_name_prefix="ik-trajectory")
        self._tickets: set[_Ticket] = set()  # admitted, not yet answered (event loop only)
        self._engines: dict[int, list[_StoppableEngine]] = {}  # idle engines by id(robot)
        self._lock = threading.Lock()
        self._closed = False

    @property
    def held(self) -> int:
        """Requests solving or waiting."""
        return len(self._tickets)

    async def solve(self, robot: Robot, job: TrajectoryJob, deadline: float) -> bytes:
        """The JSON answer of ``job`` for ``robot``, solved in one of the line's threads by ``deadline``
        (``time.monotonic()``). Cancelling the call (the client left) stops the solve at its next frame.

        Raises:
            ServiceUnavailable: the line is full, or closed.
            Abandoned: the call was cancelled.
            FieldError: the library refused an argument.
        """
        if self._closed:
            raise ServiceUnavailable("the server is shutting down")
        if len(self._tickets) >= self.solving + self.waiting:
            raise ServiceUnavailable(f"{len(self._tickets)} trajectory requests are in line; retry later")
        ticket = _Ticket(robot, job, deadline)
        self._tickets.add(ticket)
        try:
            return await asyncio.wrap_future(self._pool.submit(self._run, ticket))
        finally:
            ticket.stopped.set()  # cancelled (client gone): the solve stops at its next frame
            self._tickets.discard(ticket)

    def close(self) -> None:
        """Admit nothing more, stop what is in line, and wait for the threads to finish."""
        self._closed = True
        for ticket in list(self._tickets):
            ticket.stopped.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, ticket: _Ticket) -> bytes:
        if ticket.stopped.is_set():
            raise Abandoned
        engine = self._engine(ticket.robot)
        engine.stopped = ticket.stopped
        try:
            result = solve(ticket.robot, ticket.job, engine, ticket.deadline)
        finally:
            engine.stopped = None
            with self._lock:
                self._engines.setdefault(id(ticket.robot), []).append(engine)
        return encode(ticket.robot, result)

    def _engine(self, robot: Robot) -> _StoppableEngine:
        """An idle engine of ``robot``, or a new one (room for one frame of the widest request)."""
        with self._lock:
            idle = self._engines.get(id(robot))
            while idle:
                engine = idle.pop()
                if engine.robot is robot and engine.serves(robot):
                    return engine
        return _StoppableEngine(robot, capacity=MAX_SEEDS)
