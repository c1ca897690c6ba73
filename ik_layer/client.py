"""A Python client for the ik-layer HTTP service: :class:`Client` (blocking) and :class:`AsyncClient` (asyncio).

Both speak the same API with the same logic: every call is written once as a *flow*, a generator that
yields :class:`_Call` (an HTTP request to send) or a float (seconds to sleep) and receives the answer;
the two classes only differ in how they run a flow (``httpx.Client`` and ``time.sleep``, or
``httpx.AsyncClient`` and ``asyncio.sleep``).

The client takes targets in every form the library takes ((..., 4, 4) transforms or (..., 7) poses, any
batch shape, tensors, arrays or nested lists; (..., F, 4, 4) or (..., F, 7) for a robot with F end-effector
frames, in the order of its ``ee_frames``), splits a batch larger than the server's ``--max-targets``
into several requests (the limit is read from the server's 413 answer once, then remembered), retries
503 answers as ``Retry-After`` says (a bounded number of times and seconds), and raises the library's
exception classes for refused requests. Results have the shapes :func:`ik_layer.solve` and
:meth:`ik_layer.Robot.fk` give for the same robot: torch tensors for tensor input, numpy arrays otherwise.

It needs numpy and httpx only: the ``ik-layer-client`` distribution (``pip install ./client`` in a checkout)
installs this module without torch, Pinocchio or warp.

Example::

    from ik_layer.client import Client

    with Client("http://127.0.0.1:8000") as client:
        result = client.solve("ur5e", targets)  # (..., 7) or (..., 4, 4)
        result.q, result.success, result.status
        feet = client.solve("solo", feet_targets, weights=[1, 1, 1, 0, 0, 0])  # (..., 4, 4, 4): four feet
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import sys
import time
import urllib.parse
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import numpy as np

from ik_layer.core.options import OPTION_SPECS, SolveOptions
from ik_layer.exceptions import IKLayerError, NonFiniteError, RobotNotFound, ShapeError
from ik_layer.model.host import as_checked, matrix_to_pose, pose_to_matrix

try:
    import httpx
except ImportError as err:  # pragma: no cover - depends on the install
    raise ImportError("the client needs httpx (the client extra, or pip install httpx)") from err

if TYPE_CHECKING:
    from torch import Tensor

    from ik_layer.core.result import IKResult

    ArrayLike = Tensor | np.ndarray | Sequence[Any]
    Array = Tensor | np.ndarray  # a result: a tensor for tensor input (unless numpy=True), else a numpy array

__all__ = [
    "AsyncClient",
    "Client",
    "InvalidRequest",
    "RemoteIKResult",
    "RemoteRobotNotFound",
    "RequestTooLarge",
    "RetryPolicy",
    "RobotInfo",
    "ServiceError",
    "ServiceUnavailable",
]

T = TypeVar("T")

_HTTP_MARGIN = 10.0  # [s] added to a solve's time limit for the HTTP read timeout


# --- results ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RobotInfo:
    """A robot the server solves for.

    Attributes:
        name: the robot's name in URLs.
        dof: degrees of freedom: rows of a gradient (6 + joints with a floating base, else the joints).
        joint_names: the joints, in the order of ``q`` (after the base pose with a floating base).
        lower, upper: (joints,) float64 numpy arrays, the joint limits [rad or m].
        ee_frame: the end-effector frame the targets are for (the first of ``ee_frames``).
        nq: values in a configuration ``q``: the base pose ``[x, y, z, qx, qy, qz, qw]`` first with a floating
            base, then the joints.
        ee_frames: the end-effector frames, in order (one-frame robots: ``(ee_frame,)``); with several, targets
            are (..., F, 4, 4) or (..., F, 7) in this order.
        floating_base: whether ``q`` starts with the base pose.
        locked: joints of the model the solver does not move, at their values [rad or m].
    """

    name: str
    dof: int
    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    ee_frame: str
    nq: int
    ee_frames: tuple[str, ...]
    floating_base: bool = False
    locked: dict[str, float] = field(default_factory=dict)

    @property
    def frames(self) -> int:
        """Number of end-effector frames."""
        return len(self.ee_frames)

    @property
    def target_shape(self) -> tuple[int, ...]:
        """Shape of one target transform, as :attr:`ik_layer.Robot.target_shape`: (4, 4), or (F, 4, 4)."""
        return (4, 4) if self.frames == 1 else (self.frames, 4, 4)


@dataclass(frozen=True)
class RemoteIKResult:
    """The fields of an :class:`ik_layer.IKResult`, answered by the service, with what only the service reports.

    Fields have the targets' batch shape ``(...)`` (``(..., k)`` for ``num_solutions=k`` above 1): float64 /
    bool / int64 CPU tensors for tensor targets, numpy arrays for other targets or when the call asked for
    ``numpy=True``.

    Attributes:
        q: (..., nq) best configuration found (a floating base's pose first).
        success: (...) bool, both errors within their tolerances.
        position_error: (...) [m] the position error.
        orientation_error: (...) [rad] the orientation error.
        iterations: (...) int64, iterations until success (the budget used if it failed).
        status: (...) str array, why each row stopped: ``solved``, ``exhausted``, ``deadline`` or ``cancelled``.
        gradient: (..., dof, 6) dq/d(target twist) when asked for (``gradient=True``), else None; (..., dof, F, 6)
            for a robot with F end-effector frames, as :func:`ik_layer.target_gradient`.
        min_distance: (...) [m] with obstacles or self-collision: the least distance between the robot's collision
            spheres and the obstacles (or each other) at ``q``, +inf where nothing was measured; else None.
        closest_pair: (..., 2) int64 with ``min_distance``: its pair as :attr:`ik_layer.IKResult.closest_pair`
            gives it (the robot's sphere; the obstacle, or ``-1 - j`` for the robot's sphere ``j``); -1, -1 where
            none was measured.
        goal: (...) int64 with ``goal_set=True``: the index of the goal each row's answer reaches; else None.
    """

    q: Array
    success: Array
    position_error: Array
    orientation_error: Array
    iterations: Array
    status: np.ndarray
    gradient: Array | None = None
    min_distance: Array | None = None
    closest_pair: Array | None = None
    goal: Array | None = None

    def result(self) -> IKResult[Tensor | np.ndarray]:
        """The plain :class:`ik_layer.IKResult` (q, success, errors, iterations, min_distance, status as codes of
        ``ik_layer.ROW_STATUS``); needs the full ik-layer package."""
        import torch  # torch and the solver: not part of a client-only install

        from ik_layer import ROW_STATUS, IKResult

        codes = {name: code for code, name in ROW_STATUS.items()}
        status = np.array([codes[name] for name in self.status.ravel()], dtype=np.int32).reshape(self.status.shape)
        # The fields as they came: tensors for tensor targets, numpy arrays for others or asked with numpy=True.
        return IKResult(
            self.q,
            self.success,
            self.position_error,
            self.orientation_error,
            self.iterations,
            self.min_distance,
            self.closest_pair,
            torch.from_numpy(status) if isinstance(self.q, torch.Tensor) else status,
            self.goal,
        )


# --- errors ----------------------------------------------------------------------------------------------------


class _Answered:
    """What every error of a refused request carries: the HTTP ``status`` and the server's JSON ``body``."""

    status: int
    body: Any

    def _answered(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body


class RemoteRobotNotFound(RobotNotFound, _Answered):
    """404: the server has no robot of that name; ``available`` lists the ones it has."""

    def __init__(self, name: str, available: Sequence[str], status: int = 404, body: Any = None) -> None:
        IKLayerError.__init__(self, f"the server has no robot {name!r}; available: {', '.join(available) or '(none)'}")
        self.name = name
        self.available = list(available)
        self._answered(status, body)


class InvalidRequest(IKLayerError, _Answered):
    """422 (or another 4xx): the server refused the request's content; ``errors`` holds its validation errors."""

    def __init__(self, message: str, status: int, body: Any, errors: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)
        self._answered(status, body)


class RequestTooLarge(IKLayerError, _Answered):
    """413: too many targets (``limit``: the server's ``--max-targets``), too much work or too large a body."""

    def __init__(self, message: str, status: int, body: Any, limit: int | None) -> None:
        super().__init__(message)
        self.limit = limit
        self._answered(status, body)


class ServiceError(Exception, _Answered):
    """The service failed (5xx) or answered what the client cannot read; not an input error."""

    def __init__(self, message: str, status: int, body: Any = None) -> None:
        super().__init__(message)
        self._answered(status, body)


class ServiceUnavailable(ServiceError):
    """503 answers went on past the client's :class:`RetryPolicy`."""


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


# --- the shared core: calls, flows, parsing -------------------------------------------------------------------


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
            return {**request, **fields}

        http_timeout = self.timeout if timeout is None else max(self.timeout, timeout + _HTTP_MARGIN)
        solutions = yield from self._in_chunks(path, n, body, "solutions", http_timeout, goals)
        if num_solutions != 1:
            solutions = _flat_sets(solutions, num_solutions)
        return _ik_result(solutions, batch, info, gradient, targets, numpy)

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


def _answer(response: httpx.Response) -> Any:
    """The JSON of a 2xx answer; the library's exception for a 4xx, :class:`ServiceError` for others."""
    body = _json_or_text(response)
    status = response.status_code
    if 200 <= status < 300:
        if isinstance(body, str):
            raise ServiceError(f"{response.request.url}: the answer is not JSON: {body[:200]!r}", status, body)
        return body
    detail = _detail(response)
    if status == 404 and isinstance(body, dict) and isinstance(body.get("available"), list):
        parts = response.request.url.path.split("/")  # /v1/robots/{name}/...
        name = urllib.parse.unquote(parts[parts.index("robots") + 1] if "robots" in parts[:-1] else parts[-1])
        raise RemoteRobotNotFound(name, body["available"], status, body)
    if status == 413:
        limit = body.get("limit") if isinstance(body, dict) else None
        raise RequestTooLarge(f"413: {detail}", status, body, limit if isinstance(limit, int) else None)
    if 400 <= status < 500:
        errors = body.get("detail") if isinstance(body, dict) else None
        raise InvalidRequest(f"{status}: {detail}", status, body, errors if isinstance(errors, list) else [])
    raise ServiceError(f"{response.request.method} {response.request.url.path}: {status} {detail}", status, body)


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _detail(response: httpx.Response) -> str:
    """The server's message in one line: ``detail``, or each validation error as ``loc: msg``."""
    body = _json_or_text(response)
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):
        parts = [
            f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg', e)}" if isinstance(e, dict) else str(e)
            for e in detail
        ]
        count = body.get("error_count", len(detail)) if isinstance(body, dict) else len(detail)
        more = f" (and {count - len(detail)} more)" if isinstance(count, int) and count > len(detail) else ""
        return "; ".join(parts) + more
    return str(detail)[:500] if detail != "" else response.reason_phrase


def _retry_after(response: httpx.Response, default: float) -> float:
    """Seconds to wait before retrying: the ``Retry-After`` header (seconds or an HTTP date), else ``default``."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return default
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(when.timestamp() - time.time(), 0.0)


def _robot_path(robot: str, operation: str) -> str:
    if not isinstance(robot, str) or not robot:
        raise IKLayerError(f"robot must be a robot name (str), got {robot!r}")
    return f"/v1/robots/{urllib.parse.quote(robot, safe='')}/{operation}"


def _obstacles_field(obstacles: object, name: str = "obstacles") -> list[dict[str, Any]]:
    """The ``obstacles`` of a request: mappings in the service's form (checked by the server)."""
    if isinstance(obstacles, (str, bytes, Mapping)) or not isinstance(obstacles, Sequence):
        raise IKLayerError(f"{name} must be a list of mappings, got {type(obstacles).__name__}")
    for k, entry in enumerate(obstacles):
        if not isinstance(entry, Mapping):
            raise IKLayerError(
                f"{name}[{k}] must be a mapping such as {{'type': 'sphere', 'center': [x, y, z], 'radius': r}}, "
                f"got {type(entry).__name__}"
            )
    return [dict(entry) for entry in obstacles]


def _per_target(obstacles: object) -> bool:
    """Whether ``obstacles`` holds one list of obstacles per target (a non-empty list of lists)."""
    return (
        isinstance(obstacles, Sequence)
        and not isinstance(obstacles, (str, bytes))
        and bool(obstacles)
        and isinstance(obstacles[0], Sequence)
        and not isinstance(obstacles[0], (str, bytes))
    )


def _scenes_fields(
    obstacles: object, n: int
) -> tuple[list[dict[str, Any]], None] | tuple[None, list[list[dict[str, Any]]]]:
    """The obstacles of ``n`` targets: ``(shared, None)`` for one list for every target (a list of obstacles, or
    a list of one such list), ``(None, scenes)`` for one list per target."""
    if not _per_target(obstacles):
        return _obstacles_field(obstacles), None
    assert isinstance(obstacles, Sequence)
    if len(obstacles) == 1:
        return _obstacles_field(obstacles[0], "obstacles[0]"), None
    if len(obstacles) != n:
        raise IKLayerError(f"obstacles: one list of obstacles per target needs {n} lists, got {len(obstacles)}")
    return None, [_obstacles_field(scene, f"obstacles[{k}]") for k, scene in enumerate(obstacles)]


def _scene_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise IKLayerError(f"scene must be a scene's name (str), got {name!r}")
    return urllib.parse.quote(name, safe="")


def _is_tensor(x: object) -> TypeGuard[Tensor]:
    """Whether ``x`` is a torch tensor (without importing torch: a client-only install has none)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _as_float64(x: ArrayLike, name: str) -> np.ndarray:
    """``x`` as a float64 numpy array (tensors are detached and copied to the CPU; nested lists converted)."""
    try:
        a = np.asarray(x.detach().cpu().numpy() if _is_tensor(x) else x)
        if a.dtype == np.bool_ or np.iscomplexobj(a):
            raise IKLayerError(f"{name} must hold real numbers, got {a.dtype}")
        return a.astype(np.float64)
    except (TypeError, ValueError) as err:
        raise ShapeError(f"{name} must be a tensor, an array or nested lists of numbers: {err}") from None


def _as_given(a: np.ndarray, like: object, numpy: bool) -> Array:
    """``a`` as a tensor when ``like`` (the caller's input) is one and ``numpy`` is False, else ``a`` itself."""
    if numpy or not _is_tensor(like):
        return a
    return sys.modules["torch"].from_numpy(a)


def _robot_info(r: dict[str, Any]) -> RobotInfo:
    """A :class:`RobotInfo` from one entry of ``/v1/robots`` (older servers: one frame, nq = dof)."""
    dof = int(r["dof"])
    ee_frames = r.get("ee_frames", [r["ee_frame"]])
    if not isinstance(ee_frames, list) or not ee_frames or not all(isinstance(f, str) for f in ee_frames):
        raise ValueError(f"ee_frames must be a non-empty list of names, got {ee_frames!r}")
    return RobotInfo(
        name=r["name"],
        dof=dof,
        joint_names=tuple(r["joint_names"]),
        lower=np.array(r["lower"], dtype=np.float64),
        upper=np.array(r["upper"], dtype=np.float64),
        ee_frame=r["ee_frame"],
        nq=int(r.get("nq", dof)),
        ee_frames=tuple(ee_frames),
        floating_base=bool(r.get("floating_base", False)),
        locked={str(k): float(v) for k, v in r.get("locked", {}).items()},
    )


def _target_poses(t: np.ndarray, info: RobotInfo) -> tuple[np.ndarray, tuple[int, ...]]:
    """(n, 7) poses of checked targets (..., 7) or (..., 4, 4) and their batch shape; (n, F, 7) from (..., F, 7)
    or (..., F, 4, 4) for a robot with F end-effector frames.

    Raises:
        ShapeError: the targets do not end with the robot's F frames.
    """
    frames = () if info.frames == 1 else (info.frames,)
    is_pose = t.ndim >= 1 and t.shape[-1] == 7
    inner = t.shape[t.ndim - 1 :] if is_pose else t.shape[t.ndim - 2 :]
    outer = t.shape[: t.ndim - len(inner)]
    if tuple(outer[len(outer) - len(frames) :]) != frames:
        names = ", ".join(info.ee_frames)
        raise ShapeError(
            f"targets for {info.name} (frames {names}) must have shape (..., {info.frames}, 4, 4) or "
            f"(..., {info.frames}, 7), got {tuple(t.shape)}"
        )
    batch = outer[: len(outer) - len(frames)]
    poses = t if is_pose else matrix_to_pose(t)
    return poses.reshape(-1, *frames, 7), batch


def _pose_json(p: list[Any], frames: Sequence[str] | None) -> dict[str, Any]:
    """A target of the API: ``{"position", "orientation"}`` of a 7-list, or with ``frames`` an object frame -> it."""
    if frames is None:
        return {"position": p[:3], "orientation": p[3:]}
    return {frame: {"position": x[:3], "orientation": x[3:]} for frame, x in zip(frames, p, strict=True)}


def _is_pose(p: Any) -> bool:
    return isinstance(p, dict) and "position" in p


def _pose_values(p: Any, frames: Sequence[str]) -> list[Any]:
    """``[x, y, z, qx, qy, qz, qw]`` of an answered pose, or (F, 7) values of an object keyed by ``frames``."""
    if not frames:
        return p["position"] + p["orientation"]
    return [p[frame]["position"] + p[frame]["orientation"] for frame in frames]


def _weights_field(weights: ArrayLike, info: RobotInfo) -> list[float] | dict[str, list[float]]:
    """The request's ``weights``: (6,) for every frame, or (F, 6) per frame (as an object frame -> 6 numbers)."""
    w = _as_float64(weights, "weights")
    per_frame = info.frames > 1 and tuple(w.shape) == (info.frames, 6)
    if tuple(w.shape) != (6,) and not per_frame:
        shapes = "(6,)" if info.frames == 1 else f"(6,) or ({info.frames}, 6)"
        raise ShapeError(
            f"weights for {info.name} must have shape {shapes}, the same for every target (the service takes "
            f"no per-target weights), got {tuple(w.shape)}"
        )
    if not np.isfinite(w).all():
        raise NonFiniteError("weights hold NaN or infinite values")
    if per_frame:
        return dict(zip(info.ee_frames, w.tolist(), strict=True))
    return w.tolist()


def _warm_start_rows(warm_start: ArrayLike, n: int, name: str = "warm_start") -> np.ndarray:
    """(n, nq) warm starts (or postures: ``name``) from (..., nq) with n rows, or one (nq,) row for every target."""
    w = _as_float64(warm_start, name)
    if w.ndim == 1:
        return np.broadcast_to(w, (n, w.shape[0]))
    if w.ndim == 0 or w[..., 0].size != n:
        raise ShapeError(
            f"{name} must have shape (..., nq) with one row per target ({n}) or (nq,), got {tuple(w.shape)}"
        )
    if not np.isfinite(w).all():
        raise NonFiniteError(f"{name} holds NaN or infinite values")
    return w.reshape(n, -1)


def _option_fields(options: SolveOptions | None, changes: dict[str, Any]) -> dict[str, Any]:
    """The solver options to send: all of ``options`` if given, then ``changes`` (checked; None: left out)."""
    if options is not None and not isinstance(options, SolveOptions):
        raise IKLayerError(f"options must be a SolveOptions, got {type(options).__name__}")
    fields: dict[str, Any] = options.as_dict() if options is not None else {}
    unknown = sorted(set(changes) - set(OPTION_SPECS))
    if unknown:
        raise IKLayerError(f"unknown solver option(s) {unknown}; valid: {', '.join(OPTION_SPECS)}")
    fields.update({name: OPTION_SPECS[name].check(v) for name, v in changes.items() if v is not None})
    return fields


def _ik_result(
    solutions: list[dict[str, Any]],
    batch: tuple[int, ...],
    info: RobotInfo,
    gradient: bool,
    targets: ArrayLike,
    numpy: bool,
) -> RemoteIKResult:
    """The :class:`RemoteIKResult` of the server's ``solutions``, reshaped to the targets' ``batch`` shape (tensors
    for tensor ``targets`` unless ``numpy``, see :func:`_as_given`)."""

    def field(key: str, dtype: type, *shape: int) -> np.ndarray:
        return np.array([s[key] for s in solutions], dtype=dtype).reshape((*batch, *shape))

    try:
        values = {
            "q": field("q", np.float64, info.nq),
            "success": field("success", np.bool_),
            "position_error": field("position_error", np.float64),
            "orientation_error": field("orientation_error", np.float64),
            "iterations": field("iterations", np.int64),
        }
        if any("min_distance" in s for s in solutions):  # left out where infinite (JSON has no infinity)
            least = [s.get("min_distance", math.inf) for s in solutions]
            values["min_distance"] = np.array(least, dtype=np.float64).reshape(batch)
            pairs = [_closest(s.get("closest")) for s in solutions]
            values["closest_pair"] = np.array(pairs, dtype=np.int64).reshape(*batch, 2)
        if any("goal" in s for s in solutions):  # goal sets
            values["goal"] = np.array([s["goal"] for s in solutions], dtype=np.int64).reshape(batch)
        gradients = _gradients(solutions, batch, info) if gradient else None
        status = field("status", np.str_)
    except (KeyError, TypeError, ValueError) as err:
        raise ServiceError(f"unreadable IK answer: {err!r}", 200) from None
    given = {k: _as_given(v, targets, numpy) for k, v in values.items()}
    gradients_given = None if gradients is None else _as_given(gradients, targets, numpy)
    return RemoteIKResult(**given, status=status, gradient=gradients_given)


def _flat_sets(sets: list[Any], k: int) -> list[dict[str, Any]]:
    """The solutions of lists of ``k`` per target, one after the other."""
    if not all(isinstance(one, list) and len(one) == k for one in sets):
        raise ServiceError(f"unreadable IK answer: expected lists of {k} solutions per target", 200)
    return [solution for one in sets for solution in one]


def _closest(pair: dict[str, Any] | None) -> list[int]:
    """``[sphere, obstacle or -1 - other sphere]`` of an answer's ``closest`` (``[-1, -1]`` without one)."""
    if pair is None:
        return [-1, -1]
    other = pair.get("obstacle")
    return [int(pair["sphere"]), int(other) if other is not None else -1 - int(pair["other_sphere"])]


def _gradients(solutions: list[dict[str, Any]], batch: tuple[int, ...], info: RobotInfo) -> np.ndarray:
    """(..., dof, 6) gradients of ``solutions``; (..., dof, F, 6) for F frames (answered as frame -> dof x 6)."""
    if info.frames == 1:
        return np.array([s["gradient"] for s in solutions], dtype=np.float64).reshape(*batch, info.dof, 6)
    rows = [[s["gradient"][frame] for frame in info.ee_frames] for s in solutions]  # (n, F, dof, 6)
    by_frame = np.array(rows, dtype=np.float64).reshape(-1, info.frames, info.dof, 6)
    return by_frame.swapaxes(1, 2).reshape(*batch, info.dof, info.frames, 6)


# --- the two clients: they only run flows ----------------------------------------------------------------------


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


class Client:
    """A blocking client of the ik-layer service; use it as a context manager or call :meth:`close`.

    Args:
        base_url: the service's address, e.g. ``http://127.0.0.1:8000``.
        timeout: HTTP timeout of a request [s] (raised for a solve given a longer ``timeout``).
        retry: how 503 answers are retried.
        max_targets: targets per request at most (default: learned from the server's first 413 answer).
        headers: sent with every request (e.g. authorization).
        transport: an httpx transport (tests: ``httpx.MockTransport``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        max_targets: int | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._core = _Core(timeout, retry or RetryPolicy(), max_targets)
        self._http = httpx.Client(base_url=base_url, timeout=timeout, headers=headers, transport=transport)

    @property
    def max_targets(self) -> int | None:
        """Targets sent per request at most: given, learned from a 413 answer, or None (not known yet)."""
        return self._core.max_targets

    def health(self) -> dict[str, Any]:
        """The server's ``/health`` answer (``status``, ``device``, ``dtype``, ``robots``)."""
        return self._run(self._core.health_flow())

    def robots(self) -> dict[str, RobotInfo]:
        """The server's robots by name, in its order."""
        return self._run(self._core.robots_flow())

    def fk(self, robot: str, q: ArrayLike, *, pose: bool = False, numpy: bool = False) -> Array:
        """End-effector transforms (..., 4, 4) of configurations ``q`` (..., nq); poses (..., 7) with ``pose=True``;
        (..., F, 4, 4) or (..., F, 7) for a robot with F end-effector frames. A tensor for a tensor ``q`` (unless
        ``numpy=True``), else a numpy array."""
        return self._run(self._core.fk_flow(robot, q, pose, numpy))

    def solve(
        self,
        robot: str,
        targets: ArrayLike,
        options: SolveOptions | None = None,
        *,
        warm_start: ArrayLike | None = None,
        posture: ArrayLike | None = None,
        weights: ArrayLike | None = None,
        gradient: bool = False,
        timeout: float | None = None,
        numpy: bool = False,
        obstacles: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]] | None = None,
        scene: str | None = None,
        num_solutions: int = 1,
        objective: str = "first",
        goal_set: bool = False,
        **option_changes: Any,
    ) -> RemoteIKResult:
        flow = self._core.solve_flow(
            robot, targets, options, warm_start, weights, gradient, timeout, numpy, option_changes, posture,
            obstacles, scene, num_solutions, objective, goal_set,
        )  # fmt: skip
        return self._run(flow)

    solve.__doc__ = _SOLVE_DOC

    def put_scene(self, robot: str, name: str, obstacles: Sequence[Mapping[str, Any]]) -> int:
        """Register (or replace) the scene ``name`` of ``robot`` on the server; return how many obstacles it holds.
        Solves naming it (``scene=name``) keep clear of its obstacles (see :meth:`solve` for their form)."""
        return self._run(self._core.scene_flow("PUT", robot, name, obstacles))

    def delete_scene(self, robot: str, name: str) -> int:
        """Forget the scene ``name`` of ``robot``; return how many obstacles it held."""
        return self._run(self._core.scene_flow("DELETE", robot, name, None))

    def scenes(self, robot: str) -> dict[str, int]:
        """The scenes registered for ``robot``: name -> how many obstacles."""
        return self._run(self._core.scenes_flow(robot))

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, flow: Flow[T]) -> T:
        """Run ``flow``: send its requests, sleep its waits, return its value."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, _Call):
                    request = self._http.build_request(step.method, step.path, json=step.json, timeout=step.timeout)
                    step = flow.send(self._http.send(request))
                else:
                    time.sleep(step)
                    step = flow.send(None)
        except StopIteration as done:
            return done.value


class AsyncClient:
    """The asyncio twin of :class:`Client`: same arguments, same methods, awaited; ``async with`` or :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        max_targets: int | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._core = _Core(timeout, retry or RetryPolicy(), max_targets)
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=headers, transport=transport)

    @property
    def max_targets(self) -> int | None:
        """Targets sent per request at most: given, learned from a 413 answer, or None (not known yet)."""
        return self._core.max_targets

    async def health(self) -> dict[str, Any]:
        """The server's ``/health`` answer (``status``, ``device``, ``dtype``, ``robots``)."""
        return await self._run(self._core.health_flow())

    async def robots(self) -> dict[str, RobotInfo]:
        """The server's robots by name, in its order."""
        return await self._run(self._core.robots_flow())

    async def fk(self, robot: str, q: ArrayLike, *, pose: bool = False, numpy: bool = False) -> Array:
        """End-effector transforms (..., 4, 4) of configurations ``q`` (..., nq); poses (..., 7) with ``pose=True``;
        (..., F, 4, 4) or (..., F, 7) for a robot with F end-effector frames. A tensor for a tensor ``q`` (unless
        ``numpy=True``), else a numpy array."""
        return await self._run(self._core.fk_flow(robot, q, pose, numpy))

    async def solve(
        self,
        robot: str,
        targets: ArrayLike,
        options: SolveOptions | None = None,
        *,
        warm_start: ArrayLike | None = None,
        posture: ArrayLike | None = None,
        weights: ArrayLike | None = None,
        gradient: bool = False,
        timeout: float | None = None,
        numpy: bool = False,
        obstacles: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]] | None = None,
        scene: str | None = None,
        num_solutions: int = 1,
        objective: str = "first",
        goal_set: bool = False,
        **option_changes: Any,
    ) -> RemoteIKResult:
        flow = self._core.solve_flow(
            robot, targets, options, warm_start, weights, gradient, timeout, numpy, option_changes, posture,
            obstacles, scene, num_solutions, objective, goal_set,
        )  # fmt: skip
        return await self._run(flow)

    solve.__doc__ = _SOLVE_DOC

    async def put_scene(self, robot: str, name: str, obstacles: Sequence[Mapping[str, Any]]) -> int:
        """Register (or replace) the scene ``name`` of ``robot`` on the server; return how many obstacles it holds."""
        return await self._run(self._core.scene_flow("PUT", robot, name, obstacles))

    async def delete_scene(self, robot: str, name: str) -> int:
        """Forget the scene ``name`` of ``robot``; return how many obstacles it held."""
        return await self._run(self._core.scene_flow("DELETE", robot, name, None))

    async def scenes(self, robot: str) -> dict[str, int]:
        """The scenes registered for ``robot``: name -> how many obstacles."""
        return await self._run(self._core.scenes_flow(robot))

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _run(self, flow: Flow[T]) -> T:
        """Run ``flow``: send its requests, sleep its waits, return its value."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, _Call):
                    request = self._http.build_request(step.method, step.path, json=step.json, timeout=step.timeout)
                    step = flow.send(await self._http.send(request))
                else:
                    await asyncio.sleep(step)
                    step = flow.send(None)
        except StopIteration as done:
            return done.value
