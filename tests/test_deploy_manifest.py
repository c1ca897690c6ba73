"""deploy/k8s.yaml agrees with the server (port, /health probes, resources, IK_LAYER_* env that Settings accepts) and
with Kubernetes' own schemas (kubernetes-validate's bundled OpenAPI schemas of a pinned version, strict: offline)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is needed to parse deploy/k8s.yaml")

from ik_layer.server.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KUBERNETES_VERSION = "1.30.0"  # the schemas checked against: an old enough API that current clusters serve it


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


def test_deployment_service_and_disruption_budget_present(docs: dict[str, dict]) -> None:
    assert set(docs) == {"Deployment", "Service", "PodDisruptionBudget"}
    deployment, service, budget = docs["Deployment"], docs["Service"], docs["PodDisruptionBudget"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    # the budget covers the pods and leaves a drain possible: at least one serving, fewer than all
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert 1 <= budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_manifest_matches_the_kubernetes_schemas() -> None:
    """Every document against Kubernetes' OpenAPI schemas, strict (unknown fields refused), offline."""
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (test extra) checks the schemas")
    for doc in yaml.safe_load_all((ROOT / "deploy" / "k8s.yaml").read_text()):
        validate.validate(doc, KUBERNETES_VERSION, strict=True)  # raises ValidationError naming the field


def test_schema_check_refuses_a_broken_manifest(docs: dict[str, dict]) -> None:
    """The check is not vacuous: a misspelt field and a wrong type are refused."""
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (test extra) checks the schemas")
    import copy

    misspelt = copy.deepcopy(docs["Deployment"])
    misspelt["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    wrong_type = copy.deepcopy(docs["PodDisruptionBudget"])
    wrong_type["spec"]["selector"] = "app=ik-layer"
    for broken in (misspelt, wrong_type):
        with pytest.raises(validate.ValidationError):
            validate.validate(broken, KUBERNETES_VERSION, strict=True)


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


def test_resources_match_settings(docs: dict[str, dict], container: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """A core per torch thread plus one for the event loop; the grace period outlasts the server's drain."""
    for name in list(os.environ):
        if name.startswith("IK_LAYER_"):
            monkeypatch.delenv(name)
    for name, value in env_of(container).items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.torch_threads >= 1, "pin the engine's threads: a pod's CPU request must bound them"
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert float(requests["cpu"]) >= settings.torch_threads + 1
    gib = {"Gi": 1.0, "Mi": 1 / 1024}
    memory = {k: float(v[:-2]) * gib[v[-2:]] for k, v in (("request", requests["memory"]), ("limit", limits["memory"]))}
    assert 1 <= memory["request"] <= memory["limit"]
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > settings.shutdown_grace


def test_probes_hit_health(container: dict) -> None:
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/health", probe
        assert get["port"] in ("http", 8000), probe
    # /health is 503 until every robot is loaded and warmed up (server/routes/health.py): readiness waits for it
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
