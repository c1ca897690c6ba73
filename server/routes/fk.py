"""``POST /v1/robots/{name}/fk``: end-effector poses of joint configurations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from starlette.concurrency import run_in_threadpool

from ik_layer import Robot
from ik_layer.server import encode
from ik_layer.server.decode import fk_configurations
from ik_layer.server.predict import fk_poses
from ik_layer.server.schemas import ERROR_RESPONSES, FKRequest, FKResponse, Pose
from ik_layer.server.settings import Settings
from ik_layer.server.state import Loaded, ServerState, get_loaded, get_state

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["kinematics"])


@router.post("/robots/{name}/fk", response_model=FKResponse, responses=ERROR_RESPONSES)
async def forward_kinematics(
    body: FKRequest,
    loaded: Annotated[Loaded, Depends(get_loaded)],
    state: Annotated[ServerState, Depends(get_state)],
) -> FKResponse:
    """``T_base_ee`` of each configuration, as position [m] and quaternion (x, y, z, w)."""
    poses = await run_in_threadpool(_poses, loaded.robot, body, state.settings)
    return FKResponse(robot=loaded.robot.name, poses=poses)


def _poses(robot: Robot, body: FKRequest, settings: Settings) -> list[Pose]:
    """decode -> FK -> encode, in a worker thread (FK is not micro-batched)."""
    return encode.poses(fk_poses(robot, fk_configurations(robot, body, settings)))
