"""Warm-up before ready: once ``/health`` says ok, no request compiles a kernel. The engine compiles its block kernel
per combination of secondary terms and collision, and records its launch at its first use: the warm-up runs every
combination on each worker's engine, so the first request of each kind answers about as fast as the second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

import ik_layer
import ik_layer.engine.launch
from ik_layer.model.lie import matrix_to_pose
from ik_layer.server import Settings
from ik_layer.testing import ServerProcess
from tests.conftest import serving

ROOT = Path(__file__).resolve().parents[1]
BALL = {"type": "sphere", "center": [0.6, 0.4, 0.6], "radius": 0.05}


def kinds(robot: ik_layer.Robot) -> dict[str, dict[str, Any]]:
    """IK request fields of each kind of request, over 4 targets of ``robot`` (each kind needs its own kernel, but
    the gradient's, which needs FK with Jacobians)."""
    q = robot.random_q((4,), generator=torch.Generator().manual_seed(3))
    targets = matrix_to_pose(robot.fk(q)).tolist()
    middle = ((robot.lower + robot.upper) / 2).tolist()
    terms = {"posture": middle, "centring": 1.0, "manipulability": 0.5}
    fields: dict[str, dict[str, Any]] = {
        "plain": {},
        "posture": {"posture": middle},
        "centring": {"centring": 1.0},
        "manipulability": {"manipulability": 0.5},
        "every term": terms,
        "obstacles": {"obstacles": [BALL]},
        "self_collision": {"self_collision": 1},
        "obstacles, self_collision and every term": {"obstacles": [BALL], "self_collision": 1, **terms},
        "gradient": {"return_gradient": True},
    }
    return {kind: {"targets": targets, **extra} for kind, extra in fields.items()}


@pytest.fixture(scope="module")
def panda_server() -> Iterator[ServerProcess]:
    """A server of its own for the panda (spheres, a serial arm: it runs every kind), in a fresh process: nothing
    compiled or loaded in it before its warm-up (the first start on a machine compiles every kernel: minutes)."""
    running = ServerProcess.start(["--robots", "panda", "--max-iterations", "60"], ready_within=900, cwd=ROOT)
    yield running
    if running.process.poll() is None:
        running.stop()


def test_the_first_request_of_each_kind_answers_within_10x_the_second(panda_server: ServerProcess) -> None:
    with httpx.Client(base_url=panda_server.url, timeout=60) as client:

        def seconds(body: dict[str, Any]) -> float:
            start = time.perf_counter()
            response = client.post("/v1/robots/panda/ik", json=body)
            assert response.status_code == 200, response.text
            return time.perf_counter() - start

        assert client.get("/health").json()["status"] == "ok"
        times = {kind: (seconds(body), seconds(body)) for kind, body in kinds(ik_layer.load_robot("panda")).items()}
    slow = {kind: (round(first, 4), round(second, 4)) for kind, (first, second) in times.items() if first > 10 * second}
    assert not slow, f"first and second request times [s] of the kinds whose first took over 10x: {slow}"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_no_request_records_a_kernel_launch_once_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine records a launch of its kernel for a combination of terms the first time its slots use it (and
    compiles or loads the kernel then, if this process has not): after the warm-up, no request of any kind does."""
    recorded: list[tuple[object, ...]] = []
    kernel = ik_layer.engine.launch.lm_block_kernel

    def recording(*args: object) -> object:
        recorded.append(args[3:])  # the terms and the spheres' layout
        return kernel(*args)

    async with serving(Settings(robots=["panda"])) as (app, client):
        monkeypatch.setattr(ik_layer.engine.launch, "lm_block_kernel", recording)
        for kind, body in kinds(app.state.ik.robots["panda"].robot).items():
            response = await client.post("/v1/robots/panda/ik", json=body)
            assert response.status_code == 200, response.text
            assert not recorded, f"a request of kind {kind!r} recorded a launch of the kernel for {recorded}"
