"""One place that turns exceptions into JSON answers: ik-layer's family to 4xx, overload to 503."""

from __future__ import annotations

import math

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ik_layer import IKLayerError, RobotNotFound
from server.batcher import ServiceUnavailable
from server.service import FieldError, TooManyRows
from server.state import get_state

__all__ = ["install_error_handlers"]


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers of validation errors, :class:`IKLayerError`, :class:`TooManyRows` and
    :class:`ServiceUnavailable`."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(IKLayerError, _ik_layer_error)
    app.add_exception_handler(TooManyRows, _too_many_rows)
    app.add_exception_handler(ServiceUnavailable, _unavailable)


async def _ik_layer_error(request: Request, err: Exception) -> JSONResponse:
    """Unknown robot: 404 listing the loaded ones; any other input error: 422 in FastAPI's format."""
    if isinstance(err, RobotNotFound):
        return JSONResponse(
            {"detail": f"unknown robot {err.name!r}", "available": sorted(get_state(request).robots)}, status_code=404
        )
    loc = err.loc if isinstance(err, FieldError) else ("body",)
    detail = [{"type": "value_error", "loc": list(loc), "msg": str(err)}]
    return JSONResponse({"detail": detail}, status_code=422)


async def _too_many_rows(request: Request, err: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(err)}, status_code=413)


async def _unavailable(request: Request, err: Exception) -> JSONResponse:
    retry = str(get_state(request).settings.retry_after_s)
    return JSONResponse({"detail": str(err)}, status_code=503, headers={"Retry-After": retry})


async def _validation_error(request: Request, err: Exception) -> JSONResponse:
    """FastAPI's 422, with NaN and infinite inputs echoed as strings (JSON has no such numbers)."""
    errors = err.errors() if isinstance(err, RequestValidationError) else []
    return JSONResponse({"detail": _json_safe(jsonable_encoder(errors))}, status_code=422)


def _json_safe(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value
