"""Ray Serve scale-out path: deploy/ray_serve.py starts locally on the CPU (one replica) and answers /health and one
IK request, naming the replica; the per-robot applications' layout and the replica middleware's path mapping.

Skipped (with the reason) when ``ray[serve]`` is not installed; it is an optional extra (``deploy``, and in
``test``), not a dependency. bench/scale_out.py measures the deployment (replicas, faults, routing).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]

try:
    import ray
    from ray import serve
except ImportError as err:  # pragma: no cover - depends on the environment
    pytest.skip(f"ray[serve] is not installed ({err}); pip install 'ray[serve]' to run it", allow_module_level=True)

from fastapi import FastAPI, Request  # noqa: E402

from ik_layer.server.settings import Settings  # noqa: E402
from ik_layer.testing import free_port  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray's own pydantic v1-style fields


@pytest.fixture(scope="module")
def ray_url():
    from ik_layer.deploy.ray_serve import PROXY_CALLBACK, build_deployment

    port = free_port()
    pythonpath = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    name, value = PROXY_CALLBACK  # the proxy loads ik_layer.deploy.ray_serve.proxy_middlewares, as main() has it
    before = os.environ.get(name)
    os.environ[name] = value
    ray.init(
        num_cpus=2,
        num_gpus=0,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": pythonpath, "IK_LAYER_TORCH_THREADS": "1"}},
    )
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        settings = Settings(robots=["planar3"], device="auto", max_iterations=50, num_seeds=2)
        serve.run(build_deployment(settings, cpus_per_replica=0.5), name="ik-layer", route_prefix="/")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def test_ray_serve_answers_health_and_ik(ray_url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        response = httpx.get(f"{ray_url}/health", timeout=5)
        if response.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert response.status_code == 200, response.text
    health = response.json()
    assert health["status"] == "ok" and health["robots"] == ["planar3"] and health["device"] == "cpu"

    target = httpx.post(f"{ray_url}/v1/robots/planar3/fk", json={"q": [[0.3, -0.5, 0.8]]}, timeout=30).json()
    answer = httpx.post(f"{ray_url}/v1/robots/planar3/ik", json={"targets": target["poses"]}, timeout=30)
    assert answer.status_code == 200, answer.text
    solution = answer.json()["solutions"][0]
    assert solution["success"], solution
    assert solution["position_error"] <= 1e-4
    replica, pid = answer.headers["x-ik-layer-replica"].split()  # which replica answered, and its process
    assert replica and int(pid) > 0 and int(pid) != os.getpid()


def test_per_robot_applications_layout() -> None:
    """Several robots: one application per robot at /v1/robots/<name> (its replicas), the root one at / (one
    replica, no CPU reserved); one robot, or per_robot=False: one application at / holding them all."""
    from ik_layer.deploy.ray_serve import ROOT_CPUS, build_applications

    def layout(apps):
        return [
            (a.name, a.route_prefix, a.robots, a.app._bound_deployment.num_replicas,
             a.app._bound_deployment.ray_actor_options["num_cpus"])
            for a in apps
        ]  # fmt: skip

    settings = Settings(robots=["planar3", "ur5e"], device="cpu")
    assert layout(build_applications(settings, num_replicas=2)) == [
        ("ik-layer", "/", ("planar3", "ur5e"), 1, ROOT_CPUS),
        ("ik-layer-planar3", "/v1/robots/planar3", ("planar3",), 2, 1),
        ("ik-layer-ur5e", "/v1/robots/ur5e", ("ur5e",), 2, 1),
    ]
    assert layout(build_applications(settings, per_robot=False, num_replicas=2)) == [
        ("ik-layer", "/", ("planar3", "ur5e"), 2, 1)
    ]
    assert layout(build_applications(Settings(robots=["ur5e"], device="cpu"))) == [("ik-layer", "/", ("ur5e",), 1, 1)]


def test_replica_routes_full_path_metrics_and_tag() -> None:
    """Under a robot's route prefix (Ray's proxy sets root_path to it) the app sees the full path, and
    <prefix>/metrics and <prefix>/health reach the replica's own; every answer carries the replica header."""
    import asyncio

    from ik_layer.deploy.ray_serve import REPLICA_HEADER, _ReplicaRoutes

    app = FastAPI()

    @app.get("/v1/robots/{name}/ik")
    @app.get("/metrics")
    @app.get("/health")
    async def echo(request: Request) -> dict:
        return {"path": request.url.path, "route": request.scope["route"].path}

    app.add_middleware(_ReplicaRoutes, prefix="/v1/robots/ur5e")

    async def get(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, root_path="/v1/robots/ur5e")
        async with httpx.AsyncClient(transport=transport, base_url="http://ray") as http:
            return await http.get(path)

    for path, route in [
        ("/v1/robots/ur5e/ik", "/v1/robots/{name}/ik"),
        ("/v1/robots/ur5e/metrics", "/metrics"),
        ("/v1/robots/ur5e/health", "/health"),
    ]:
        response = asyncio.run(get(path))
        assert response.status_code == 200 and response.json()["route"] == route, (path, response.text)
        assert response.headers[REPLICA_HEADER].split()[1] == str(os.getpid())


