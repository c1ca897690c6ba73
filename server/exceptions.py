"""Every exception of the server: bad input is an :class:`ik_layer.IKLayerError` (a ``ValueError``), overload is not.

:mod:`ik_layer.server.errors` maps them to HTTP answers: :class:`FieldError` (:class:`NoCollisionSpheres` among
them) to 422, :class:`TooManyRows` to 413, :class:`InvalidBody` to 422, :class:`TooMuchWork` to 413,
:class:`UnsupportedMediaType` to 415, :class:`SceneNotFound` to 404, :class:`TooManyScenes` to 409,
:class:`ServiceUnavailable` to 503.
"""

from __future__ import annotations

from typing import Any

from ik_layer import IKLayerError

__all__ = [
    "FieldError",
    "InvalidBody",
    "NoCollisionSpheres",
    "SceneNotFound",
    "ServiceUnavailable",
    "TooManyRows",
    "TooManyScenes",
    "TooMuchWork",
    "UnsupportedMediaType",
]


class FieldError(IKLayerError):
    """A request field is invalid for this robot; ``loc`` names it as FastAPI's validation errors do."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class NoCollisionSpheres(FieldError):
    """Obstacles or self-collision for a robot served without collision spheres (422); the message names the server
    option that gives it some."""

    def __init__(self, loc: tuple[str | int, ...], robot: str) -> None:
        super().__init__(
            loc,
            f"robot {robot!r} has no collision spheres, so it takes no obstacles or self_collision: the server "
            'gives it some from its entry in --robots @robots.json, "collision": a sphere file, or "fit" for the '
            "URDF's collision meshes",
        )


class InvalidBody(IKLayerError):
    """A request body that is not valid JSON for its model (422): the first ``errors`` of ``count``, pydantic's."""

    def __init__(self, errors: list[Any], count: int) -> None:
        first = errors[0]["msg"] if errors else "invalid body"
        super().__init__(f"{count} validation error(s); first: {first}")
        self.errors = errors
        self.count = count


class TooManyRows(IKLayerError):
    """A request holds more targets or configurations than the server takes in one request (413); ``limit``: how many
    it takes."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class TooMuchWork(IKLayerError):
    """A request whose worst-case work (rows x seeds x iterations) could never be queued on this server (413)."""


class SceneNotFound(IKLayerError):
    """No scene of that name is registered for the robot (404)."""


class TooManyScenes(IKLayerError):
    """The robot holds as many scenes as the server keeps; one must go before another comes (409)."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class UnsupportedMediaType(IKLayerError):
    """A request body that is not declared as JSON (415)."""


class ServiceUnavailable(Exception):
    """The request cannot be queued now (line full, starting or shutting down); answered with 503."""
