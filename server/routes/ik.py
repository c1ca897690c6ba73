"""``POST /v1/robots/{name}/ik``: inverse kinematics on the robot's engine, shared by concurrent requests."""

from __future__ import annotations

import asyncio
import time
from functools import partial

from fastapi import APIRouter, Request, Response

from ik_layer.server.body import disconnected, openapi_body, read_json
from ik_layer.server.decode import IKJob, ik_job, parse
from ik_layer.server.direct_route import DirectRoute
from ik_layer.server.schemas import ERROR_RESPONSES, IKRequest, IKResponse
from ik_layer.server.state import Loaded, ServerState, get_loaded, get_state
from ik_layer.server.worker import EngineWorker, Ticket

__all__ = ["CLIENT_GONE", "router"]

router = APIRouter(prefix="/v1", tags=["kinematics"], route_class=DirectRoute)

CLIENT_GONE = 499
"""Status recorded (never received) for a request whose client disconnected before its answer."""


@router.post(
    "/robots/{name}/ik",
    response_model=IKResponse,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
    openapi_extra=openapi_body(IKRequest),
)
async def solve_ik(request: Request, name: str) -> Response:
    """Joint configurations reaching each target; unreachable targets come back with ``success: false``.

    Each request has a time limit (``timeout``, default the server's); rows unfinished at it come back with
    their best configuration so far and ``status: "deadline"``. A request whose client disconnects stops.
    """
    arrived = time.monotonic()
    loaded, state = await get_loaded(name, request), await get_state(request)
    decode = partial(_decode_job, loaded, state)
    job = await read_json(request, decode)
    ticket = loaded.worker.submit(job, deadline=arrived + job.timeout)
    body = await _answer_unless_gone(ticket, request, loaded.worker)
    if body is None:
        return Response(status_code=CLIENT_GONE)
    return Response(body, media_type="application/json")


def _decode_job(loaded: Loaded, state: ServerState, body: bytes) -> IKJob:
    return ik_job(loaded.robot, parse(IKRequest, body), state.settings, loaded.scenes)


async def _answer_unless_gone(ticket: Ticket, request: Request, worker: EngineWorker) -> bytes | None:
    """The ticket's answer, or None (its work cancelled) if the client disconnects or the route is cancelled first."""
    if ticket.future.done():  # solved on the event loop by submit: nothing to wait for
        return ticket.future.result()
    gone = asyncio.ensure_future(disconnected(request))
    gone.add_done_callback(lambda _: ticket.future.cancel())  # the client left: stop waiting (a no-op once answered)
    try:
        return await ticket.future
    except asyncio.CancelledError:
        if not gone.done() or gone.cancelled():  # the route itself was cancelled
            raise
        return None
    finally:
        gone.cancel()
        if not ticket.future.done() or ticket.future.cancelled():  # unanswered: its work stops
            worker.cancel(ticket)
            ticket.future.cancel()
