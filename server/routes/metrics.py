"""``GET /metrics``: Prometheus text format."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from ik_layer.server.metrics import CONTENT_TYPE_LATEST
from ik_layer.server.state import ServerState, get_state

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/metrics", response_class=Response)
async def metrics(state: Annotated[ServerState, Depends(get_state)]) -> Response:
    """Requests, errors, batch sizes, queue depth and solve latency."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
