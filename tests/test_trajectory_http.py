"""POST /v1/robots/{name}/trajectory in process: the library's answers over HTTP, bounds, and errors naming fields."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from fastapi import FastAPI

import ik_layer
from ik_layer.client import (
    AsyncClient,
    Client,
    InvalidRequest,
    RemoteRobotNotFound,
    RemoteTrajectoryResult,
    RequestTooLarge,
)
from ik_layer.model.lie import matrix_to_pose
from ik_layer.server import Settings
from ik_layer.server.decode import parse
from ik_layer.server.exceptions import FieldError
from ik_layer.server.trajectory_jobs import TrajectoryLine, solve, trajectory_job
from ik_layer.server.trajectory_schemas import TrajectoryRequest
from ik_layer.trajectory.synthetic import joint_paths
from tests import conftest

pytestmark = pytest.mark.anyio

DT = 0.01
FRAMES = 10
SETTINGS = {"robots": ["ur5e"], "max_trajectory_frames": 40, "max_trajectories_in_flight": 1}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with conftest.serving(Settings(**SETTINGS), timeout=60) as pair:
        yield pair


@pytest.fixture
def client(api: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return api[1]


def ur5e(app: FastAPI) -> ik_layer.Robot:
    return app.state.ik.robots["ur5e"].robot


def clip(robot: ik_layer.Robot, frames: int = FRAMES, seed: int = 0) -> torch.Tensor:
    """A smooth joint path of ``frames`` frames inside the robot's limits (frame 0 its rest)."""
    return joint_paths(robot, clips=1, frames=frames, dt=DT, generator=torch.Generator().manual_seed(seed))[0]


def body_of(robot: ik_layer.Robot, path: torch.Tensor, form: str = "vector", **fields: Any) -> dict[str, Any]:
    """A request for the FK of ``path``, its targets as 7-vectors, 4x4 matrices or pose objects."""
    if form == "matrix":
        targets: list[Any] = robot.fk(path).tolist()
    else:
        poses = matrix_to_pose(robot.fk(path)).tolist()
        targets = poses if form == "vector" else [{"position": p[:3], "orientation": p[3:]} for p in poses]
    return {"targets": targets, "dt": DT, **fields}


def library(app: FastAPI, body: dict[str, Any], **raw: Any) -> ik_layer.TrajectoryResult:
    """The library's answer to ``body``: ``solve_trajectory`` of the targets as the server decoded them (quaternions
    normalised), with the request's arguments."""
    robot = ur5e(app)
    job = trajectory_job(robot, parse(TrajectoryRequest, json.dumps(body).encode()), app.state.ik.settings)
    generator = None if job.seed is None else torch.Generator().manual_seed(job.seed)
    return ik_layer.solve_trajectory(
        robot,
        job.targets,
        job.options,
        dt=job.dt,
        velocity_limit=job.velocity_limit,
        acceleration=job.acceleration,
        warm_start=job.warm_start,
        weights=job.weights,
        posture=job.posture,
        posture_weight=job.posture_weight,
        generator=generator,
        **raw,
    )


def assert_equal(answer: dict[str, Any], expected: ik_layer.TrajectoryResult) -> None:
    """Every field of the JSON answer equals the library's, value for value."""
    assert answer["q"] == expected.q.tolist()
    for name in ("success", "position_error", "orientation_error", "max_step", "velocity_ratio", "bounded"):
        assert answer[name] == getattr(expected, name).tolist(), name
    assert answer["status"] == [ik_layer.ROW_STATUS[code] for code in expected.status.tolist()]


