"""``POST /v1/robots/{name}/ik``: batched inverse kinematics, micro-batched across concurrent requests."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from ik_layer.server.decode import ik_job
from ik_layer.server.schemas import ERROR_RESPONSES, IKRequest, IKResponse
from ik_layer.server.state import Loaded, ServerState, get_loaded, get_state

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["kinematics"])


@router.post(
    "/robots/{name}/ik", response_model=IKResponse, response_model_exclude_none=True, responses=ERROR_RESPONSES
)
async def solve_ik(
    body: IKRequest,
    loaded: Annotated[Loaded, Depends(get_loaded)],
    state: Annotated[ServerState, Depends(get_state)],
) -> IKResponse:
    """Joint configurations reaching each target; unreachable targets come back with ``success: false``."""
    job = ik_job(loaded.robot, body, state.settings)
    solutions = await loaded.batcher.submit(job, job.rows, job.options)
    return IKResponse(robot=loaded.robot.name, solutions=list(solutions))
