"""The blocking face of the client: :class:`Client` runs the shared flows with ``httpx.Client`` and ``time.sleep``."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from ik_layer.client._core import _SOLVE_DOC, _TRAJECTORY_DOC, Flow, RetryPolicy, _Call, _Core
from ik_layer.client.wire import RemoteIKResult, RemoteTrajectoryResult, RobotInfo
from ik_layer.core.options import SolveOptions

if TYPE_CHECKING:
    from ik_layer.client.wire import Array, ArrayLike

__all__ = ["Client"]

T = TypeVar("T")


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
        terms: Mapping[str, Any] | None = None,
        **option_changes: Any,
    ) -> RemoteIKResult:
        flow = self._core.solve_flow(
            robot, targets, options, warm_start, weights, gradient, timeout, numpy, option_changes, posture,
            obstacles, scene, num_solutions, objective, goal_set, terms,
        )  # fmt: skip
        return self._run(flow)

    solve.__doc__ = _SOLVE_DOC

    def trajectory(
        self,
        robot: str,
        targets: ArrayLike,
        options: SolveOptions | None = None,
        *,
        dt: float,
        velocity_limit: ArrayLike | float | None = None,
        acceleration: float | None = None,
        warm_start: ArrayLike | None = None,
        posture: ArrayLike | None = None,
        posture_weight: float | None = None,
        weights: ArrayLike | None = None,
        timeout: float | None = None,
        random_seed: int | None = None,
        numpy: bool = False,
        **option_changes: Any,
    ) -> RemoteTrajectoryResult:
        flow = self._core.trajectory_flow(
            robot, targets, options, dt, velocity_limit, acceleration, warm_start, posture, posture_weight, weights,
            timeout, random_seed, numpy, option_changes,
        )  # fmt: skip
        return self._run(flow)

    trajectory.__doc__ = _TRAJECTORY_DOC

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
