"""The HTTP API in process (httpx ASGI transport): answers checked by FK and Pinocchio, batching, overload, errors."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from fastapi import FastAPI

import ik_layer
from ik_layer.engine import lone_budget
from ik_layer.model.lie import matrix_to_pose, pose_to_matrix
from ik_layer.server import Settings, create_app
from ik_layer.server.decode import ik_job, parse, prepare
from ik_layer.server.schemas import IKRequest
from ik_layer.server.worker import HERE_SECONDS
from ik_layer.testing import random_bases
from tests import conftest

pytestmark = pytest.mark.anyio

FAST = {"robots": ["planar3", "ur5e"]}  # the default budget: every test target succeeds


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def serving(**overrides: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app with ``FAST`` settings plus ``overrides``, its lifespan running, and a client on it."""
    async with conftest.serving(Settings(**{**FAST, **overrides}), timeout=30) as pair:
        yield pair


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with serving(max_targets=8, max_body_bytes=64 * 1024) as pair:
        yield pair


@pytest.fixture
def client(api: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return api[1]


def make_rng(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def robot_of(app: FastAPI, name: str) -> ik_layer.Robot:
    return app.state.ik.robots[name].robot


def reachable(robot: ik_layer.Robot, n: int, seed: int = 7) -> tuple[torch.Tensor, list[dict[str, list[float]]]]:
    """``n`` random configurations and the JSON targets of their end-effector poses."""
    q = robot.random_q((n,), generator=make_rng(seed))
    poses = matrix_to_pose(robot.fk(q)).tolist()
    return q, [{"position": p[:3], "orientation": p[3:]} for p in poses]


def sample(app: FastAPI, name: str, labels: dict[str, str]) -> float:
    return app.state.ik.metrics.registry.get_sample_value(name, labels) or 0.0


def pose_tensor(targets: list[dict[str, list[float]]]) -> torch.Tensor:
    return torch.tensor([t["position"] + t["orientation"] for t in targets], dtype=torch.float64)


# --------------------------------------------------------------------------- readiness and discovery


async def test_health_is_503_until_the_lifespan_has_run() -> None:
    app = create_app(Settings(**FAST))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ik.test") as client:
        health = await client.get("/health")
        ik = await client.post(
            "/v1/robots/planar3/ik", json={"targets": [{"position": [1, 0, 0], "orientation": [0, 0, 0, 1]}]}
        )
    assert health.status_code == 503 and health.json()["status"] == "unavailable"
    assert ik.status_code == 503 and "Retry-After" in ik.headers


async def test_what_the_lifespan_loaded_is_out_of_full_collections_while_it_serves() -> None:
    """A full pass of the cyclic collector over torch, the models and the engines paused every request for about
    0.13 s: once ready, the server freezes them (gc.freeze) until its lifespan ends."""
    gc.unfreeze()
    async with serving(robots=["planar3"]) as (app, client):
        assert (await client.get("/health")).status_code == 200
        worker = app.state.ik.robots["planar3"].worker
        assert gc.get_freeze_count() > 100_000  # torch's and the server's modules among them
        assert not any(obj is worker for obj in gc.get_objects(generation=2))  # frozen: in no generation
        cycle = argparse.Namespace()
        cycle.itself = cycle  # a cycle made while serving is collected as before
        alive = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert alive() is None
    assert gc.get_freeze_count() == 0
    assert any(obj is worker for obj in gc.get_objects(generation=2))


async def test_health_reports_device_and_robots(client: httpx.AsyncClient) -> None:
    response = await client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "device": "cpu", "dtype": "float64", "robots": ["planar3", "ur5e"]}


async def test_robots_lists_joints_and_limits(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    robots = {r["name"]: r for r in (await client.get("/v1/robots")).json()["robots"]}
    ur5e = robot_of(app, "ur5e")
    assert set(robots) == {"planar3", "ur5e"}
    assert robots["ur5e"]["dof"] == 6 and robots["ur5e"]["joint_names"] == ur5e.joint_names
    assert robots["ur5e"]["lower"] == ur5e.lower.tolist() and robots["ur5e"]["upper"] == ur5e.upper.tolist()
    assert robots["ur5e"]["ee_frame"] == "tool0" and robots["ur5e"]["ee_frames"] == ["tool0"]
    assert (robots["ur5e"]["nq"], robots["ur5e"]["floating_base"]) == (6, False)


async def test_docs_and_openapi_show_schemas_with_examples(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 200
    spec = (await client.get("/openapi.json")).json()
    assert {"/health", "/v1/robots", "/v1/robots/{name}/ik", "/v1/robots/{name}/fk", "/metrics"} <= set(spec["paths"])
    assert spec["components"]["schemas"]["IKRequest"]["examples"]
    assert spec["components"]["schemas"]["Pose"]["examples"]
    ik_request = spec["components"]["schemas"]["IKRequest"]
    assert {"targets", "warm_start", "weights"} <= set(ik_request["properties"])
    assert "frame name -> its pose" in json.dumps(ik_request["properties"]["targets"])
    assert "several ee_frames" in spec["components"]["schemas"]["IKSolution"]["properties"]["gradient"]["description"]
    for example in ik_request["examples"]:  # every documented request is a valid one
        parse(IKRequest, json.dumps(example).encode())


# --------------------------------------------------------------------------- answers


async def test_ik_solutions_reach_their_targets(
    api: tuple[FastAPI, httpx.AsyncClient], pin_reference: Callable
) -> None:
    app, client = api
    robot = robot_of(app, "ur5e")
    _, targets = reachable(robot, 5)
    response = await client.post("/v1/robots/ur5e/ik", json={"targets": targets})
    assert response.status_code == 200
    body = response.json()
    assert body["robot"] == "ur5e" and len(body["solutions"]) == 5
    assert all("gradient" not in s for s in body["solutions"])
    q = torch.tensor([s["q"] for s in body["solutions"]], dtype=torch.float64)
    assert all(s["success"] for s in body["solutions"])
    assert bool(((q >= robot.lower - 1e-9) & (q <= robot.upper + 1e-9)).all())
    reached = robot.fk(q)
    wanted = pose_to_matrix(pose_tensor(targets))
    torch.testing.assert_close(reached[:, :3, 3], wanted[:, :3, 3], atol=2e-4, rtol=0)
    torch.testing.assert_close(reached[:, :3, :3], wanted[:, :3, :3], atol=2e-3, rtol=0)
    pin_pose, _ = pin_reference(robot, q)
    np.testing.assert_allclose(pin_pose, reached.numpy(), atol=1e-9)
    for s in body["solutions"]:
        assert s["position_error"] <= 1e-4 and s["orientation_error"] <= 1e-3 and s["iterations"] <= 200


async def test_ik_takes_the_secondary_terms_and_refuses_manipulability_where_it_does_not_apply(
    api: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """``centring`` and ``manipulability`` are request fields like every option; the solutions reach their targets,
    and manipulability on a 3-joint arm is a 422 naming it."""
    app, client = api
    robot = robot_of(app, "ur5e")
    _, targets = reachable(robot, 4)
    body = {"targets": targets, "manipulability": 0.5, "centring": 1.0}
    solutions = (await client.post("/v1/robots/ur5e/ik", json=body)).json()["solutions"]
    q = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
    assert all(s["success"] for s in solutions), [{k: v for k, v in s.items() if k != "q"} for s in solutions]
    torch.testing.assert_close(robot.fk(q)[:, :3, 3], pose_to_matrix(pose_tensor(targets))[:, :3, 3], atol=2e-4, rtol=0)
    _, planar = reachable(robot_of(app, "planar3"), 1)
    response = await client.post("/v1/robots/planar3/ik", json={"targets": planar, "manipulability": 0.5})
    assert response.status_code == 422 and "manipulability" in response.text


async def test_ik_warm_start_at_the_answer_needs_no_iterations(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    q, targets = reachable(robot_of(app, "planar3"), 3)
    body = {"targets": targets, "warm_start": q.tolist(), "position_tolerance": 1e-3, "orientation_tolerance": 1e-2}
    solutions = (await client.post("/v1/robots/planar3/ik", json=body)).json()["solutions"]
    assert [s["iterations"] for s in solutions] == [0, 0, 0]
    torch.testing.assert_close(torch.tensor([s["q"] for s in solutions], dtype=torch.float64), q)


async def test_unreachable_target_is_a_failed_solution_not_an_error(client: httpx.AsyncClient) -> None:
    body = {"targets": [{"position": [5.0, 0.0, 0.0], "orientation": [0, 0, 0, 1]}], "max_iterations": 8}
    response = await client.post("/v1/robots/planar3/ik", json=body)
    assert response.status_code == 200
    solution = response.json()["solutions"][0]
    assert solution["success"] is False and solution["position_error"] > 3.0


async def test_gradient_is_the_library_target_gradient(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    robot = robot_of(app, "ur5e")
    _, targets = reachable(robot, 2, seed=11)
    body = {"targets": targets, "return_gradient": True}
    solutions = (await client.post("/v1/robots/ur5e/ik", json=body)).json()["solutions"]
    q = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
    gradient = torch.tensor([s["gradient"] for s in solutions], dtype=torch.float64)
    assert gradient.shape == (2, robot.dof, 6)
    torch.testing.assert_close(gradient, ik_layer.target_gradient(robot, q), rtol=1e-9, atol=1e-12)


async def test_fk_matches_pinocchio(api: tuple[FastAPI, httpx.AsyncClient], pin_reference: Callable) -> None:
    app, client = api
    robot = robot_of(app, "ur5e")
    q = robot.random_q((4,), generator=make_rng(3))
    poses = (await client.post("/v1/robots/ur5e/fk", json={"q": q.tolist()})).json()["poses"]
    got = pose_to_matrix(pose_tensor(poses)).numpy()
    want, _ = pin_reference(robot, q)
    np.testing.assert_allclose(got, want, atol=1e-9)


# --------------------------------------------------------------------------- continuous batching and limits

UNREACHABLE = {"position": [5.0, 0.0, 0.0], "orientation": [0.0, 0.0, 0.0, 1.0]}


def hostile(app: FastAPI, name: str, n: int, timeout: float) -> dict[str, Any]:
    """``n`` targets within reach, tilted 0.5 rad about their x axis (out of a planar arm's plane: its errors never
    reach 0), with tolerances no answer meets and the largest budgets: only the deadline stops them (targets beyond
    the robot's reach would be given up at once)."""
    robot = robot_of(app, name)
    c, s = np.cos(0.5), np.sin(0.5)
    tilt = torch.tensor([[1.0, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1]])
    poses = matrix_to_pose(robot.fk(robot.random_q((n,), generator=make_rng(n))) @ tilt.to(robot.dtype)).tolist()
    targets = [{"position": p[:3], "orientation": p[3:]} for p in poses]
    never_within = {"position_tolerance": 1e-300, "orientation_tolerance": 1e-300}
    return {"targets": targets, "num_seeds": 64, "max_iterations": 10_000, "timeout": timeout, **never_within}


def slow_steps(app: FastAPI, name: str, seconds: float) -> None:
    """Make every engine step of robot ``name`` take ``seconds`` more, as on a slow machine: work outlives deadlines."""
    engine = app.state.ik.robots[name].worker.engine
    step = engine.step

    def slow_step() -> None:
        time.sleep(seconds)
        step()

    engine.step = slow_step


async def test_concurrent_requests_share_the_engine_and_get_their_own_rows() -> None:
    async with serving(robots=["planar3"]) as (app, client):
        robot = robot_of(app, "planar3")
        requests = [reachable(robot, n, seed=n)[1] for n in (1, 2, 3)]
        options = [{}, {"max_iterations": 40}, {"num_seeds": 2}]  # different options share the engine
        responses = await asyncio.gather(
            *(
                client.post("/v1/robots/planar3/ik", json={"targets": t, **o})
                for t, o in zip(requests, options, strict=True)
            )
        )
        assert sample(app, "ik_layer_rows_admitted_total", {"robot": "planar3"}) == 6
        assert sample(app, "ik_layer_rows_retired_total", {"robot": "planar3", "status": "solved"}) == 6
        assert sample(app, "ik_layer_rows_in_flight", {"robot": "planar3"}) == 0
        for targets, response in zip(requests, responses, strict=True):
            solutions = response.json()["solutions"]
            assert len(solutions) == len(targets) and {s["status"] for s in solutions} == {"solved"}
            q = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
            torch.testing.assert_close(
                robot.fk(q)[:, :3, 3], pose_to_matrix(pose_tensor(targets))[:, :3, 3], atol=2e-4, rtol=0
            )


async def test_a_short_request_is_answered_while_a_long_one_runs() -> None:
    async with serving(robots=["planar3"]) as (app, client):
        slow_steps(app, "planar3", 0.1)
        _, targets = reachable(robot_of(app, "planar3"), 1)
        long = asyncio.create_task(client.post("/v1/robots/planar3/ik", json=hostile(app, "planar3", 64, timeout=5.0)))
        await asyncio.sleep(0.2)
        short = await client.post("/v1/robots/planar3/ik", json={"targets": targets})
        assert short.status_code == 200 and short.json()["solutions"][0]["success"] is True
        assert not long.done()
        solutions = (await long).json()["solutions"]
        assert "deadline" in {s["status"] for s in solutions}  # (a few rows may reach an error of exactly 0)


async def test_two_robots_do_not_block_each_other() -> None:
    async with serving() as (app, client):
        slow_steps(app, "planar3", 0.2)
        long = asyncio.create_task(client.post("/v1/robots/planar3/ik", json=hostile(app, "planar3", 8, timeout=5.0)))
        await asyncio.sleep(0.2)
        _, targets = reachable(robot_of(app, "ur5e"), 1)
        response = await client.post("/v1/robots/ur5e/ik", json={"targets": targets})
        assert response.status_code == 200 and response.json()["solutions"][0]["success"] is True
        assert not long.done()
        assert (await long).status_code == 200


async def test_the_deadline_answers_a_maximal_request_in_time_with_the_best_found() -> None:
    async with serving(robots=["ur5e"], max_targets=1024) as (app, client):
        slow_steps(app, "ur5e", 0.05)
        body = hostile(app, "ur5e", 1024, timeout=0.5)
        started = asyncio.get_running_loop().time()
        response = await client.post("/v1/robots/ur5e/ik", json=body)
        elapsed = asyncio.get_running_loop().time() - started
        assert response.status_code == 200 and 0.5 <= elapsed < 5.0  # generous: the machine is shared
        solutions = response.json()["solutions"]
        assert {s["status"] for s in solutions} == {"deadline"} and not any(s["success"] for s in solutions)
        robot = robot_of(app, "ur5e")
        q = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
        assert bool(((q >= robot.lower - 1e-9) & (q <= robot.upper + 1e-9)).all())
        errors = torch.tensor([s["position_error"] for s in solutions], dtype=torch.float64)
        wanted = pose_to_matrix(pose_tensor(body["targets"]))[:, :3, 3]
        torch.testing.assert_close(errors, (robot.fk(q)[:, :3, 3] - wanted).norm(dim=-1))  # those of the answered q
        assert sample(app, "ik_layer_rows_retired_total", {"robot": "ur5e", "status": "deadline"}) == 1024


async def test_rows_past_the_deadline_before_starting_never_run(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    q, targets = reachable(robot_of(app, "planar3"), 3)
    body = {"targets": targets, "warm_start": (q + 0.1).tolist(), "timeout": 1e-9}
    solutions = (await client.post("/v1/robots/planar3/ik", json=body)).json()["solutions"]
    assert [(s["status"], s["success"], s["iterations"]) for s in solutions] == [("deadline", False, 0)] * 3
    torch.testing.assert_close(torch.tensor([s["q"] for s in solutions], dtype=torch.float64), q + 0.1)


async def test_a_request_that_could_never_fit_is_413_and_a_full_line_is_503() -> None:
    async with serving(robots=["planar3"], max_queued_work=10**6, retry_after_s=3) as (app, client):
        slow_steps(app, "planar3", 0.2)  # the first is still in line when the others come
        too_big = await client.post("/v1/robots/planar3/ik", json=hostile(app, "planar3", 2, timeout=1.0))
        assert too_big.status_code == 413 and "row-iterations" in too_big.json()["detail"]
        body = {"targets": [UNREACHABLE] * 8, "num_seeds": 64, "max_iterations": 1000, "timeout": 1.0}  # 512k
        responses = await asyncio.gather(*(client.post("/v1/robots/planar3/ik", json=body) for _ in range(3)))
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 503, 503]
        refused = next(r for r in responses if r.status_code == 503)
        assert refused.headers["Retry-After"] == "3" and "retry later" in refused.json()["detail"]
        assert sample(app, "ik_layer_rejected_total", {"robot": "planar3"}) == 2
        _, targets = reachable(robot_of(app, "planar3"), 1)
        assert (await client.post("/v1/robots/planar3/ik", json={"targets": targets})).status_code == 200


async def test_a_client_that_leaves_cancels_its_rows_and_others_are_served() -> None:
    async with serving(robots=["planar3"]) as (app, client):
        slow_steps(app, "planar3", 0.1)
        _, targets = reachable(robot_of(app, "planar3"), 1)
        leaving = asyncio.create_task(
            client.post("/v1/robots/planar3/ik", json=hostile(app, "planar3", 16, timeout=10.0))
        )
        await asyncio.sleep(0.3)
        leaving.cancel()
        started = asyncio.get_running_loop().time()
        response = await client.post("/v1/robots/planar3/ik", json={"targets": targets})
        assert response.status_code == 200 and asyncio.get_running_loop().time() - started < 5.0
        for _ in range(200):  # the cancelled rows retire at the next block
            if sample(app, "ik_layer_rows_retired_total", {"robot": "planar3", "status": "cancelled"}) == 16:
                break
            await asyncio.sleep(0.05)
        assert sample(app, "ik_layer_rows_retired_total", {"robot": "planar3", "status": "cancelled"}) == 16
        assert sample(app, "ik_layer_rows_in_flight", {"robot": "planar3"}) == 0


async def test_a_failing_engine_answers_500_once_and_the_robot_keeps_serving() -> None:
    async with serving(robots=["planar3"]) as (app, client):
        worker = app.state.ik.robots["planar3"].worker
        broken = worker.engine

        def fail(*_: object) -> None:
            raise RuntimeError("a bug in a step")

        broken._launch.launch = fail  # every solve launches, alone or stepped, here or in the worker thread
        _, targets = reachable(robot_of(app, "planar3"), 2)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # uvicorn only logs the traceback
        async with httpx.AsyncClient(transport=transport, base_url="http://ik.test") as plain:
            response = await plain.post("/v1/robots/planar3/ik", json={"targets": targets})
        assert response.status_code == 500 and response.json() == {"detail": "a bug in a step"}
        assert worker.engine is not broken
        assert not worker._tickets  # out of line before it was answered: the next request finds the worker idle
        again = await client.post("/v1/robots/planar3/ik", json={"targets": targets})
        assert again.status_code == 200 and all(s["success"] for s in again.json()["solutions"])
        assert sample(app, "ik_layer_rows_in_flight", {"robot": "planar3"}) == 0


async def test_a_lone_request_is_solved_at_once_as_its_stepped_parts_would_be() -> None:
    """With nothing else in flight the worker solves a small request in one call (no part handed over); its answers
    are those of the same rows handed over as a part and stepped, with the same random stream."""
    async with serving(robots=["ur5e"]) as (app, client):
        worker = app.state.ik.robots["ur5e"].worker
        parts = []
        handing_over = worker.stages.submit
        worker.stages.submit = lambda *args: parts.append(1) or handing_over(*args)
        robot = robot_of(app, "ur5e")
        _, targets = reachable(robot, 24, seed=31)
        response = await client.post("/v1/robots/ur5e/ik", json={"targets": targets, "num_seeds": 2})
        assert response.status_code == 200 and not parts
        alone = torch.tensor([s["q"] for s in response.json()["solutions"]], dtype=torch.float64)
        job = ik_job(robot, parse(IKRequest, json.dumps({"targets": targets, "num_seeds": 2}).encode()), Settings())
        [problem] = prepare(robot, [job])
        engine = ik_layer.Engine(robot, capacity=256, block=worker.engine.block)
        part = engine.submit(problem, seed=1, deadline=time.monotonic() + 10)  # the stages' first stream
        while not part.done.is_set():
            engine.step()
        assert torch.equal(alone, part.result().q)


async def test_a_small_request_to_an_idle_worker_is_solved_on_the_event_loop_and_a_busy_one_queues() -> None:
    """Once the engine's launches are timed, a request whose whole budget fits ``HERE_SECONDS`` and finds nothing in
    flight is solved by ``submit`` on the event loop (no hand-over to the worker thread); a larger one, or one that
    arrives while another runs, goes to the worker thread. Every answer reaches its target."""
    async with serving(robots=["ur5e"]) as (app, client):
        worker = app.state.ik.robots["ur5e"].worker
        robot = robot_of(app, "ur5e")
        budget = {"max_iterations": 80}  # 120 iterations alone (2 seeds): well under HERE_SECONDS for one target
        await client.post("/v1/robots/ur5e/ik", json={"targets": reachable(robot, 1)[1], **budget})
        assert worker.engine.seconds_per_iteration is not None  # timed by the request's deadline-paced launch
        # that timing, set to ur5e's usual one (about 1 us an iteration): on a loaded machine one preempted launch
        # times at 100x, and a lone request then goes, rightly, to the worker thread
        worker.engine._launch.seconds_per_iteration = 1e-6
        where: list[tuple[str, bool]] = []
        solving, handing_over = worker.stages.solve, worker.stages.submit
        worker.stages.solve = lambda *a: where.append(("solve", on_loop())) or solving(*a)
        worker.stages.submit = lambda *a: where.append(("part", on_loop())) or handing_over(*a)

        def on_loop() -> bool:
            return threading.current_thread() is threading.main_thread()

        async def solved(targets: list[dict[str, list[float]]]) -> None:
            response = await client.post("/v1/robots/ur5e/ik", json={"targets": targets, **budget})
            solutions = response.json()["solutions"]
            assert all(s["success"] for s in solutions)
            q = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
            wanted = pose_to_matrix(pose_tensor(targets))
            torch.testing.assert_close(robot.fk(q)[:, :3, 3], wanted[:, :3, 3], atol=2e-4, rtol=0)

        await solved(reachable(robot, 1, seed=3)[1])
        assert where == [("solve", True)]
        per_row = lone_budget(ik_layer.SolveOptions(**budget)) * worker.engine.seconds_per_iteration
        await solved(reachable(robot, 1 + int(HERE_SECONDS / per_row), seed=4)[1])
        assert where[1:] and not any(here for _, here in where[1:])  # in the worker thread (alone, or in parts)
        done = len(where)
        busy = asyncio.create_task(client.post("/v1/robots/ur5e/ik", json=hostile(app, "ur5e", 16, timeout=1.0)))
        while not worker.engine.busy:
            await asyncio.sleep(0.01)
        await solved(reachable(robot, 1, seed=5)[1])
        assert ("part", False) in where[done:] and not any(here for _, here in where[done:])
        assert (await busy).status_code == 200


async def test_failed_rows_get_zero_gradients_as_in_the_library(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    _, targets = reachable(robot_of(app, "planar3"), 1)
    body = {"targets": [*targets, UNREACHABLE], "return_gradient": True, "max_iterations": 20}
    solutions = (await client.post("/v1/robots/planar3/ik", json=body)).json()["solutions"]
    assert [s["success"] for s in solutions] == [True, False]
    assert [s["status"] for s in solutions] == ["solved", "exhausted"]
    assert any(x != 0 for row in solutions[0]["gradient"] for x in row)
    assert all(x == 0 for row in solutions[1]["gradient"] for x in row)


# --------------------------------------------------------------------------- errors: 4xx naming the field, never 500

GOOD_TARGET = {"position": [0.5, 0.3, 0.0], "orientation": [0.0, 0.0, 0.0, 1.0]}


def ik_body(**fields: Any) -> dict[str, Any]:
    return {"targets": [GOOD_TARGET], **fields}


BAD_IK = [
    ("no targets", {}, "targets"),
    ("empty targets", {"targets": []}, "targets"),
    ("targets not a list", {"targets": GOOD_TARGET}, "targets"),
    ("short position", {"targets": [{"position": [1, 2], "orientation": [0, 0, 0, 1]}]}, "position"),
    ("NaN string", {"targets": [{"position": ["NaN", 0, 0], "orientation": [0, 0, 0, 1]}]}, "position"),
    ("Infinity string", {"targets": [{"position": [0, "Infinity", 0], "orientation": [0, 0, 0, 1]}]}, "position"),
    ("huge number", {"targets": [{"position": [1e300, 0, 0], "orientation": [0, 0, 0, 1]}]}, "position"),
    ("text number", {"targets": [{"position": ["one", 0, 0], "orientation": [0, 0, 0, 1]}]}, "position"),
    ("zero quaternion", {"targets": [{"position": [0, 0, 0], "orientation": [0, 0, 0, 0]}]}, "orientation"),
    ("tiny quaternion", {"targets": [{"position": [0, 0, 0], "orientation": [1e-9, 0, 0, 0]}]}, "orientation"),
    ("3-part quaternion", {"targets": [{"position": [0, 0, 0], "orientation": [0, 0, 1]}]}, "orientation"),
    ("missing orientation", {"targets": [{"position": [0, 0, 0]}]}, "orientation"),
    ("extra target field", {"targets": [{**GOOD_TARGET, "frame": "base"}]}, "frame"),
    ("extra field", ik_body(frame_id=3), "frame_id"),
    ("timeout as text", ik_body(timeout="1"), "timeout"),
    ("zero timeout", ik_body(timeout=0), "timeout"),
    ("timeout over the server's max_timeout", ik_body(timeout=11.0), "timeout"),
    ("warm_start of the wrong length", ik_body(warm_start=[[0.0, 0.0]]), "warm_start"),
    ("warm_start of the wrong count", ik_body(warm_start=[[0.0, 0.0, 0.0]] * 2), "warm_start"),
    ("warm_start with NaN", ik_body(warm_start=[["NaN", 0.0, 0.0]]), "warm_start"),
    ("the old name seed", ik_body(seed=[[0.0, 0.0, 0.0]]), "seed"),
    ("negative position tolerance", ik_body(position_tolerance=-1e-3), "position_tolerance"),
    ("zero orientation tolerance", ik_body(orientation_tolerance=0), "orientation_tolerance"),
    ("negative max_iterations", ik_body(max_iterations=-1), "max_iterations"),
    ("huge max_iterations", ik_body(max_iterations=10**9), "max_iterations"),
    ("fractional max_iterations", ik_body(max_iterations=2.5), "max_iterations"),
    ("zero num_seeds", ik_body(num_seeds=0), "num_seeds"),
    ("num_seeds as a boolean", ik_body(num_seeds=True), "num_seeds"),
    ("max_iterations as text", ik_body(max_iterations="3"), "max_iterations"),
    ("integral max_iterations as a float", ik_body(max_iterations=3.0), "max_iterations"),
    ("position_tolerance as text", ik_body(position_tolerance="1e-3"), "position_tolerance"),
    ("orientation_tolerance as a boolean", ik_body(orientation_tolerance=True), "orientation_tolerance"),
    ("zero restart_after", ik_body(restart_after=0), "restart_after"),
    ("huge check_every", ik_body(check_every=10**6), "check_every"),
    ("return_gradient as text", ik_body(return_gradient="yes"), "return_gradient"),
]


@pytest.mark.parametrize(("case", "body", "field"), BAD_IK, ids=[c[0] for c in BAD_IK])
async def test_bad_ik_requests_are_422_naming_the_field(
    client: httpx.AsyncClient, case: str, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/robots/planar3/ik", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    assert any(field in map(str, d["loc"]) or field in d["msg"] for d in detail), detail


BAD_RAW = [
    ("malformed JSON", b'{"targets": [', 422),
    ("JSON with a bare NaN", b'{"targets": [{"position": [NaN, 0, 0], "orientation": [0, 0, 0, 1]}]}', 422),
    ("number overflowing to inf", b'{"targets": [{"position": [1e400, 0, 0], "orientation": [0, 0, 0, 1]}]}', 422),
    ("a JSON list", b"[1, 2, 3]", 422),
    ("empty body", b"", 422),
]


@pytest.mark.parametrize(("case", "raw", "status"), BAD_RAW, ids=[c[0] for c in BAD_RAW])
async def test_bad_raw_bodies_are_4xx(client: httpx.AsyncClient, case: str, raw: bytes, status: int) -> None:
    response = await client.post("/v1/robots/planar3/ik", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text


async def test_bodies_not_declared_as_json_are_415(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    raw = json.dumps(ik_body()).encode()
    # What a web page may send cross-origin without a preflight: no Content-Type, text and form types.
    solved = sample(app, "ik_layer_rows_admitted_total", {"robot": "planar3"})
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        headers = {} if content_type is None else {"content-type": content_type}
        for route in ("ik", "fk"):
            body = raw if route == "ik" else json.dumps({"q": [[0.0, 0.0, 0.0]]}).encode()
            response = await client.post(f"/v1/robots/planar3/{route}", content=body, headers=headers)
            assert response.status_code == 415, (content_type, route, response.text)
            assert response.headers["content-type"] == "application/json"
            assert "application/json" in response.json()["detail"]
    assert sample(app, "ik_layer_rows_admitted_total", {"robot": "planar3"}) == solved  # nothing was solved
    for content_type in ("application/json; charset=utf-8", "application/vnd.api+json"):
        response = await client.post("/v1/robots/planar3/ik", content=raw, headers={"content-type": content_type})
        assert response.status_code == 200, response.text


async def test_422_lists_the_first_errors_and_never_echoes_the_input(client: httpx.AsyncClient) -> None:
    marker = "z" * 150  # 300 of them: over INLINE_BYTES, decoded off the event loop
    bad_target = {"position": [marker, 0, 0], "orientation": [0, 0, 0, 1]}
    body = {"targets": [bad_target] * 8, **{f"unknown{i}": marker for i in range(300)}}
    raw = json.dumps(body).encode()
    response = await client.post("/v1/robots/planar3/ik", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    answer = response.json()
    assert answer["error_count"] == 308 and len(answer["detail"]) == 10
    assert marker not in response.text and len(response.content) < 4096


async def test_unknown_robot_is_404_listing_the_loaded_ones(client: httpx.AsyncClient) -> None:
    for path in ("/v1/robots/kuka/ik", "/v1/robots/kuka/fk"):
        response = await client.post(path, json=ik_body() if path.endswith("ik") else {"q": [[0.0]]})
        assert response.status_code == 404
        assert response.json() == {"detail": "unknown robot 'kuka'", "available": ["planar3", "ur5e"]}


async def test_too_many_targets_is_413(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/robots/planar3/ik", json={"targets": [GOOD_TARGET] * 9})
    assert response.status_code == 413 and "targets" in response.json()["detail"]
    response = await client.post("/v1/robots/planar3/fk", json={"q": [[0.0, 0.0, 0.0]] * 9})
    assert response.status_code == 413 and "q" in response.json()["detail"]


async def test_oversized_bodies_are_refused_before_parsing(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = api
    blob = json.dumps({"targets": [GOOD_TARGET], "pad": "x" * 70_000}).encode()
    response = await client.post("/v1/robots/planar3/ik", content=blob, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "limit of 65536 bytes" in response.json()["detail"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(20):
            yield b" " * 4096

    response = await client.post(
        "/v1/robots/planar3/ik", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413 and "at least" in response.json()["detail"]


BAD_FK = [
    ("empty q", {"q": []}, "q"),
    ("q of the wrong length", {"q": [[0.0, 0.0]]}, "q"),
    ("q not nested", {"q": [0.0, 0.0, 0.0]}, "q"),
    ("q with inf", {"q": [[0.0, "inf", 0.0]]}, "q"),
    ("extra field", {"q": [[0.0, 0.0, 0.0]], "frame": "tip"}, "frame"),
]


@pytest.mark.parametrize(("case", "body", "field"), BAD_FK, ids=[c[0] for c in BAD_FK])
async def test_bad_fk_requests_are_422_naming_the_field(
    client: httpx.AsyncClient, case: str, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/robots/planar3/fk", json=body)
    assert response.status_code == 422, response.text
    assert any(field in map(str, d["loc"]) or field in d["msg"] for d in response.json()["detail"])


async def test_errors_are_counted_but_health_and_metrics_are_not_traffic(
    api: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = api
    await client.get("/health")
    await client.get("/metrics")
    await client.post("/v1/robots/planar3/ik", json={})
    text = (await client.get("/metrics")).text
    assert 'ik_layer_errors_total{endpoint="/v1/robots/{name}/ik",status="422"}' in text
    assert 'endpoint="/health"' not in text and 'endpoint="/metrics"' not in text
    assert "ik_layer_rows_in_flight" in text and "ik_layer_block_seconds_bucket" in text


# --------------------------------------------------------------------------- one-frame weights


async def test_position_only_weights_ignore_the_orientation(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    robot = robot_of(app, "ur5e")
    _, targets = reachable(robot, 4, seed=21)
    anywhere = [{**t, "orientation": [0.31, -0.21, 0.92, 0.11]} for t in targets]  # no answer has this orientation
    body = {"targets": anywhere, "weights": [1, 1, 1, 0, 0, 0], "return_gradient": True}
    solutions = (await client.post("/v1/robots/ur5e/ik", json=body)).json()["solutions"]
    assert all(s["success"] for s in solutions) and all(s["orientation_error"] == 0 for s in solutions)
    q = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
    wanted = pose_tensor(targets)[:, :3]
    torch.testing.assert_close(robot.fk(q)[:, :3, 3], wanted, atol=1e-4, rtol=0)
    weights = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64)
    gradient = torch.tensor([s["gradient"] for s in solutions], dtype=torch.float64)
    torch.testing.assert_close(gradient, ik_layer.target_gradient(robot, q, weights), rtol=1e-9, atol=1e-12)
    assert bool((gradient[..., 3:] == 0).all())  # rotations of the target do not move the answer


# --------------------------------------------------------------------------- several end-effector frames, floating base

SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
TALOS = "talos_data/robots/talos_reduced.urdf"
HANDS = ["gripper_left_base_link", "gripper_right_base_link"]
TORSO = {"torso_1_joint": 0.2, "torso_2_joint": 0.1}
POSITION_ONLY = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
async def multi(erd_urdf, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """solo12's four feet on a floating base, and talos's two hands with the torso locked (``@robots.json``)."""
    specs = [
        {"source": str(erd_urdf(SOLO)), "ee_frames": FEET, "floating_base": True},
        {"source": str(erd_urdf(TALOS)), "name": "talos_hands", "ee_frames": HANDS, "locked": TORSO},
    ]
    path = tmp_path_factory.mktemp("robots") / "robots.json"
    path.write_text(json.dumps(specs))
    async with serving(robots=[f"@{path}"], max_targets=8, max_queued_work=10**6) as pair:
        yield pair


def frame_targets(robot: ik_layer.Robot, q: torch.Tensor) -> list[dict[str, dict[str, list[float]]]]:
    """The JSON targets of ``q``'s end-effector poses: per configuration, an object frame -> pose."""
    frames = list(robot.ee_frames or ())
    return [
        {f: {"position": p[:3], "orientation": p[3:]} for f, p in zip(frames, row, strict=True)}
        for row in matrix_to_pose(robot.fk(q)).tolist()
    ]


def frame_poses(targets: list[dict[str, dict[str, list[float]]]], frames: list[str]) -> torch.Tensor:
    """(n, F, 7) poses of keyed JSON targets or FK poses, in the order of ``frames``."""
    return torch.tensor(
        [[t[f]["position"] + t[f]["orientation"] for f in frames] for t in targets], dtype=torch.float64
    )


def split_by_frame(gradient: dict[str, list[list[float]]], frames: list[str]) -> torch.Tensor:
    """(dof, F, 6) of a keyed gradient, the layout of ``ik_layer.target_gradient``."""
    return torch.tensor([gradient[f] for f in frames], dtype=torch.float64).transpose(0, 1)


async def test_robots_list_frames_nq_and_the_floating_base(multi: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = multi
    robots = {r["name"]: r for r in (await client.get("/v1/robots")).json()["robots"]}
    solo, hands = robots["solo"], robots["talos_hands"]
    assert (solo["nq"], solo["dof"], solo["floating_base"]) == (19, 18, True)
    assert solo["ee_frames"] == FEET and solo["ee_frame"] == "FL_FOOT"
    assert solo["joint_names"] == robot_of(app, "solo").joint_names and len(solo["lower"]) == len(solo["upper"]) == 12
    assert "root_joint" not in solo["locked"]
    assert (hands["nq"], hands["dof"], hands["floating_base"], hands["ee_frames"]) == (14, 14, False, HANDS)
    assert hands["locked"]["torso_1_joint"] == pytest.approx(0.2) and hands["locked"]["torso_2_joint"] == 0.1
    assert not set(hands["locked"]) & set(hands["joint_names"])


async def test_both_hands_are_solved_and_fk_of_the_answers_meets_the_targets(
    multi: tuple[FastAPI, httpx.AsyncClient], pin_reference: Callable
) -> None:
    app, client = multi
    robot = robot_of(app, "talos_hands")
    q = robot.random_q((8,), generator=make_rng(31))
    targets = frame_targets(robot, q)
    # One of these eight targets needs close to 200 iterations: a budget to spare.
    body = {"targets": targets, "num_seeds": 8, "max_iterations": 400}
    response = await client.post("/v1/robots/talos_hands/ik", json=body)
    assert response.status_code == 200, response.text
    solutions = response.json()["solutions"]
    assert all(s["success"] and s["status"] == "solved" for s in solutions), [s["status"] for s in solutions]
    answers = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
    assert answers.shape == (8, 14) and bool(((answers >= robot.lower) & (answers <= robot.upper)).all())
    wanted = pose_to_matrix(frame_poses(targets, HANDS))
    reached = robot.fk(answers)  # (8, 2, 4, 4)
    error = ik_layer.model.lie.pose_error(wanted, reached)
    assert float(error[..., :3].norm(dim=-1).max()) <= 1e-4 and float(error[..., 3:].norm(dim=-1).max()) <= 1e-3
    torch.testing.assert_close(  # the worst hand's errors
        torch.tensor([s["position_error"] for s in solutions], dtype=torch.float64),
        error[..., :3].norm(dim=-1).amax(-1),
        atol=1e-12,
        rtol=0,
    )
    for f, frame in enumerate(HANDS):
        pin_pose, _ = pin_reference(robot, answers, frame)
        np.testing.assert_allclose(pin_pose, reached[:, f].numpy(), atol=1e-9)
    held = robot.to_full_pinocchio_q(answers)
    model = robot.full_model
    torso = held[:, [model.joints[model.getJointId(name)].idx_q for name in TORSO]]
    torch.testing.assert_close(torso, torch.tensor([[0.2, 0.1]] * 8, dtype=torch.float64), rtol=0, atol=0)


async def test_position_only_feet_move_the_floating_base_and_gradients_are_per_frame(
    multi: tuple[FastAPI, httpx.AsyncClient], pin_reference: Callable
) -> None:
    app, client = multi
    robot = robot_of(app, "solo")
    q = random_bases(robot.random_q((6,), generator=make_rng(32)), make_rng(33))
    targets = frame_targets(robot, q)
    for target in targets:  # the feet's orientations are ignored: any will do
        for foot in FEET:
            target[foot]["orientation"] = [0.0, 0.0, 0.0, 1.0]
    body = {"targets": targets, "weights": POSITION_ONLY, "return_gradient": True}
    response = await client.post("/v1/robots/solo/ik", json=body)
    assert response.status_code == 200, response.text
    solutions = response.json()["solutions"]
    assert all(s["success"] for s in solutions) and all(s["orientation_error"] == 0 for s in solutions)
    answers = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
    assert answers.shape == (6, 19)
    torch.testing.assert_close(answers[:, 3:7].norm(dim=-1), torch.ones(6, dtype=torch.float64), atol=1e-12, rtol=0)
    wanted = frame_poses(targets, FEET)[..., :3]
    for f, foot in enumerate(FEET):
        pin_pose, _ = pin_reference(robot, answers, foot)
        assert float((torch.from_numpy(pin_pose)[:, :3, 3] - wanted[:, f]).norm(dim=-1).max()) <= 1e-4
    weights = torch.tensor(POSITION_ONLY, dtype=torch.float64)
    want = ik_layer.target_gradient(robot, answers, weights)  # (6, 18, 4, 6)
    for solution, expected in zip(solutions, want, strict=True):
        assert list(solution["gradient"]) == FEET
        assert all(len(rows) == robot.dof == 18 and len(rows[0]) == 6 for rows in solution["gradient"].values())
        torch.testing.assert_close(split_by_frame(solution["gradient"], FEET), expected, rtol=1e-9, atol=1e-12)


async def test_per_frame_weights_of_concurrent_requests_are_their_own(multi: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = multi
    robot = robot_of(app, "talos_hands")
    q = robot.random_q((4,), generator=make_rng(34))
    full = frame_targets(robot, q)
    loose = frame_targets(robot, q)
    for target in loose:  # the right hand's orientation is ignored: any will do
        target[HANDS[1]]["orientation"] = [0.5, 0.5, 0.5, 0.5]
    loose_body = {"targets": loose, "weights": {HANDS[1]: POSITION_ONLY}, "return_gradient": True, "num_seeds": 8}
    answers = await asyncio.gather(
        client.post("/v1/robots/talos_hands/ik", json=loose_body),
        client.post("/v1/robots/talos_hands/ik", json={"targets": full, "num_seeds": 8}),
    )
    loose_solutions, full_solutions = (a.json()["solutions"] for a in answers)
    assert all(s["success"] for s in loose_solutions + full_solutions)
    for solutions, weight_right in ((loose_solutions, POSITION_ONLY), (full_solutions, [1.0] * 6)):
        answer = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
        error = ik_layer.model.lie.pose_error(pose_to_matrix(frame_poses(full, HANDS)), robot.fk(answer))
        assert float(error[..., :3].norm(dim=-1).max()) <= 1e-4
        assert float(error[:, 0, 3:].norm(dim=-1).max()) <= 1e-3  # the left hand's orientation always counts
        if weight_right != POSITION_ONLY:
            assert float(error[:, 1, 3:].norm(dim=-1).max()) <= 1e-3
    weights = torch.tensor([[1.0] * 6, POSITION_ONLY], dtype=torch.float64)
    answer = torch.tensor([s["q"] for s in loose_solutions], dtype=torch.float64)
    want = ik_layer.target_gradient(robot, answer, weights)
    got = torch.stack([split_by_frame(s["gradient"], HANDS) for s in loose_solutions])
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


async def test_a_warm_start_at_the_answer_keeps_the_floating_base(multi: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = multi
    robot = robot_of(app, "solo")
    q = random_bases(robot.random_q((3,), generator=make_rng(35)), make_rng(36))
    body = {"targets": frame_targets(robot, q), "warm_start": q.tolist()}
    solutions = (await client.post("/v1/robots/solo/ik", json=body)).json()["solutions"]
    assert [(s["iterations"], s["success"]) for s in solutions] == [(0, True)] * 3
    torch.testing.assert_close(torch.tensor([s["q"] for s in solutions], dtype=torch.float64), q, atol=1e-12, rtol=0)


async def test_fk_of_several_frames_is_keyed_and_matches_pinocchio(
    multi: tuple[FastAPI, httpx.AsyncClient], pin_reference: Callable
) -> None:
    app, client = multi
    robot = robot_of(app, "solo")
    q = random_bases(robot.random_q((4,), generator=make_rng(37)), make_rng(38))
    response = await client.post("/v1/robots/solo/fk", json={"q": q.tolist()})
    assert response.status_code == 200, response.text
    poses = response.json()["poses"]
    assert all(list(p) == FEET for p in poses)
    got = pose_to_matrix(frame_poses(poses, FEET))
    torch.testing.assert_close(got, robot.fk(q), atol=1e-12, rtol=0)
    for f, foot in enumerate(FEET):
        want, _ = pin_reference(robot, q, foot)
        np.testing.assert_allclose(got[:, f].numpy(), want, atol=1e-9)


def bad_multi(app: FastAPI) -> list[tuple[str, str, dict[str, Any], str]]:
    """(case, route, body, text naming the field or the frames) for solo."""
    robot = robot_of(app, "solo")
    q = robot.random_q((1,), generator=make_rng(39))
    (target,) = frame_targets(robot, q)
    zero_base = q.clone()
    zero_base[0, 3:7] = 0
    return [
        ("missing foot", "ik", {"targets": [{f: target[f] for f in FEET[:3]}]}, "HR_FOOT"),
        ("unknown frame", "ik", {"targets": [{**target, "tail": target["FL_FOOT"]}]}, "tail"),
        ("a plain pose", "ik", {"targets": [target["FL_FOOT"]]}, "4 end-effector frames"),
        ("weights of an unknown frame", "ik", {"targets": [target], "weights": {"tail": POSITION_ONLY}}, "tail"),
        ("all-zero weights", "ik", {"targets": [target], "weights": {"FL_FOOT": [0.0] * 6}}, "FL_FOOT"),
        ("warm start of dof values", "ik", {"targets": [target], "warm_start": [q[0, 1:].tolist()]}, "warm_start"),
        ("zero base quaternion", "ik", {"targets": [target], "warm_start": zero_base.tolist()}, "quaternion"),
        ("FK of joints only", "fk", {"q": [q[0, 7:].tolist()]}, "19 values"),
        ("FK with a zero base quaternion", "fk", {"q": zero_base.tolist()}, "quaternion"),
    ]


async def test_bad_multi_frame_requests_are_422_naming_the_field(multi: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = multi
    for case, route, body, text in bad_multi(app):
        response = await client.post(f"/v1/robots/solo/{route}", json=body)
        assert response.status_code == 422, (case, response.text)
        detail = response.json()["detail"]
        assert any(text in " ".join(map(str, d["loc"])) or text in d["msg"] for d in detail), (case, detail)


async def test_work_counts_every_frame(multi: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = multi
    robot = robot_of(app, "solo")
    targets = frame_targets(robot, robot.random_q((1,), generator=make_rng(40)))
    body = {"targets": targets, "num_seeds": 64, "max_iterations": 4000}  # 1 x 4 feet x 64 x 4000 > 10**6
    response = await client.post("/v1/robots/solo/ik", json=body)
    assert response.status_code == 413
    assert "1,024,000 row-iterations (targets x frames x num_seeds x max_iterations)" in response.json()["detail"]
