"""What the app holds while it runs (on ``app.state.ik``), and the tiny accessors the routes depend on."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fastapi import Request

from ik_layer import Obstacle, Robot, RobotNotFound
from ik_layer.server.exceptions import ServiceUnavailable
from ik_layer.server.metrics import Metrics
from ik_layer.server.settings import Settings
from ik_layer.server.worker import EngineWorker

__all__ = ["MAX_SCENES", "Loaded", "ServerState", "get_loaded", "get_state"]

MAX_SCENES = 64
"""Scenes registered per robot at most."""

_GRACE_USED = 0.8  # of the shutdown grace, for solving; the rest for answering


@dataclass(frozen=True)
class Loaded:
    """A robot ready to serve: the model, the worker running its solver engine, the source of its collision spheres
    (as its spec gave it: ``"auto"``, ``"fit"``, a sphere file, or None), and its registered scenes (name ->
    obstacles, at most :data:`MAX_SCENES`)."""

    robot: Robot
    worker: EngineWorker
    collision: str | None
    scenes: dict[str, tuple[Obstacle, ...]] = field(default_factory=dict)


@dataclass
class ServerState:
    """Settings, metrics and the loaded robots; ``ready`` once all are warmed up."""

    settings: Settings
    metrics: Metrics
    device: str
    robots: dict[str, Loaded] = field(default_factory=dict)
    ready: bool = False

    def begin_shutdown(self) -> None:
        """Stop being ready and admitting IK requests; those in flight retire within most of the shutdown grace."""
        self.ready = False
        deadline = time.monotonic() + _GRACE_USED * self.settings.shutdown_grace
        for loaded in self.robots.values():
            loaded.worker.close(deadline)


async def get_state(request: Request) -> ServerState:
    """The app's :class:`ServerState`."""
    return request.app.state.ik


async def get_loaded(name: str, request: Request) -> Loaded:
    """The robot ``name`` of the path, or 404 listing the loaded robots (503 before the server is ready)."""
    state = await get_state(request)
    if not state.ready:
        raise ServiceUnavailable("the server is not ready (starting, or shutting down)")
    loaded = state.robots.get(name)
    if loaded is None:
        raise RobotNotFound(name, state.robots)
    return loaded
