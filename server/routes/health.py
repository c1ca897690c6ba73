"""``GET /health``: readiness, 503 until every robot is loaded and warmed up."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from ik_layer.server.schemas import HealthResponse
from ik_layer.server.state import ServerState, get_state

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
async def health(state: Annotated[ServerState, Depends(get_state)]) -> JSONResponse:
    """``ok`` with the device and robots once ready; 503 ``unavailable`` while starting or stopping."""
    body = HealthResponse(
        status="ok" if state.ready else "unavailable",
        device=state.device,
        dtype=state.settings.dtype,
        robots=sorted(state.robots) if state.ready else [],
    )
    return JSONResponse(body.model_dump(), status_code=200 if state.ready else 503)
