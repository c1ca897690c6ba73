"""The real thing: ``python -m ik_layer.server`` under uvicorn on a free port, a schemathesis run, clean shutdown."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import torch

import ik_layer
from ik_layer.model.lie import matrix_to_pose
from ik_layer.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
FLAGS = [
    "--max-iterations",
    "30",
    "--num-seeds",
    "2",
    "--max-targets",
    "16",
    "--log-level",
    "info",
]


def start_server(*flags: str, robot: str = "planar3", ready_within: float = 60) -> ServerProcess:
    """Start ``python -m ik_layer.server`` for ``robot`` with the test flags; wait for ``/health`` to say ok."""
    return ServerProcess.start(["--robots", robot, *FLAGS, *flags], ready_within=ready_within, cwd=ROOT)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    running = start_server()
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture(scope="module")
def feet_server(tmp_path_factory: pytest.TempPathFactory, erd_urdf) -> Iterator[ServerProcess]:
    """A server for solo12's four feet on a floating base: multi-frame targets, nq-wide configurations."""
    spec = {"source": str(erd_urdf("solo_description/robots/solo12.urdf")), "name": "solo", "floating_base": True}
    spec["ee_frames"] = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    path = tmp_path_factory.mktemp("robots") / "robots.json"
    path.write_text(json.dumps([spec]))
    running = start_server(robot=f"@{path}", ready_within=120)
    yield running
    if running.process.poll() is None:
        running.stop()


def test_ik_over_real_http(server: ServerProcess) -> None:
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok" and health["robots"] == ["planar3"]
    fk = httpx.post(f"{server.url}/v1/robots/planar3/fk", json={"q": [[0.3, -0.4, 0.5]]}).json()
    body = {"targets": fk["poses"], "max_iterations": 200}  # the flags give 30: too few for a sure success
    response = httpx.post(f"{server.url}/v1/robots/planar3/ik", json=body, timeout=30)
    assert response.status_code == 200 and response.json()["solutions"][0]["success"] is True


@pytest.mark.parametrize(("fixture", "robot"), [("server", "planar3"), ("feet_server", "solo")])
def test_schemathesis_finds_no_server_errors(request: pytest.FixtureRequest, fixture: str, robot: str) -> None:
    """Valid and invalid bodies generated from /openapi.json, for the loaded robot and a random name: no 5xx
    (one-frame targets and keyed multi-frame ones, configurations with and without a floating base)."""
    schemathesis = pytest.importorskip(
        "schemathesis", reason="schemathesis is not installed (pip install schemathesis)"
    )
    server: ServerProcess = request.getfixturevalue(fixture)
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error

    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    statuses: Counter[int] = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        choices = [None, {"name": robot}] if "{name}" in operation.path else [None]
        posts = operation.method.upper() == "POST"  # GETs take no input to make invalid
        for mode in list(schemathesis.GenerationMode) if posts else [schemathesis.GenerationMode.POSITIVE]:
            for path_parameters in choices:
                strategy = operation.as_strategy(mode, path_parameters=path_parameters)

                @given(case=strategy)
                @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
                def check(case: schemathesis.Case) -> None:
                    response = case.call(base_url=server.url, timeout=30)
                    statuses[response.status_code] += 1
                    case.validate_response(response, checks=[not_a_server_error])

                check()
    assert statuses[200] > 0 and statuses[422] > 0 and statuses[404] > 0
    assert not [code for code in statuses if code >= 500], statuses


