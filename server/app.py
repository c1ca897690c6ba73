"""The app factory: ``create_app(settings)`` builds the FastAPI app; its lifespan loads and warms up the robots."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial

import torch
from fastapi import FastAPI

from ik_layer import Robot
from ik_layer.server import encode, routes
from ik_layer.server.batch import MicroBatcher
from ik_layer.server.decode import IKJob
from ik_layer.server.errors import install_error_handlers
from ik_layer.server.loading import load_robots, warm_up
from ik_layer.server.metrics import Metrics
from ik_layer.server.middleware import BodyLimitMiddleware, MetricsMiddleware
from ik_layer.server.predict import predict
from ik_layer.server.schemas import IKSolution
from ik_layer.server.settings import Settings
from ik_layer.server.state import Loaded, ServerState
from ik_layer.server.unbatch import unbatch

__all__ = ["create_app", "solve_batch"]

_log = logging.getLogger("server")

_DESCRIPTION = """Batched inverse and forward kinematics for the loaded robots.

Units: metres and radians; orientations are quaternions `(x, y, z, w)` as in ROS.
Concurrent IK requests for one robot with equal solver options are coalesced
into one batched solve (micro-batching). Unreachable targets are not errors:
they come back with `success: false`.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    """A FastAPI app serving ``settings`` (default: from the environment); nothing loads until its lifespan runs."""
    settings = settings or Settings()
    state = ServerState(settings=settings, metrics=Metrics(), device=str(settings.torch_device()))
    app = FastAPI(title="ik-layer", version="0.1.0", description=_DESCRIPTION, lifespan=partial(_lifespan, state=state))
    app.state.ik = state
    for module in (routes.health, routes.robots, routes.ik, routes.fk, routes.metrics):
        app.include_router(module.router)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI, state: ServerState) -> AsyncIterator[None]:
    """Load the robots, start one micro-batcher each, warm up, then report ready; undo it all on the way out."""
    settings = state.settings
    threads_before = torch.get_num_threads()
    try:
        if settings.torch_threads:
            torch.set_num_threads(settings.torch_threads)
        robots = await asyncio.to_thread(load_robots, settings.robots, settings.torch_device(), settings.torch_dtype())
        for name, robot in robots.items():
            batcher = MicroBatcher(
                name,
                partial(solve_batch, robot),
                state.metrics,
                max_batch=settings.max_batch,
                max_wait=settings.max_wait_ms / 1000,
                queue_limit=settings.queue_limit,
            )
            state.robots[name] = Loaded(robot, batcher)
        for loaded in state.robots.values():
            await asyncio.to_thread(warm_up, loaded.robot, settings.solve_options())
            loaded.batcher.start()
        state.ready = True
        _log.info("ik-layer ready on %s (%s): %s", state.device, settings.dtype, ", ".join(state.robots))
        yield
    finally:
        state.ready = False
        for loaded in state.robots.values():
            await loaded.batcher.stop()
        state.robots.clear()
        torch.set_num_threads(threads_before)


def solve_batch(robot: Robot, jobs: Sequence[IKJob]) -> list[list[IKSolution]]:
    """What a robot's micro-batcher runs in its solver thread: predict -> unbatch -> encode, one list per job."""
    return [encode.solutions(part) for part in unbatch(predict(robot, jobs), jobs)]
