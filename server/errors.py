"""One place that turns exceptions into JSON answers: :data:`ERROR_STATUS` maps the exception family to statuses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from ik_layer import IKLayerError, RobotNotFound
from ik_layer.server.decode import MAX_REPORTED_ERRORS
from ik_layer.server.exceptions import (
    FieldError,
    InvalidBody,
    SceneNotFound,
    ServiceUnavailable,
    TooManyRows,
    TooManyScenes,
    TooMuchWork,
    UnsupportedMediaType,
)
from ik_layer.server.state import get_state

__all__ = ["ERROR_STATUS", "error_response", "install_error_handlers"]

ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (RobotNotFound, 404),
    (SceneNotFound, 404),
    (TooManyScenes, 409),
    (TooManyRows, 413),
    (TooMuchWork, 413),
    (UnsupportedMediaType, 415),
    (ClientDisconnect, 400),  # the client left mid-body: nobody reads the answer, and it is not our error
    (IKLayerError, 422),
    (ServiceUnavailable, 503),
)
"""Exception class -> HTTP status; the first class ``err`` is an instance of wins."""


def install_error_handlers(app: FastAPI) -> None:
    """Answer FastAPI's validation errors, every exception class of :data:`ERROR_STATUS`, and bugs (500 JSON)."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    for kind in (*(kind for kind, _ in ERROR_STATUS), Exception):
        app.add_exception_handler(kind, _handle)


def error_response(err: Exception, available: Iterable[str], retry_after_s: int) -> JSONResponse:
    """The answer to ``err``, with its status from :data:`ERROR_STATUS` (500 for others).

    Unknown robot: 404 listing the ``available`` ones; any other input error: 422 in FastAPI's format
    (``loc`` from :class:`FieldError`; at most :data:`MAX_REPORTED_ERRORS` of an :class:`InvalidBody`, with
    ``error_count``); 503: ``Retry-After: retry_after_s``; the others: ``{"detail": message}``.
    """
    status = next((status for kind, status in ERROR_STATUS if isinstance(err, kind)), 500)
    if isinstance(err, RobotNotFound):
        return JSONResponse({"detail": f"unknown robot {err.name!r}", "available": sorted(available)}, status)
    if isinstance(err, InvalidBody):
        return _unprocessable([{**e, "loc": ["body", *e["loc"]]} for e in err.errors], err.count)
    if status == 422:
        loc = err.loc if isinstance(err, FieldError) else ("body",)
        return _unprocessable([{"type": "value_error", "loc": list(loc), "msg": str(err)}], 1)
    headers = {"Retry-After": str(retry_after_s)} if status == 503 else None
    limit = {"limit": err.limit} if isinstance(err, (TooManyRows, TooManyScenes)) else {}
    return JSONResponse({"detail": str(err), **limit}, status, headers=headers)


async def _handle(request: Request, err: Exception) -> JSONResponse:
    state = await get_state(request)
    return error_response(err, state.robots, state.settings.retry_after_s)


async def _validation_error(request: Request, err: Exception) -> JSONResponse:
    """FastAPI's own 422 (path and query parameters), in the same capped form, without the input."""
    errors = err.errors() if isinstance(err, RequestValidationError) else []
    brief = [{"type": e["type"], "loc": list(e["loc"]), "msg": e["msg"]} for e in errors[:MAX_REPORTED_ERRORS]]
    return _unprocessable(brief, len(errors))


def _unprocessable(errors: list[dict[str, Any]], count: int) -> JSONResponse:
    """A 422 listing ``errors`` (FastAPI's format) and how many there were in all."""
    return JSONResponse({"detail": jsonable_encoder(errors), "error_count": count}, status_code=422)
