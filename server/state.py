"""What the app holds while it runs (on ``app.state.ik``), and the tiny accessors the routes depend on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fastapi import Request

from ik_layer import Robot, RobotNotFound
from ik_layer.server.batch import MicroBatcher
from ik_layer.server.decode import IKJob
from ik_layer.server.exceptions import ServiceUnavailable
from ik_layer.server.metrics import Metrics
from ik_layer.server.schemas import IKSolution
from ik_layer.server.settings import Settings

__all__ = ["Loaded", "ServerState", "get_loaded", "get_state"]

IKBatcher = MicroBatcher[IKJob, Sequence[IKSolution]]


@dataclass(frozen=True)
class Loaded:
    """A robot ready to serve: the model and its micro-batcher."""

    robot: Robot
    batcher: IKBatcher


@dataclass
class ServerState:
    """Settings, metrics and the loaded robots; ``ready`` once all are warmed up."""

    settings: Settings
    metrics: Metrics
    device: str
    robots: dict[str, Loaded] = field(default_factory=dict)
    ready: bool = False


def get_state(request: Request) -> ServerState:
    """The app's :class:`ServerState`."""
    return request.app.state.ik


def get_loaded(name: str, request: Request) -> Loaded:
    """The robot ``name`` of the path, or 404 listing the loaded robots (503 before the server is ready)."""
    state = get_state(request)
    if not state.ready:
        raise ServiceUnavailable("the server is starting; robots are not loaded yet")
    loaded = state.robots.get(name)
    if loaded is None:
        raise RobotNotFound(name, state.robots)
    return loaded
