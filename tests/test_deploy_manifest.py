"""deploy/k8s.yaml agrees with the server: port, /health probes, GPU resources, IK_LAYER_* env that Settings accepts."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is needed to parse deploy/k8s.yaml")

from ik_layer.server.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    loaded = list(yaml.safe_load_all((ROOT / "deploy" / "k8s.yaml").read_text()))
    return {doc["kind"]: doc for doc in loaded if doc}


@pytest.fixture(scope="module")
def container(docs: dict[str, dict]) -> dict:
    (only,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    return only


def env_of(container: dict) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container["env"]}


def test_deployment_and_service_present(docs: dict[str, dict]) -> None:
    assert set(docs) == {"Deployment", "Service"}
    deployment, service = docs["Deployment"], docs["Service"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()


def test_env_is_valid_server_settings(container: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_of(container)
    fields = {f"IK_LAYER_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= fields, f"unknown settings: {set(env) - fields}"
    for name in list(os.environ):
        if name.startswith("IK_LAYER_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()  # validates every value the way the server will (device auto: no GPU needed)
    assert settings.host == "0.0.0.0" and settings.device == "auto"
    assert settings.port == container["ports"][0]["containerPort"]


def test_ports_match_settings(docs: dict[str, dict], container: dict) -> None:
    port = Settings.model_fields["port"].default
    (http,) = container["ports"]
    assert http["containerPort"] == int(env_of(container).get("IK_LAYER_PORT", port)) == 8000
    (svc,) = docs["Service"]["spec"]["ports"]
    assert svc["targetPort"] in (http["name"], http["containerPort"]) and svc["port"] == 8000
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^EXPOSE 8000$", dockerfile, re.M)


def test_probes_hit_health(container: dict) -> None:
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/health", probe
        assert get["port"] in ("http", 8000), probe
    # the startup probe must outlast robot loading + warm-up (the Dockerfile allows 120 s)
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120
    # liveness may not be stricter than readiness, or a busy pod is killed instead of drained
    live, ready = container["livenessProbe"], container["readinessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= ready["periodSeconds"] * ready["failureThreshold"]


def test_gpu_resources_and_non_root(docs: dict[str, dict], container: dict) -> None:
    resources = container["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == 1
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert re.search(rf"^USER {pod['securityContext']['runAsUser']}\b", (ROOT / "Dockerfile").read_text(), re.M)
