"""What :class:`~ik_layer.client.Client` and :class:`~ik_layer.client.AsyncClient` share: every call written once.

A call is a *flow*, a generator that yields :class:`_Call` (an HTTP request to send) or a float (seconds to sleep)
and receives the answer; the two faces only differ in how they run a flow (``httpx.Client`` and ``time.sleep``, or
``httpx.AsyncClient`` and ``asyncio.sleep``). :class:`_Core` holds the configuration, the row limit learned from
the server, and one flow per operation; what goes over the wire is :mod:`ik_layer.client.wire`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ik_layer.client.wire import (
    RemoteIKResult,
    RemoteRobotNotFound,
    RemoteTrajectoryResult,
    RequestTooLarge,
    RobotInfo,
    ServiceError,
    ServiceUnavailable,
    _answer,
    _as_float64,
    _as_given,
    _detail,
    _flat_sets,
    _ik_result,
    _is_pose,
    _json_or_text,
    _obstacles_field,
    _option_fields,
    _pose_json,
    _pose_values,
    _retry_after,
    _robot_info,
    _robot_path,
    _scene_name,
    _scenes_fields,
    _target_poses,
    _terms_rows,
    _trajectory_result,
    _warm_start_rows,
    _weights_field,
)
from ik_layer.core.options import SolveOptions
from ik_layer.exceptions import IKLayerError, NonFiniteError, ShapeError
from ik_layer.model.host import as_checked, pose_to_matrix

if TYPE_CHECKING:
    import httpx

    from ik_layer.client.wire import Array, ArrayLike

__all__ = ["RetryPolicy"]

T = TypeVar("T")

_HTTP_MARGIN = 10.0  # [s] added to a solve's time limit for the HTTP read timeout


@dataclass(frozen=True)
class RetryPolicy:
    """How 503 answers are retried.

    Attributes:
        retries: retries at most (0: none).
        max_wait: seconds of waiting at most over all retries of one request; a ``Retry-After`` that would
            overrun it gives up at once.
        backoff: the wait without a ``Retry-After`` header: ``backoff * 2**attempt`` seconds.
    """

    retries: int = 3
    max_wait: float = 30.0
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if self.retries < 0 or not self.max_wait >= 0 or not self.backoff >= 0:
            raise IKLayerError(f"RetryPolicy needs non-negative values, got {self}")


@dataclass(frozen=True)
class _Call:
    """One HTTP request of a flow."""

    method: str
    path: str
    json: Any = None
    timeout: float | None = None  # HTTP timeout of this request [s]; None: the client's


Flow = Generator["_Call | float", Any, T]
"""A call written once: yields requests (answered with an ``httpx.Response``) and sleeps (seconds)."""


@dataclass
class _Core:
    """Everything both clients share: configuration, the learned row limit, and one flow per operation."""

    timeout: float
    retry: RetryPolicy
    max_targets: int | None = None
    _robots: dict[str, RobotInfo] = field(default_factory=dict)

    def health_flow(self) -> Flow[dict[str, Any]]:
        return (yield from self._exchange(_Call("GET", "/health")))

    def robots_flow(self) -> Flow[dict[str, RobotInfo]]:
        body = yield from self._exchange(_Call("GET", "/v1/robots"))
        try:
            robots = {r["name"]: _robot_info(r) for r in body["robots"]}
        except (KeyError, TypeError, ValueError) as err:
            raise ServiceError(f"unreadable /v1/robots answer: {err!r}", 200, body) from None
        self._robots = robots
        return robots

    def fk_flow(self, robot: str, q_given: ArrayLike, pose: bool, numpy: bool) -> Flow[Array]:
        q = _as_float64(q_given, "q")
        if q.ndim == 0:
            raise ShapeError("q must have shape (..., nq), got a scalar")
        if not np.isfinite(q).all():
            raise NonFiniteError("q holds NaN or infinite values")
        batch, nq = q.shape[:-1], q.shape[-1]
        rows = q.reshape(-1, nq).tolist()
        path = _robot_path(robot, "fk")
        answers = yield from self._in_chunks(path, len(rows), lambda a, b: {"q": rows[a:b]}, "poses", self.timeout)
        frames: tuple[str, ...] = ()
        if not answers or any(not _is_pose(p) for p in answers):  # keyed by frame (or nothing to tell by)
            info = yield from self._info(robot)
            frames = info.ee_frames if info.frames > 1 else ()
        try:
            values = [_pose_values(p, frames) for p in answers]
            poses = np.array(values, dtype=np.float64).reshape(*batch, *((len(frames),) if frames else ()), 7)
            answer = poses if pose else pose_to_matrix(poses)
        except (KeyError, TypeError, ValueError, NonFiniteError) as err:
            raise ServiceError(f"unreadable FK answer: {err!r}", 200) from None
        return _as_given(answer, like=q_given, numpy=numpy)

    def scenes_flow(self, robot: str) -> Flow[dict[str, int]]:
        body = yield from self._exchange(_Call("GET", _robot_path(robot, "scenes")))
        try:
            return {entry["name"]: int(entry["obstacles"]) for entry in body["scenes"]}
        except (KeyError, TypeError, ValueError) as err:
            raise ServiceError(f"unreadable scenes answer: {err!r}", 200, body) from None

    def scene_flow(
        self, method: str, robot: str, name: str, obstacles: Sequence[Mapping[str, Any]] | None
    ) -> Flow[int]:
        path = f"{_robot_path(robot, 'scenes')}/{_scene_name(name)}"
        body = None if obstacles is None else {"obstacles": _obstacles_field(obstacles)}
        answer = yield from self._exchange(_Call(method, path, body))
        try:
            return int(answer["obstacles"])
        except (KeyError, TypeError, ValueError) as err:
            raise ServiceError(f"unreadable scene answer: {err!r}", 200, answer) from None

    def solve_flow(
        self,
        robot: str,
        targets: ArrayLike,
        options: SolveOptions | None,
        warm_start: ArrayLike | None,
        weights: ArrayLike | None,
        gradient: bool,
        timeout: float | None,
        numpy: bool,
        option_changes: dict[str, Any],
        posture: ArrayLike | None = None,
        obstacles: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]] | None = None,
        scene: str | None = None,
        num_solutions: int = 1,
        objective: str = "first",
        goal_set: bool = False,
        terms: Mapping[str, Any] | None = None,
    ) -> Flow[RemoteIKResult]:
        checked = as_checked(_as_float64(targets, "targets"), "targets")
        path = _robot_path(robot, "ik")
        info = yield from self._info(robot)
        poses, batch = _target_poses(checked, info)
        if not isinstance(goal_set, bool):
            raise IKLayerError(f"goal_set must be True or False, got {goal_set!r}")
        goals = 1  # poses per row
        if goal_set:
            if not batch or batch[-1] == 0:
                raise ShapeError(f"goal_set needs targets with G >= 1 goals per row before the pose, got {batch}")
            batch, goals = batch[:-1], batch[-1]
            poses = poses.reshape(-1, goals, *poses.shape[1:])
        n = poses.shape[0]
        starts = None if warm_start is None else _warm_start_rows(warm_start, n)
        postures = None if posture is None else _warm_start_rows(posture, n, "posture")
        term_rows = {
            name: (gain, None if data is None else data.tolist())
            for name, (gain, data) in _terms_rows(terms, n).items()
        }
        fields = _option_fields(options, option_changes)
        if weights is not None:
            fields["weights"] = _weights_field(weights, info)
        if not isinstance(gradient, bool):
            raise IKLayerError(f"gradient must be True or False, got {gradient!r}")
        if timeout is not None:
            if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
                raise IKLayerError(f"timeout must be a positive number of seconds, got {timeout!r}")
            fields["timeout"] = float(timeout)
        if gradient:
            fields["return_gradient"] = True
        scenes = None  # one list of obstacles per target, sent with its targets
        if obstacles is not None:
            shared, scenes = _scenes_fields(obstacles, n)
            if shared is not None:
                fields["obstacles"] = shared
        if scene is not None:
            fields["scene"] = _scene_name(scene)
        if isinstance(num_solutions, bool) or not isinstance(num_solutions, int) or num_solutions < 1:
            raise IKLayerError(f"num_solutions must be a positive int, got {num_solutions!r}")
        if num_solutions != 1:
            fields["num_solutions"] = num_solutions
            batch = (*batch, num_solutions)  # the server answers a list of them per target
        if objective != "first":
            fields["objective"] = objective
        if n == 0:
            return _ik_result([], batch, info, gradient, targets, numpy)
        keyed = info.ee_frames if info.frames > 1 else None
        if goal_set:
            json_targets: list[Any] = [[_pose_json(p, keyed) for p in row] for row in poses.tolist()]
        else:
            json_targets = [_pose_json(p, keyed) for p in poses.tolist()]
        start_rows = None if starts is None else starts.tolist()
        posture_rows = None if postures is None else postures.tolist()

        def body(a: int, b: int) -> dict[str, Any]:
            request: dict[str, Any] = {"goals" if goal_set else "targets": json_targets[a:b]}
            if start_rows is not None:
                request["warm_start"] = start_rows[a:b]
            if posture_rows is not None:
                request["posture"] = posture_rows[a:b]
            if scenes is not None:
                request["obstacles"] = scenes[a:b]
            if term_rows:
                request["terms"] = {name: {"gain": gain} | ({} if data is None else {"data": data[a:b]})
                                    for name, (gain, data) in term_rows.items()}  # fmt: skip
            return {**request, **fields}

        http_timeout = self.timeout if timeout is None else max(self.timeout, timeout + _HTTP_MARGIN)
        solutions = yield from self._in_chunks(path, n, body, "solutions", http_timeout, goals)
        if num_solutions != 1:
            solutions = _flat_sets(solutions, num_solutions)
        return _ik_result(solutions, batch, info, gradient, targets, numpy)

    def trajectory_flow(
        self,
        robot: str,
        targets: ArrayLike,
        options: SolveOptions | None,
        dt: float,
        velocity_limit: ArrayLike | float | None,
        acceleration: float | None,
        warm_start: ArrayLike | None,
        posture: ArrayLike | None,
        posture_weight: float | None,
        weights: ArrayLike | None,
        timeout: float | None,
        random_seed: int | None,
        numpy: bool,
        option_changes: dict[str, Any],
    ) -> Flow[RemoteTrajectoryResult]:
        checked = as_checked(_as_float64(targets, "targets"), "targets")
        path = _robot_path(robot, "trajectory")
        info = yield from self._info(robot)
        poses, batch = _target_poses(checked, info)
        if len(batch) != 1 or batch[0] == 0:
            frames = "" if info.frames == 1 else f"{info.frames}, "
            raise ShapeError(
                f"targets must be one clip of T >= 1 frames, (T, {frames}4, 4) or (T, {frames}7), got "
                f"{tuple(checked.shape)}"
            )
        keyed = info.ee_frames if info.frames > 1 else None
        body: dict[str, Any] = {"targets": [_pose_json(p, keyed) for p in poses.tolist()]}
        body["dt"] = _number("dt", dt)
        if isinstance(velocity_limit, (int, float)):
            body["velocity_limit"] = _number("velocity_limit", velocity_limit)
        elif velocity_limit is not None:
            limit = _as_float64(velocity_limit, "velocity_limit")
            if limit.ndim > 1 or not np.isfinite(limit).all():
                raise ShapeError(f"velocity_limit must be one finite number or one per joint, got {limit!r:.100}")
            body["velocity_limit"] = limit.tolist()
        for name, value in (("acceleration", acceleration), ("posture_weight", posture_weight)):
            if value is not None:
                body[name] = _number(name, value)
        for name, given in (("warm_start", warm_start), ("posture", posture)):
            if given is not None:
                body[name] = _configuration(given, name, info.nq)
        if weights is not None:
            body["weights"] = _weights_field(weights, info)
        if timeout is not None:
            body["timeout"] = _number("timeout", timeout)
        if random_seed is not None:
            if isinstance(random_seed, bool) or not isinstance(random_seed, int) or random_seed < 0:
                raise IKLayerError(f"random_seed must be a non-negative int, got {random_seed!r}")
            body["random_seed"] = random_seed
        body.update(_option_fields(options, option_changes))
        http_timeout = self.timeout if timeout is None else max(self.timeout, timeout + _HTTP_MARGIN)
        answer = yield from self._exchange(_Call("POST", path, body, http_timeout))
        return _trajectory_result(answer, batch[0], info, targets, numpy)

    def _info(self, robot: str) -> Flow[RobotInfo]:
        """The server's description of ``robot`` (asked for once, then kept)."""
        if robot not in self._robots:
            yield from self.robots_flow()
        if robot not in self._robots:
            raise RemoteRobotNotFound(robot, sorted(self._robots))
        return self._robots[robot]

    def _in_chunks(
        self, path: str, n: int, body: Callable[[int, int], dict[str, Any]], key: str, timeout: float, poses: int = 1
    ) -> Flow[list[Any]]:
        """POST rows ``[0, n)`` to ``path`` in as few requests as the server takes; the answers' ``key`` lists joined.
        Each row holds ``poses`` poses (goal sets), every one counted against the server's limit.

        A 413 naming the server's row limit sets :attr:`max_targets` (kept for later calls); another 413
        (body size, work) halves the rows per request, down to one row.
        """
        answers: list[Any] = []
        start, size = 0, n
        while start < n:
            size = min(size, max(self.max_targets // poses, 1) if self.max_targets else size)
            stop = min(start + size, n)
            try:
                answer = yield from self._exchange(_Call("POST", path, body(start, stop), timeout))
            except RequestTooLarge as err:
                rows = stop - start
                if err.limit is not None and err.limit < rows * poses and err.limit >= poses:
                    self.max_targets = err.limit
                    size = err.limit // poses
                elif rows > 1:
                    size = (rows + 1) // 2
                else:
                    raise
                continue
            items = answer.get(key) if isinstance(answer, dict) else None
            if not isinstance(items, list) or len(items) != stop - start:
                raise ServiceError(f"{path}: expected {stop - start} {key}, got {answer!r:.200}", 200, answer)
            answers += items
            start = stop
        return answers

    def _exchange(self, call: _Call) -> Flow[Any]:
        """Send ``call``, retrying 503 answers per :attr:`retry`; the JSON of a 2xx answer, else the error raised."""
        call = call if call.timeout is not None else _Call(call.method, call.path, call.json, self.timeout)
        waited = 0.0
        for attempt in range(self.retry.retries + 1):
            response: httpx.Response = yield call
            if response.status_code != 503:
                return _answer(response)
            wait = _retry_after(response, self.retry.backoff * 2**attempt)
            if attempt == self.retry.retries or waited + wait > self.retry.max_wait:
                break
            waited += wait
            yield wait
        raise ServiceUnavailable(
            f"{call.method} {call.path}: 503 {_detail(response)} (gave up after {attempt} retries, {waited:g} s)",
            503,
            _json_or_text(response),
        )


def _number(name: str, value: object) -> float:
    """``value``, a finite number (the server checks its bounds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
        raise IKLayerError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _configuration(given: ArrayLike, name: str, nq: int) -> list[float]:
    """One configuration (nq,) of a trajectory request (``warm_start``, ``posture``)."""
    q = _as_float64(given, name)
    if q.shape != (nq,):
        raise ShapeError(f"{name} must be one configuration of shape ({nq},), got {tuple(q.shape)}")
    if not np.isfinite(q).all():
        raise NonFiniteError(f"{name} holds NaN or infinite values")
    return q.tolist()


_SOLVE_DOC = """Solve IK for ``targets`` on the server's ``robot``, as :func:`ik_layer.solve` does locally.

        Args:
            robot: the robot's name on the server (see :meth:`robots`).
            targets: ``T_base_ee`` targets (..., 4, 4) or poses (..., 7) ``[x, y, z, qx, qy, qz, qw]``
                (tensor, array or nested lists), any batch shape; (..., F, 4, 4) or (..., F, 7) for a robot
                with F end-effector frames, in the order of its ``ee_frames``; batches over the server's limit
                go in several requests.
            options: solver options to send in full (default: only ``**option_changes``; the server's
                defaults fill in the rest).
            warm_start: (..., nq) one configuration per target, or (nq,) for all (with a floating base, the
                base pose ``[x, y, z, qx, qy, qz, qw]`` first).
            posture: (..., nq) one preferred configuration per target, or (nq,) for all: pulled towards in the
                null space, a seed, and preferred among successes (the joints only), as in :func:`ik_layer.solve`.
            weights: error weights of ``[x, y, z, rx, ry, rz]`` for every target: (6,), or (F, 6) per frame
                (zeros drop an axis: ``[1, 1, 1, 0, 0, 0]`` is position-only); default ones.
            gradient: also return dq/d(target twist), (..., dof, 6), or (..., dof, F, 6) with F frames.
            timeout: the server's time limit per request [s]; rows unfinished then come back with
                ``status == "deadline"`` (default: the server's).
            numpy: numpy arrays even for tensor targets (other targets always give numpy arrays).
            obstacles: obstacles every answer keeps ``collision_margin`` clear of, in the service's form (base
                frame, metres): ``{"type": "sphere", "center": [x, y, z], "radius": r}``, ``{"type": "box",
                "pose": [x, y, z, qx, qy, qz, qw], "size": [sx, sy, sz]}``, ``{"type": "capsule", "a": [...],
                "b": [...], "radius": r}``; the answers then carry ``min_distance``. A list of them for every
                target, or a list of such lists, one per target (in the targets' flattened order): each target
                keeps clear of its own.
            scene: the name of a scene registered with :meth:`put_scene`: its obstacles apply too.
            num_solutions: up to this many distinct solutions per target (as :func:`ik_layer.solve`); above 1 every
                field gains a dimension of that size after the targets' batch (``q`` (..., k, nq)).
            objective: how solutions rank: ``"first"``, ``"closest"`` (to ``warm_start``), ``"manipulability"`` or
                ``"posture"`` (to ``posture``), as :func:`ik_layer.solve`.
            goal_set: the targets' last batch dimension holds G candidate poses per row, (..., G, [F,] 4, 4) or
                (..., G, [F,] 7): each row's answer reaches one of them, ``goal`` (...) tells which (as
                :func:`ik_layer.solve`'s ``goal_set``); warm starts and postures are per row.
            terms: secondary cost terms the server added (its ``--terms``; :meth:`robots` lists them with their
                data sizes), by name: a gain, or ``(gain, data)`` with data (D,) for every target or (..., D) one
                row per target, as :func:`ik_layer.solve`'s ``terms``.
            **option_changes: solver options by name (``num_seeds=8``, ``max_iterations=100``...).

        Returns:
            A :class:`RemoteIKResult` (the fields of an :class:`ik_layer.IKResult`, plus ``status`` and ``gradient``)
            with the targets' batch shape: tensors for tensor targets, else numpy arrays. The first
            solve for a robot reads its description (frames, nq) from ``/v1/robots`` once; see :meth:`robots`.

        Raises:
            RemoteRobotNotFound: no such robot on the server.
            InvalidRequest: the server refused the request (422); ``errors`` holds its reasons.
            RequestTooLarge: a single target is over the server's size or work limits.
            ServiceUnavailable: the server stayed busy through the retries.
            IKLayerError: bad input found before sending (shapes, frames, non-finite values, unknown options).
        """


_TRAJECTORY_DOC = """Solve a clip of T targets on the server's ``robot``, as :func:`ik_layer.solve_trajectory` does
        locally: frame after frame, no joint stepping more than ``velocity_limit * dt``.

        Args:
            robot: the robot's name on the server (see :meth:`robots`).
            targets: one clip, (T, 4, 4) transforms or (T, 7) poses ``[x, y, z, qx, qy, qz, qw]`` (tensor, array or
                nested lists); (T, F, 4, 4) or (T, F, 7) for a robot with F end-effector frames, in the order of its
                ``ee_frames``. At most the server's ``--max-trajectory-frames`` frames (else
                :class:`RequestTooLarge` with its ``limit``).
            options: solver options to send in full (default: only ``**option_changes``; the server's defaults fill
                in the rest; secondary terms are refused).
            dt: [s] time between frames.
            velocity_limit: joint velocity limits [rad/s or m/s]: one number, or one per joint (default: the robot
                model's ``<limit velocity>``).
            acceleration: weight of the acceleration cost (default the server's, 0).
            warm_start: (nq,) the configuration the robot rests at before the first frame.
            posture: (nq,) a preferred configuration every frame is pulled towards; ``posture_weight`` its weight.
            weights: error weights of ``[x, y, z, rx, ry, rz]`` for every frame: (6,), or (F, 6) per end-effector
                frame.
            timeout: the server's time limit for the clip [s] (default: the server's); a clip not solved by then is
                refused (:class:`RequestTooLarge`: too much work for its time limit).
            random_seed: seed of the server's random generator: the same call, the same answer.
            numpy: numpy arrays even for tensor targets (other targets always give numpy arrays).
            **option_changes: solver options by name (``num_seeds=8``, ``position_tolerance=1e-5``...).

        Returns:
            A :class:`RemoteTrajectoryResult`, fields (T, ...): tensors for tensor targets, else numpy arrays.

        Raises:
            RemoteRobotNotFound: no such robot on the server.
            InvalidRequest: the server refused the request (422); ``errors`` holds its reasons.
            RequestTooLarge: more frames than the server takes, or not solved within the time limit (413).
            ServiceUnavailable: the server stayed busy through the retries.
            IKLayerError: bad input found before sending (shapes, frames, non-finite values, unknown options).
        """
