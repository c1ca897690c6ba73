"""The real thing: ``python -m ik_layer.server`` under uvicorn on a free port, a schemathesis run, clean shutdown."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ik_layer.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
FLAGS = [
    "--robots",
    "planar3",
    "--max-iterations",
    "30",
    "--num-seeds",
    "2",
    "--max-targets",
    "16",
    "--log-level",
    "info",
]


def start_server(*flags: str, ready_within: float = 60) -> ServerProcess:
    """Start ``python -m ik_layer.server`` with the test flags and wait for ``/health`` to say ok."""
    return ServerProcess.start([*FLAGS, *flags], ready_within=ready_within, cwd=ROOT)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    running = start_server()
    yield running
    if running.process.poll() is None:
        running.stop()


def test_ik_over_real_http(server: ServerProcess) -> None:
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok" and health["robots"] == ["planar3"]
    fk = httpx.post(f"{server.url}/v1/robots/planar3/fk", json={"q": [[0.3, -0.4, 0.5]]}).json()
    response = httpx.post(f"{server.url}/v1/robots/planar3/ik", json={"targets": fk["poses"]}, timeout=30)
    assert response.status_code == 200 and response.json()["solutions"][0]["success"] is True


def test_schemathesis_finds_no_server_errors(server: ServerProcess) -> None:
    """Valid and invalid bodies generated from /openapi.json, for the loaded robot and a random name: no 5xx."""
    schemathesis = pytest.importorskip(
        "schemathesis", reason="schemathesis is not installed (pip install schemathesis)"
    )
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error

    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    statuses: Counter[int] = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        choices = [None, {"name": "planar3"}] if "{name}" in operation.path else [None]
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


def test_clean_shutdown_finishes_requests_in_flight() -> None:
    """SIGTERM while a request waits for its batch: it is answered, then the lifespan shuts down."""
    running = start_server("--max-wait-ms", "500")
    client = httpx.Client(base_url=running.url, timeout=30)
    body = {"targets": [{"position": [0.6, 0.4, 0.0], "orientation": [0, 0, 0.2, 0.98]}]}
    answers: list[int] = []
    thread = threading.Thread(
        target=lambda: answers.append(client.post("/v1/robots/planar3/ik", json=body).status_code)
    )
    thread.start()
    time.sleep(0.2)  # the request is waiting for its micro-batch
    code, output = running.stop(signal.SIGTERM)
    thread.join(timeout=20)
    assert code in (0, -signal.SIGTERM), output  # uvicorn re-raises SIGTERM after a graceful shutdown
    assert answers == [200]
    assert "Application shutdown complete" in output and "Traceback" not in output