def test_replicas_follow_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """One replica per GPU with 1 GPU each; without GPUs (or device=cpu) one CPU replica."""
    import ik_layer.deploy.ray_serve as rs

    def options(app):
        deployment = app._bound_deployment
        return deployment.num_replicas, deployment.ray_actor_options["num_gpus"]

    monkeypatch.setattr(rs, "cluster_gpus", lambda: 4)
    assert options(rs.build_deployment(Settings(device="auto"))) == (4, 1)
    assert options(rs.build_deployment(Settings(device="cpu"))) == (1, 0)
    assert options(rs.build_deployment(Settings(device="auto"), num_replicas=2, gpus_per_replica=0.5)) == (2, 0.5)
    monkeypatch.setattr(rs, "cluster_gpus", lambda: 0)
    assert options(rs.build_deployment(Settings(device="auto"))) == (1, 0)


def test_proxy_errors_become_retryable() -> None:
    """In Ray's proxy: no answer, an exception, or a 5xx no replica wrote (a dead replica's request) -> 503 with
    Retry-After; replicas' answers, their own 500 included, pass unchanged."""
    import asyncio

    from starlette.responses import PlainTextResponse

    from ik_layer.deploy.ray_serve import REPLICA_HEADER, RetryableProxyErrors, proxy_middlewares

    async def proxy(scope, receive, send) -> None:  # a stand-in for Ray's proxy and the replicas behind it
        if scope["path"] == "/proxy/silent":  # what Ray 2.60's proxy does when the replica's actor died
            return
        if scope["path"] == "/proxy/raises":
            raise RuntimeError("The actor died unexpectedly before finishing this task.")
        tagged = {REPLICA_HEADER: "r1 1"} if scope["path"].startswith("/replica") else {}
        status = int(scope["path"].rsplit("/", 1)[1])
        await PlainTextResponse("Internal Server Error", status, headers=tagged)(scope, receive, send)

    async def get(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=RetryableProxyErrors(proxy, retry_after_s=2))
        async with httpx.AsyncClient(transport=transport, base_url="http://ray") as http:
            return await http.get(path)

    for path in ("/proxy/500", "/proxy/silent", "/proxy/raises"):
        died = asyncio.run(get(path))
        assert died.status_code == 503 and died.headers["retry-after"] == "2" and "retry" in died.json()["detail"]
    assert asyncio.run(get("/proxy/200")).status_code == 200
    own = asyncio.run(get("/replica/500"))
    assert own.status_code == 500 and own.text == "Internal Server Error"
    (middleware,) = proxy_middlewares()
    assert middleware.cls is RetryableProxyErrors