CASES = [
    ("warm start, vectors", "vector", lambda path: {"warm_start": path[0].tolist()}),
    ("matrices, acceleration, limits per joint", "matrix", lambda path: {
        "warm_start": path[0].tolist(), "acceleration": 10.0, "velocity_limit": [3.0, 3.0, 3.0, 3.2, 3.2, 3.2]}),
    ("pose objects, posture, options", "object", lambda path: {
        "warm_start": path[0].tolist(), "posture": path[-1].tolist(), "posture_weight": 0.05, "num_seeds": 2,
        "position_tolerance": 1e-5, "velocity_limit": 2.5}),
    ("no warm start, a seed, position only", "vector", lambda path: {
        "random_seed": 3, "weights": [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "form", "fields"), CASES, ids=[c[0] for c in CASES])
async def test_http_answers_equal_the_library(api: tuple[FastAPI, httpx.AsyncClient], case, form, fields) -> None:
    app, client = api
    robot = ur5e(app)
    path = clip(robot)
    body = body_of(robot, path, form, **fields(path))
    response = await client.post("/v1/robots/ur5e/trajectory", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["robot"] == "ur5e" and len(answer["q"]) == FRAMES and len(answer["q"][0]) == robot.nq
    assert_equal(answer, library(app, body))
    assert all(answer["success"]) and max(answer["velocity_ratio"]) <= 1
    # the raw targets (quaternions not renormalised) give the same clip to rounding
    raw = ik_layer.solve_trajectory(robot, robot.fk(path), dt=DT, **_library_args(body))
    assert torch.allclose(torch.tensor(answer["q"], dtype=torch.float64), raw.q, atol=1e-9)


def _library_args(body: dict[str, Any]) -> dict[str, Any]:
    """The library's keyword arguments for the non-target fields of ``body``."""
    args: dict[str, Any] = {}
    for name in ("warm_start", "posture", "weights", "velocity_limit"):
        if name in body:
            value = body[name]
            args[name] = torch.tensor(value, dtype=torch.float64) if isinstance(value, list) else value
    for name in ("acceleration", "posture_weight", "num_seeds", "position_tolerance"):
        if name in body:
            args[name] = body[name]
    if "random_seed" in body:
        args["generator"] = torch.Generator().manual_seed(body["random_seed"])
    return args


async def test_the_same_seed_gives_the_same_clip(client: httpx.AsyncClient, api) -> None:
    path = clip(ur5e(api[0]), seed=4)
    body = body_of(ur5e(api[0]), path, random_seed=11)
    first, second = [(await client.post("/v1/robots/ur5e/trajectory", json=body)).json() for _ in range(2)]
    assert first == second


def bad_cases(robot: ik_layer.Robot) -> list[tuple[str, dict[str, Any], str]]:
    path = clip(robot)
    good = body_of(robot, path, warm_start=path[0].tolist())
    nan_frame = {**good, "targets": [*good["targets"][:3], ["NaN", 0, 0, 0, 0, 0, 1], *good["targets"][4:]]}
    return [
        ("zero dt", {**good, "dt": 0}, "dt"),
        ("negative dt", {**good, "dt": -0.01}, "dt"),
        ("a dt too small to bound a step", {**good, "dt": 1e-300}, "dt"),
        ("dt as text", {**good, "dt": "0.01"}, "dt"),
        ("no dt", {k: v for k, v in good.items() if k != "dt"}, "dt"),
        ("zero velocity limit", {**good, "velocity_limit": 0}, "velocity_limit"),
        ("negative limit of one joint", {**good, "velocity_limit": [1, 1, -1, 1, 1, 1]}, "velocity_limit"),
        ("velocity limits of the wrong count", {**good, "velocity_limit": [1.0, 2.0]}, "velocity_limit"),
        ("a NaN frame", nan_frame, "targets"),
        ("no frames", {**good, "targets": []}, "targets"),
        ("a frame of 6 numbers", {**good, "targets": [[0.0] * 6] * 3}, "targets"),
        ("a 3x4 matrix", {**good, "targets": [[[1.0, 0, 0, 0]] * 3]}, "targets"),
        ("warm start of the wrong length", {**good, "warm_start": [0.0, 0.0]}, "warm_start"),
        ("warm start per frame (the IK route's form)", {**good, "warm_start": [path[0].tolist()]}, "warm_start"),
        ("posture of the wrong length", {**good, "posture": [0.0]}, "posture"),
        ("negative acceleration", {**good, "acceleration": -1.0}, "acceleration"),
        ("negative posture weight", {**good, "posture_weight": -0.1}, "posture_weight"),
        ("all-zero weights", {**good, "weights": [0.0] * 6}, "weights"),
        ("centring", {**good, "centring": 0.1}, "centring"),
        ("self collision", {**good, "self_collision": 1}, "self_collision"),
        ("zero num_seeds", {**good, "num_seeds": 0}, "num_seeds"),
        ("timeout over the server's max_timeout", {**good, "timeout": 11.0}, "timeout"),
        ("an IK-only field", {**good, "num_solutions": 2}, "num_solutions"),
        ("unknown field", {**good, "frames_per_second": 100}, "frames_per_second"),
    ]


async def test_bad_requests_are_422_naming_the_field(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    for case, body, field in bad_cases(ur5e(app)):
        response = await client.post("/v1/robots/ur5e/trajectory", json=body)
        assert response.status_code == 422, (case, response.text)
        detail = response.json()["detail"]
        assert isinstance(detail, list) and detail, case
        assert any(field in map(str, d["loc"]) for d in detail), (case, detail)


async def test_too_many_frames_is_413_with_the_limit(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    robot = ur5e(app)
    response = await client.post("/v1/robots/ur5e/trajectory", json=body_of(robot, clip(robot, frames=41)))
    assert response.status_code == 413, response.text
    answer = response.json()
    assert answer["limit"] == 40 and "targets" in answer["detail"] and "41" in answer["detail"]


async def test_unknown_robot_is_404_and_other_media_types_415(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/robots/kuka/trajectory", json={"targets": [[0, 0, 0, 0, 0, 0, 1]], "dt": 0.1})
    assert response.status_code == 404 and response.json()["available"] == ["ur5e"]
    raw = json.dumps({"targets": [[0.4, 0, 0.4, 0, 0, 0, 1]], "dt": 0.1})
    response = await client.post("/v1/robots/ur5e/trajectory", content=raw, headers={"content-type": "text/plain"})
    assert response.status_code == 415


async def test_past_its_deadline_a_clip_answers_its_frames_deadline(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    """As an IK request's rows past their deadline: the frames answer "deadline", holding the last configuration."""
    app, client = api
    robot = ur5e(app)
    never = {"position_tolerance": 1e-300, "orientation_tolerance": 1e-300, "max_iterations": 10_000, "timeout": 0.2}
    start = time.monotonic()
    response = await client.post("/v1/robots/ur5e/trajectory", json=body_of(robot, clip(robot, frames=40), **never))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert time.monotonic() - start < 3.0
    d = answer["status"].index("deadline")  # frames of 10,000 iterations each until the timeout
    assert 0 < d < 30 and answer["status"][d:] == ["deadline"] * (40 - d) and not any(answer["success"][d:])
    assert all(q == answer["q"][d] for q in answer["q"][d:])


async def test_the_line_is_bounded_and_the_event_loop_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """One clip solving (max_trajectories_in_flight=1), none waiting (trajectory_queue_limit=0): a second is 503;
    while the first solves, health and IK requests are answered."""
    original = TrajectoryLine._run

    def slow(self: TrajectoryLine, ticket: Any) -> bytes:
        time.sleep(0.5)  # in the line's thread, as a long clip would
        return original(self, ticket)

    monkeypatch.setattr(TrajectoryLine, "_run", slow)
    async with conftest.serving(Settings(**{**SETTINGS, "trajectory_queue_limit": 0}), timeout=60) as (app, client):
        robot = ur5e(app)
        body = body_of(robot, clip(robot), warm_start=clip(robot)[0].tolist())
        first = asyncio.ensure_future(client.post("/v1/robots/ur5e/trajectory", json=body))
        await asyncio.sleep(0.1)
        start = time.monotonic()
        assert (await client.get("/health")).status_code == 200
        ik = await client.post("/v1/robots/ur5e/ik", json={"targets": body["targets"][:1]})
        assert ik.status_code == 200 and time.monotonic() - start < 0.4
        second = await client.post("/v1/robots/ur5e/trajectory", json=body)
        assert second.status_code == 503 and "Retry-After" in second.headers
        assert (await first).status_code == 200


async def test_openapi_documents_the_route_and_its_examples_are_valid(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/robots/{name}/trajectory"]["post"]
    assert {"200", "413", "422", "503"} <= set(operation["responses"])
    request = spec["components"]["schemas"]["TrajectoryRequest"]
    assert {"targets", "dt", "velocity_limit", "acceleration", "warm_start", "posture", "weights", "timeout"} <= set(
        request["properties"]
    )
    assert {"num_seeds", "position_tolerance"} <= set(request["properties"])
    assert "TrajectoryResponse" in spec["components"]["schemas"]
    for example in request["examples"]:
        parse(TrajectoryRequest, json.dumps(example).encode())


def test_several_frames_on_a_floating_base_decode_and_solve_as_the_library(tiny_urdf: Path) -> None:
    """Keyed multi-frame targets and a floating base's warm start, decoded as the IK route decodes them; the job's
    solve is the library's (no server: its warm-up would compile this robot's kernels)."""
    robot = ik_layer.load_robot(tiny_urdf, ee_frames=["tool", "side_tip"], floating_base=True)
    q = robot.neutral_q().repeat(4, 1)
    q[:, robot.nq - 6 :] += torch.linspace(0, 0.02, 4, dtype=torch.float64)[:, None]
    poses = matrix_to_pose(robot.fk(q)).tolist()  # (4, 2, 7)
    targets = [{"tool": p[0], "side_tip": {"position": p[1][:3], "orientation": p[1][3:]}} for p in poses]
    body = {"targets": targets, "dt": DT, "warm_start": q[0].tolist(), "weights": {"side_tip": [1, 1, 1, 0, 0, 0]}}
    settings = Settings(robots=["ur5e"])
    job = trajectory_job(robot, parse(TrajectoryRequest, json.dumps(body).encode()), settings)
    assert job.targets.shape == (4, 2, 7) and job.warm_start is not None and job.warm_start.shape == (robot.nq,)
    engine = ik_layer.Engine(robot, capacity=64)
    answer = solve(robot, job, engine, time.monotonic() + 60)
    expected = ik_layer.solve_trajectory(
        robot, job.targets, job.options, dt=DT, warm_start=job.warm_start, weights=job.weights
    )
    assert torch.equal(answer.q, expected.q) and bool(answer.success.all())
    missing = {**body, "targets": [{"tool": p[0]} for p in poses]}
    with pytest.raises(FieldError, match="side_tip") as refused:
        trajectory_job(robot, parse(TrajectoryRequest, json.dumps(missing).encode()), settings)
    assert refused.value.loc == ("body", "targets", 0)


# --------------------------------------------------------------------------- the client, both faces


def sync_client(app: FastAPI, loop: asyncio.AbstractEventLoop) -> Client:
    """A blocking :class:`Client` whose requests the app answers on ``loop`` (call it from another thread)."""
    forward = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ik.test", timeout=60)

    def handle(request: httpx.Request) -> httpx.Response:
        sent = httpx.Request(request.method, request.url, headers=request.headers, content=request.read())
        answer = asyncio.run_coroutine_threadsafe(forward.send(sent), loop).result(timeout=60)
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    return Client("http://ik.test", transport=httpx.MockTransport(handle))


async def test_both_clients_answer_what_the_route_answers(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    robot = ur5e(app)
    path = clip(robot, seed=2)
    targets = robot.fk(path)  # (T, 4, 4): the client sends 7-vectors
    fields = {"warm_start": path[0], "acceleration": 5.0, "velocity_limit": 3.0, "num_seeds": 2, "random_seed": 1}
    body = body_of(robot, path, "vector", **{k: v.tolist() if isinstance(v, torch.Tensor) else v
                                              for k, v in fields.items()})  # fmt: skip
    expected = (await client.post("/v1/robots/ur5e/trajectory", json=body)).json()
    async with AsyncClient("http://ik.test", transport=httpx.ASGITransport(app=app)) as remote:
        answers = [await remote.trajectory("ur5e", matrix_to_pose(targets).numpy(), dt=DT, **fields)]
        answers.append(await remote.trajectory("ur5e", targets, dt=DT, **fields))  # tensors in, tensors out
    loop = asyncio.get_running_loop()

    def blocking() -> RemoteTrajectoryResult:
        with sync_client(app, loop) as remote:
            return remote.trajectory("ur5e", matrix_to_pose(targets).tolist(), dt=DT, **fields)

    answers.append(await asyncio.to_thread(blocking))
    assert isinstance(answers[0].q, np.ndarray) and isinstance(answers[1].q, torch.Tensor)
    for answer in answers:
        assert answer.q.shape == (FRAMES, robot.nq) and answer.success.dtype in (np.bool_, torch.bool)
        for name in ("q", "success", "position_error", "orientation_error", "max_step", "velocity_ratio", "bounded"):
            assert np.asarray(getattr(answer, name)).tolist() == expected[name], name


async def test_the_clients_raise_the_library_errors(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, _ = api
    robot = ur5e(app)
    path = clip(robot)
    poses = matrix_to_pose(robot.fk(path)).numpy()
    async with AsyncClient("http://ik.test", transport=httpx.ASGITransport(app=app)) as remote:
        with pytest.raises(InvalidRequest, match="velocity_limit") as refused:
            await remote.trajectory("ur5e", poses, dt=DT, velocity_limit=[1.0, 2.0])
        assert refused.value.status == 422 and refused.value.errors[0]["loc"] == ["body", "velocity_limit"]
        with pytest.raises(RequestTooLarge) as too_long:
            await remote.trajectory("ur5e", np.repeat(poses, 5, axis=0), dt=DT)
        assert too_long.value.limit == 40
        with pytest.raises(RemoteRobotNotFound):
            await remote.trajectory("kuka", poses, dt=DT)
        with pytest.raises(ik_layer.IKLayerError, match="one clip"):  # refused before sending
            await remote.trajectory("ur5e", poses[None], dt=DT)
        with pytest.raises(ik_layer.IKLayerError, match="dt"):
            await remote.trajectory("ur5e", poses, dt=float("nan"))
    loop = asyncio.get_running_loop()

    def blocking() -> None:
        with sync_client(app, loop) as remote, pytest.raises(InvalidRequest, match="dt"):
            remote.trajectory("ur5e", poses, dt=-1.0)

    await asyncio.to_thread(blocking)
