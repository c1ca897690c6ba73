"""Every exception of the server: bad input is an :class:`ik_layer.IKLayerError` (a ``ValueError``), overload is not.

:mod:`ik_layer.server.errors` maps them to HTTP answers: :class:`FieldError` to 422, :class:`TooManyRows` to 413,
:class:`ServiceUnavailable` to 503.
"""

from __future__ import annotations

from ik_layer import IKLayerError

__all__ = ["FieldError", "ServiceUnavailable", "TooManyRows"]


class FieldError(IKLayerError):
    """A request field is invalid for this robot; ``loc`` names it as FastAPI's validation errors do."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class TooManyRows(IKLayerError):
    """A request holds more targets or configurations than the server takes in one request (413)."""


class ServiceUnavailable(Exception):
    """The request cannot be queued now (line full, starting or shutting down); answered with 503."""
