"""``POST /v1/robots/{name}/trajectory``: a clip of T targets solved frame after frame within joint velocity limits."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from ik_layer.server.body import disconnected, openapi_body, read_json
from ik_layer.server.decode import parse
from ik_layer.server.schemas import ERROR_RESPONSES, ErrorResponse
from ik_layer.server.state import Loaded, ServerState, get_loaded, get_state
from ik_layer.server.trajectory_jobs import TrajectoryJob, TrajectoryLine, trajectory_job
from ik_layer.server.trajectory_schemas import TrajectoryRequest, TrajectoryResponse

__all__ = ["CLIENT_GONE", "get_line", "router"]

router = APIRouter(prefix="/v1", tags=["kinematics"])

CLIENT_GONE = 499
"""Status recorded (never received) for a request whose client disconnected before its answer."""

_TOO_MANY = "more frames than the server's max_trajectory_frames (`limit`), or a body over the size limit"
_RESPONSES: dict[int | str, dict[str, object]] = {
    **ERROR_RESPONSES,
    413: {"model": ErrorResponse, "description": _TOO_MANY},
    503: {"model": ErrorResponse, "description": "trajectory line full, starting or stopping; see Retry-After"},
}


async def get_line(request: Request) -> TrajectoryLine:
    """The app's :class:`~ik_layer.server.trajectory_jobs.TrajectoryLine`."""
    return request.app.state.trajectories


@router.post(
    "/robots/{name}/trajectory",
    response_model=TrajectoryResponse,
    responses=_RESPONSES,
    openapi_extra=openapi_body(TrajectoryRequest),
)
async def solve_trajectory(
    request: Request,
    loaded: Annotated[Loaded, Depends(get_loaded)],
    state: Annotated[ServerState, Depends(get_state)],
    line: Annotated[TrajectoryLine, Depends(get_line)],
) -> Response:
    """Joint configurations of a clip of T targets (``targets``, one per frame), solved frame after frame so that
    no joint steps more than ``velocity_limit * dt``, as ``ik_layer.solve_trajectory`` solves it.

    Each frame's answer is the solution nearest its pull point (the previous answer, moved by the ``acceleration``
    and ``posture`` costs); a frame the solver could not reach within its velocity box comes back with ``success:
    false`` and the closest configuration in its box. Each request has a time limit (``timeout``, default the
    server's ``trajectory_timeout``): the frame in progress then stops with its best configuration so far, the
    frames after it hold it, and they answer ``status: "deadline"``. A request whose client disconnects stops.
    """
    arrived = time.monotonic()
    job = await read_json(request, partial(_decode_job, loaded, state))
    solving = asyncio.ensure_future(line.solve(loaded.robot, job, arrived + job.timeout))
    gone = asyncio.ensure_future(disconnected(request))
    try:
        await asyncio.wait({solving, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not solving.done():
            return Response(status_code=CLIENT_GONE)
        body = solving.result()
    finally:
        gone.cancel()
        solving.cancel()  # a clip still solving stops at its next frame
    return Response(body, media_type="application/json")


def _decode_job(loaded: Loaded, state: ServerState, body: bytes) -> TrajectoryJob:
    return trajectory_job(loaded.robot, parse(TrajectoryRequest, body), state.settings)