def test_a_port_in_use_stops_the_server_before_any_robot_loads() -> None:
    """A port another program listens on: status 2 and one line naming the address, at once (no robot loaded or
    warmed up first: ``ik-layer ready`` is never logged)."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "ik_layer.server", "--host", "127.0.0.1", "--port", str(port)]
        proc = subprocess.run(
            [*command, "--robots", "ur5e", *FLAGS], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
        )
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"python -m ik_layer.server: --host 127.0.0.1 --port {port}: ")
    assert line.endswith("address already in use") and not proc.stdout


def long_request() -> dict[str, object]:
    """1024 reachable UR5e targets with tolerances no answer meets and the largest budgets: many seconds of work."""
    robot = ik_layer.load_robot("ur5e")
    poses = matrix_to_pose(robot.fk(robot.random_q((1024,), generator=torch.Generator().manual_seed(0))))
    never_within = {"position_tolerance": 1e-300, "orientation_tolerance": 1e-300, "num_seeds": 64}
    never_within["max_iterations"] = 10_000
    return {"targets": [{"position": p[:3], "orientation": p[3:]} for p in poses.tolist()], **never_within}


def test_sigterm_during_long_requests_answers_them_within_the_grace_and_exits_0() -> None:
    """SIGTERM while seconds of work are in flight: every request is answered (rows past the shortened deadline
    retire with status ``deadline``), then the server exits, all within the shutdown grace."""
    running = start_server("--shutdown-grace", "2", "--max-targets", "1024", robot="ur5e")
    body = long_request()
    client = httpx.Client(base_url=running.url, timeout=30)
    answers: list[httpx.Response] = []
    threads = [
        threading.Thread(target=lambda: answers.append(client.post("/v1/robots/ur5e/ik", json=body))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # all of them are in line or solving
    started = time.monotonic()
    code, output = running.stop(signal.SIGTERM)
    took = time.monotonic() - started
    for thread in threads:
        thread.join(timeout=20)
    assert code == 0, output  # a graceful stop (uvicorn re-raises SIGTERM after it: serve() takes it as the end)
    assert took < 2 + 5, output  # the grace period, and a margin for a shared machine
    assert [a.status_code for a in answers] == [200] * 2
    statuses = {s["status"] for a in answers for s in a.json()["solutions"]}
    assert "deadline" in statuses and statuses <= {"deadline", "exhausted"}
    assert "Application shutdown complete" in output and "Traceback" not in output


def metric(text: str, sample: str) -> float:
    """The value of ``sample`` (name and labels) in Prometheus text, 0 when absent."""
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(sample + " ")), 0.0)


def wait_for_metric(url: str, condition: Callable[[str], bool], within: float = 20.0) -> bool:
    """Poll ``/metrics`` until ``condition`` holds on its text (True) or ``within`` seconds pass (False)."""
    give_up = time.monotonic() + within
    while time.monotonic() < give_up:
        if condition(httpx.get(f"{url}/metrics").text):
            return True
        time.sleep(0.02)
    return False


def test_slow_clients_are_dropped_and_a_client_that_leaves_cancels_its_rows() -> None:
    """Headers that never complete: the connection is closed; a body that stalls: 408, connection closed.
    A client that disconnects while its request solves: its rows retire as cancelled."""
    running = start_server("--read-timeout", "0.5", "--max-targets", "1024", robot="ur5e")
    try:
        host, port = running.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as slow_headers:
            slow_headers.sendall(b"POST /v1/robots/ur5e/ik HTTP/1.1\r\nHost: x\r\n")
            assert slow_headers.recv(1024) == b""  # closed by the server after the read timeout
        with socket.create_connection((host, int(port)), timeout=10) as slow_body:
            head = b"POST /v1/robots/ur5e/ik HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            slow_body.sendall(head + b"Content-Length: 100\r\n\r\n{")
            answer = b""
            while chunk := slow_body.recv(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 0.5 s" in answer
        with socket.create_connection((host, int(port)), timeout=10) as gone:  # leaves in the middle of its body
            head = b"POST /v1/robots/ur5e/ik HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            gone.sendall(head + b"Content-Length: 100000\r\n\r\n" + b"{" + b" " * 50_000)
        client_left = 'ik_layer_errors_total{endpoint="/v1/robots/{name}/ik",status="400"}'
        assert wait_for_metric(running.url, lambda text: metric(text, client_left) == 1)  # not a 500
        assert httpx.get(f"{running.url}/health").status_code == 200

        raw = json.dumps(long_request()).encode()
        with socket.create_connection((host, int(port)), timeout=10) as leaving:
            head = b"POST /v1/robots/ur5e/ik HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            leaving.sendall(head + b"Content-Length: %d\r\n\r\n" % len(raw) + raw)
            assert wait_for_metric(running.url, lambda text: metric(text, 'ik_layer_rows_in_flight{robot="ur5e"}') > 0)
        cancelled = 'ik_layer_rows_retired_total{robot="ur5e",status="cancelled"}'
        assert wait_for_metric(running.url, lambda text: metric(text, cancelled) > 0)  # at the next block
        metrics = httpx.get(f"{running.url}/metrics").text
        assert metric(metrics, cancelled) <= 1024 and metric(metrics, 'ik_layer_rows_in_flight{robot="ur5e"}') == 0
    finally:
        running.stop()
