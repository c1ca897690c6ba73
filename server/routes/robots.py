"""``GET /v1/robots``: the loaded robots and their joints."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from ik_layer.server.encode import robot_info
from ik_layer.server.exceptions import ServiceUnavailable
from ik_layer.server.schemas import ErrorResponse, RobotsResponse
from ik_layer.server.state import ServerState, get_state

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["robots"])


@router.get("/robots", response_model=RobotsResponse, responses={503: {"model": ErrorResponse}})
async def list_robots(state: Annotated[ServerState, Depends(get_state)]) -> RobotsResponse:
    """Each robot's name, nq and dof, joint names and limits [rad or m], end-effector frames, floating base, locked
    joints and collision spheres (their source and count). A configuration q holds nq values: the base pose first
    with a floating base, then the joints."""
    if not state.ready:
        raise ServiceUnavailable("the server is not ready (starting, or shutting down)")
    robots = [robot_info(loaded.robot, loaded.collision) for loaded in state.robots.values()]
    return RobotsResponse(robots=robots)
