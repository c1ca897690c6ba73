"""The app factory: ``create_app(settings)`` builds the FastAPI app; its lifespan loads and warms up the robots."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial

import torch
from fastapi import FastAPI

from ik_layer.server import routes
from ik_layer.server.added_terms import register_terms
from ik_layer.server.body import document_bodies
from ik_layer.server.errors import install_error_handlers
from ik_layer.server.metrics import Metrics
from ik_layer.server.middleware import BodyLimitMiddleware, MetricsMiddleware
from ik_layer.server.schemas import FKRequest, IKRequest, SceneRequest
from ik_layer.server.served_robots import ServedRobot, load_robots, warm_up
from ik_layer.server.settings import Settings, cuda_missing_reason
from ik_layer.server.state import Loaded, ServerState
from ik_layer.server.trajectory_jobs import TrajectoryLine
from ik_layer.server.trajectory_schemas import TrajectoryRequest
from ik_layer.server.worker import EngineWorker

__all__ = ["create_app"]

_log = logging.getLogger("server")

_DESCRIPTION = """Batched inverse and forward kinematics for the loaded robots.

Units: metres and radians; orientations are quaternions `(x, y, z, w)` as in ROS.
A robot with several end-effector frames (`ee_frames` in `/v1/robots`) takes each target, and
gives each FK pose and gradient, as an object keyed by frame name. With a floating base, a
configuration `q` (nq values) starts with the base pose `[x, y, z, qx, qy, qz, qw]`.
Concurrent IK requests for one robot share its solver engine (continuous batching):
their rows join the running solve between iteration blocks and each request is
answered as soon as its own rows finish. Every request has a time limit; unreachable
targets are not errors: they come back with `success: false`. A trajectory request
solves a clip of frames one after the other, no joint stepping faster than its
velocity limit.
"""


def create_app(settings: Settings | None = None, robots: Mapping[str, ServedRobot] | None = None) -> FastAPI:
    """A FastAPI app serving ``settings`` (default: from the environment); nothing loads until its lifespan runs.

    ``robots``: the robots of ``settings.robots``, already loaded (:func:`~ik_layer.server.run.serve` loads them
    first, so that a bad spec stops it before the server starts); by default the lifespan loads them.
    """
    settings = settings or Settings()
    state = ServerState(settings=settings, metrics=Metrics(), device=str(settings.torch_device()))
    app = FastAPI(
        title="ik-layer",
        version="0.1.0",
        description=_DESCRIPTION,
        lifespan=partial(_lifespan, state=state, loaded=robots),
    )
    app.state.ik = state
    # IK first, the busiest route: FastAPI matches a request against the routes in order
    for module in (
        routes.ik,
        routes.health,
        routes.robots,
        routes.trajectory,
        routes.fk,
        routes.scenes,
        routes.metrics,
    ):
        app.include_router(module.router)
    document_bodies(app, [IKRequest, TrajectoryRequest, FKRequest, SceneRequest])
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes, read_timeout=settings.read_timeout)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI, state: ServerState, loaded: Mapping[str, ServedRobot] | None) -> AsyncIterator[None]:
    """Load the robots, warm up one engine worker each and start it, then report ready; undo it all on the way out.

    Once ready, the objects made so far (torch, the robots' models, the engines: about 340,000 with one robot) are
    frozen out of Python's cyclic garbage collector (:func:`gc.freeze`) until the lifespan ends: a full collection
    walked them all, 0.13-0.14 s during which no request was answered (measured in the server under 64 clients).
    """
    settings = state.settings
    threads_before = torch.get_num_threads()
    if settings.device == "auto" and state.device == "cpu":
        _log.warning("device auto: serving on the CPU: %s", cuda_missing_reason())
    app.state.trajectories = TrajectoryLine(settings.max_trajectories_in_flight, settings.trajectory_queue_limit)
    try:
        if settings.torch_threads:
            torch.set_num_threads(settings.torch_threads)
        register_terms(settings.terms)  # before the engines: each holds the terms registered when it is built
        if not loaded:
            loaded = await asyncio.to_thread(
                load_robots, settings.robots, settings.torch_device(), settings.torch_dtype()
            )
        for name, served in loaded.items():
            worker = EngineWorker(
                name,
                served.robot,
                state.metrics,
                slots=settings.max_slots,
                block=settings.block_iterations,
                max_requests=settings.max_requests_in_flight,
                queue_limit=settings.queue_limit,
                max_work=settings.max_queued_work,
            )
            start = time.perf_counter()
            await asyncio.to_thread(warm_up, worker.engine, settings.solve_options())
            _log.info("%s: warmed up in %.1f s", name, time.perf_counter() - start)
            worker.start()
            state.robots[name] = Loaded(served.robot, worker, served.collision)
        gc.collect()
        gc.freeze()  # what is loaded lives as long as the server: out of the collector's full passes (see above)
        state.ready = True
        _log.info("ik-layer ready on %s (%s): %s", state.device, settings.dtype, ", ".join(state.robots))
        yield
    finally:
        state.ready = False
        gc.unfreeze()
        await asyncio.to_thread(app.state.trajectories.close)
        for running in state.robots.values():
            await running.worker.stop()
        state.robots.clear()
        torch.set_num_threads(threads_before)
