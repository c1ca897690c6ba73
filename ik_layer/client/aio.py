"""The asyncio face of the client: :class:`AsyncClient` runs the shared flows with ``httpx.AsyncClient`` and
``asyncio.sleep``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from ik_layer.client._core import _SOLVE_DOC, _TRAJECTORY_DOC, Flow, RetryPolicy, _Call, _Core
from ik_layer.client.wire import RemoteIKResult, RemoteTrajectoryResult, RobotInfo
from ik_layer.core.options import SolveOptions

if TYPE_CHECKING:
    from ik_layer.client.wire import Array, ArrayLike

__all__ = ["AsyncClient"]

T = TypeVar("T")


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
        terms: Mapping[str, Any] | None = None,
        **option_changes: Any,
    ) -> RemoteIKResult:
        flow = self._core.solve_flow(
            robot, targets, options, warm_start, weights, gradient, timeout, numpy, option_changes, posture,
            obstacles, scene, num_solutions, objective, goal_set, terms,
        )  # fmt: skip
        return await self._run(flow)

    solve.__doc__ = _SOLVE_DOC

    async def trajectory(
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
        return await self._run(flow)

    trajectory.__doc__ = _TRAJECTORY_DOC

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
