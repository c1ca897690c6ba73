"""``POST /v1/robots/{name}/fk``: end-effector poses of joint configurations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from starlette.concurrency import run_in_threadpool

from server.schemas import ERROR_RESPONSES, FKRequest, FKResponse
from server.service import fk_poses
from server.state import Loaded, ServerState, get_loaded, get_state

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["kinematics"])


@router.post("/robots/{name}/fk", response_model=FKResponse, responses=ERROR_RESPONSES)
async def forward_kinematics(
    body: FKRequest,
    loaded: Annotated[Loaded, Depends(get_loaded)],
    state: Annotated[ServerState, Depends(get_state)],
) -> FKResponse:
    """``T_base_ee`` of each configuration, as position [m] and quaternion (x, y, z, w)."""
    poses = await run_in_threadpool(fk_poses, loaded.robot, body.q, state.settings)
    return FKResponse(robot=loaded.robot.name, poses=poses)
