"""Ray Serve scale-out path: deploy/ray_serve.py starts locally on the CPU and answers /health and one IK request.

Skipped (with the reason) when ``ray[serve]`` is not installed; it is an optional extra, not a dependency.
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

from ik_layer.server.settings import Settings  # noqa: E402
from ik_layer.testing import free_port  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray's own pydantic v1-style fields


@pytest.fixture(scope="module")
def ray_url():
    from ik_layer.deploy.ray_serve import build_deployment

    port = free_port()
    pythonpath = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
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
