"""The service's wire format, as the client writes and reads it: requests' JSON fields from arrays, tensors or
lists, answers' JSON back to :class:`RobotInfo` and :class:`RemoteIKResult` (numpy arrays, or tensors for tensor
input), and refused requests to the library's exception classes (:func:`_answer`).

Pure conversions, without a connection: :mod:`ik_layer.client._core` sends the requests.
"""

from __future__ import annotations

import email.utils
import math
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import httpx
import numpy as np

from ik_layer.core.options import OPTION_SPECS, SolveOptions
from ik_layer.exceptions import IKLayerError, NonFiniteError, RobotNotFound, ShapeError
from ik_layer.model.host import matrix_to_pose

if TYPE_CHECKING:
    from torch import Tensor

    from ik_layer.core.result import IKResult

    ArrayLike = Tensor | np.ndarray | Sequence[Any]
    Array = Tensor | np.ndarray  # a result: a tensor for tensor input (unless numpy=True), else a numpy array

__all__ = [
    "InvalidRequest",
    "RemoteIKResult",
    "RemoteRobotNotFound",
    "RemoteTrajectoryResult",
    "RequestTooLarge",
    "RobotInfo",
    "ServiceError",
    "ServiceUnavailable",
]


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
        terms: the secondary cost terms the server added, which ``solve(..., terms=...)`` may name: each one's data
            size (numbers per target; 0: none).
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
    terms: dict[str, int] = field(default_factory=dict)

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


@dataclass(frozen=True)
class RemoteTrajectoryResult:
    """The fields of an :class:`ik_layer.TrajectoryResult` of one clip of T frames, answered by the service.

    Float64 / bool CPU tensors for tensor targets, numpy arrays for other targets or when the call asked for
    ``numpy=True``.

    Attributes:
        q: (T, nq) configurations (a floating base's pose first), inside the joint limits.
        success: (T,) bool: the frame's pose within the tolerances, its step within the velocity limits.
        position_error: (T,) [m] (the worst end-effector frame's).
        orientation_error: (T,) [rad] (the worst end-effector frame's).
        max_step: (T,) [rad or m] the largest joint motion from the previous frame (from ``warm_start`` for the
            first frame; 0 there without one).
        velocity_ratio: (T,) the largest ``|step_j| / (v_max_j dt)``: at most 1.
        bounded: (T,) bool: frames solved again inside their velocity box.
        status: (T,) numpy strings, why each frame stopped: ``"solved"``, ``"exhausted"``, or ``"deadline"`` (the
            request's ``timeout`` ran out during the frame or before it; later frames hold the last configuration).
    """

    q: Array
    success: Array
    position_error: Array
    orientation_error: Array
    max_step: Array
    velocity_ratio: Array
    bounded: Array
    status: np.ndarray


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


# --- answers and requests ---------------------------------------------------------------------------------------


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
        terms={str(k): int(v) for k, v in r.get("terms", {}).items()},
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


def _terms_rows(terms: Mapping[str, Any] | None, n: int) -> dict[str, tuple[float, np.ndarray | None]]:
    """Each added term's gain and (n, D) data rows (None: a term without data) from ``terms``: name -> gain, or
    (gain, data) with data (D,) for every target or (..., D) one row per target."""
    if terms is None:
        return {}
    if not isinstance(terms, Mapping):
        raise IKLayerError(f"terms must map a term's name to its gain or (gain, data), got {type(terms).__name__}")
    rows: dict[str, tuple[float, np.ndarray | None]] = {}
    for name, given in terms.items():
        gain, data = given if isinstance(given, tuple) and len(given) == 2 else (given, None)
        if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not math.isfinite(gain) or gain < 0:
            raise IKLayerError(f"terms: {name!r}'s gain must be a finite number >= 0, got {gain!r}")
        rows[str(name)] = (float(gain), None if data is None else _warm_start_rows(data, n, f"terms: {name!r}'s data"))
    return rows


def _warm_start_rows(warm_start: ArrayLike, n: int, name: str = "warm_start") -> np.ndarray:
    """(n, nq) warm starts (or postures, or a term's data: ``name``) from (..., nq) with n rows, or one (nq,) row
    for every target."""
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


def _trajectory_result(
    answer: Any, frames: int, info: RobotInfo, targets: ArrayLike, numpy: bool
) -> RemoteTrajectoryResult:
    """The :class:`RemoteTrajectoryResult` of the server's answer to a clip of ``frames`` frames (tensors for tensor
    ``targets`` unless ``numpy``, see :func:`_as_given`)."""
    kinds = {"success": np.bool_, "bounded": np.bool_, "status": np.str_}
    names = ("success", "position_error", "orientation_error", "max_step", "velocity_ratio", "bounded", "status")
    try:
        values = {"q": np.array(answer["q"], dtype=np.float64).reshape(frames, info.nq)}
        for name in names:
            column = answer[name]
            if not isinstance(column, list) or len(column) != frames:
                raise ValueError(f"{name} must be a list of {frames} values")
            values[name] = np.array(column, dtype=kinds.get(name, np.float64))
    except (KeyError, TypeError, ValueError) as err:
        raise ServiceError(f"unreadable trajectory answer: {err!r}", 200, answer) from None
    status = values.pop("status")
    return RemoteTrajectoryResult(**{k: _as_given(v, targets, numpy) for k, v in values.items()}, status=status)


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
