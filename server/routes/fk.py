"""``POST /v1/robots/{name}/fk``: end-effector poses of joint configurations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from ik_layer.server import encode
from ik_layer.server.body import openapi_body, read_json
from ik_layer.server.decode import fk_configurations, frame_keys, parse
from ik_layer.server.predict import fk_poses
from ik_layer.server.schemas import ERROR_RESPONSES, FKRequest, FKResponse
from ik_layer.server.state import Loaded, ServerState, get_loaded, get_state

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["kinematics"])


@router.post(
    "/robots/{name}/fk", response_model=FKResponse, responses=ERROR_RESPONSES, openapi_extra=openapi_body(FKRequest)
)
async def forward_kinematics(
    request: Request,
    loaded: Annotated[Loaded, Depends(get_loaded)],
    state: Annotated[ServerState, Depends(get_state)],
) -> FKResponse:
    """``T_base_ee`` of each configuration, as position [m] and quaternion (x, y, z, w); with several
    end-effector frames, an object mapping each frame name to its pose."""
    q = await read_json(request, lambda raw: fk_configurations(loaded.robot, parse(FKRequest, raw), state.settings))
    poses = await run_in_threadpool(fk_poses, loaded.robot, q)
    return FKResponse(robot=loaded.robot.name, poses=encode.poses(poses, frame_keys(loaded.robot)))
