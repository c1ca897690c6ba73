"""The HTTP API takes what ``ik_layer.solve`` takes: targets in its three forms, ``posture``, the same quaternion
bound; the README's floating-base request answers a standing robot."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from fastapi import FastAPI

import ik_layer
from ik_layer.client import AsyncClient
from ik_layer.model.lie import matrix_to_pose, pose_error, pose_to_matrix
from ik_layer.server import Settings
from tests.conftest import serving

pytestmark = pytest.mark.anyio

README = (Path(__file__).parents[1] / "README.md").read_text()
TALOS = "talos_data/robots/talos_reduced.urdf"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def readme_floating_base_example() -> tuple[dict[str, Any], dict[str, Any]]:
    """The talos spec of the README's robots.json block and the body of its talos curl request, as written."""
    section = README.split("### Several frames, a floating base", 1)[1]
    specs = json.loads(re.search(r"```json\n(.*?)```", section, re.DOTALL).group(1))  # type: ignore[union-attr]
    spec = next(s for s in specs if s.get("name") == "talos")
    body = re.search(r"curl -s localhost:8000/v1/robots/talos/ik .*? -d '(.*?)'", section, re.DOTALL)
    return spec, json.loads(body.group(1))  # type: ignore[union-attr]


@pytest.fixture(scope="module")
async def api(erd_urdf, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """ur5e, and talos on a floating base as the README's robots.json serves it (its URDF from example-robot-data)."""
    spec, _ = readme_floating_base_example()
    path = tmp_path_factory.mktemp("robots") / "robots.json"
    path.write_text(json.dumps([{**spec, "source": str(erd_urdf(TALOS))}]))
    async with serving(Settings(robots=["ur5e", f"@{path}"], max_targets=8)) as pair:
        yield pair


def robot_of(app: FastAPI, name: str) -> ik_layer.Robot:
    return app.state.ik.robots[name].robot


async def solve(client: httpx.AsyncClient, robot: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = await client.post(f"/v1/robots/{robot}/ik", json=body)
    assert response.status_code == 200, response.text
    return response.json()["solutions"]


async def test_the_readme_floating_base_example_stands_upright_over_its_soles(
    api: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = api
    robot = robot_of(app, "talos")
    _, body = readme_floating_base_example()
    assert "posture" in body
    [solution] = await solve(client, "talos", body)
    assert solution["success"] and solution["status"] == "solved"
    q = torch.tensor(solution["q"], dtype=torch.float64)
    base = pose_to_matrix(q[:7])
    soles = robot.fk(q)  # (2, 4, 4)
    wanted = pose_to_matrix(
        torch.tensor([[*p["position"], *p["orientation"]] for p in body["targets"][0].values()], dtype=torch.float64)
    )
    error = pose_error(wanted, soles)
    assert float(error[:, :3].norm(dim=-1).max()) <= 1e-4 and float(error[0, 3:].norm()) <= 1e-3
    height = base[2, 3] - soles[:, 2, 3]
    assert bool((height > 0.9).all()) and bool((height < 1.1).all()), height  # talos's legs are about 1 m
    assert float(base[2, 2]) > 0.99  # the base's up axis within 8 degrees of the vertical
    assert float(soles[1, 2, 2]) > 0.99  # the position-only right sole is flat too
    assert list(solution["gradient"]) == ["left_sole_link", "right_sole_link"]


async def test_the_server_answers_a_posture_as_the_library_does(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    """The first seed starts at the posture in both: the same kernel from the same start gives the same answer."""
    app, client = api
    robot = robot_of(app, "talos")
    _, body = readme_floating_base_example()
    body = {k: v for k, v in body.items() if k != "return_gradient"}
    [solution] = await solve(client, "talos", body)
    targets = torch.tensor(
        [[[*p["position"], *p["orientation"]] for p in body["targets"][0].values()]], dtype=torch.float64
    )
    weights = torch.tensor([[1.0] * 6, body["weights"]["right_sole_link"]], dtype=torch.float64)
    posture = torch.tensor(body["posture"], dtype=torch.float64)
    local = ik_layer.solve(robot, targets, weights=weights, posture=posture)
    assert bool(local.success.all()) and solution["iterations"] == int(local.iterations[0])
    torch.testing.assert_close(torch.tensor(solution["q"], dtype=torch.float64), local.q[0], rtol=0, atol=1e-9)


async def test_a_posture_per_target_pulls_each_towards_its_own(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    """ur5e reaches a position (position-only) from many configurations: each answer stays by its posture."""
    app, client = api
    robot = robot_of(app, "ur5e")
    q = robot.random_q((4,), generator=torch.Generator().manual_seed(5))
    position = matrix_to_pose(robot.fk(q[:1]))[0, :3].tolist()
    targets = [[*position, 0.0, 0.0, 0.0, 1.0]] * 4
    body = {"targets": targets, "weights": [1, 1, 1, 0, 0, 0], "posture": q.tolist(), "num_seeds": 1}
    answers = torch.tensor([s["q"] for s in await solve(client, "ur5e", body)], dtype=torch.float64)
    reached = robot.fk(answers)[:, :3, 3]
    assert float((reached - torch.tensor(position, dtype=torch.float64)).norm(dim=-1).max()) <= 1e-4
    distance = (answers[:, None] - q[None]).norm(dim=-1)  # (answer, posture)
    assert bool((distance.argmin(dim=1) == torch.arange(4)).all()), distance  # each closest to its own posture


async def test_a_target_as_object_7_vector_or_4x4_matrix_gives_the_same_answer(
    api: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = api
    robot = robot_of(app, "ur5e")
    q = robot.random_q((3,), generator=torch.Generator().manual_seed(6))
    matrices = robot.fk(q)
    poses = matrix_to_pose(matrices).tolist()
    start = (q + 0.05).tolist()  # one seed from a warm start: the same start gives the same answer
    forms = {
        "object": [{"position": p[:3], "orientation": p[3:]} for p in poses],
        "vector": poses,
        "matrix": matrices.tolist(),
        "mixed": [{"position": poses[0][:3], "orientation": poses[0][3:]}, poses[1], matrices[2].tolist()],
    }
    answers = {}
    for form, targets in forms.items():
        solutions = await solve(client, "ur5e", {"targets": targets, "warm_start": start, "num_seeds": 1})
        assert all(s["success"] for s in solutions), form
        answers[form] = torch.tensor([s["q"] for s in solutions], dtype=torch.float64)
    for form, answer in answers.items():
        torch.testing.assert_close(answer, answers["object"], rtol=0, atol=1e-9, msg=form)
    error = pose_error(matrices, robot.fk(answers["matrix"]))
    assert float(error[:, :3].norm(dim=-1).max()) <= 1e-4 and float(error[:, 3:].norm(dim=-1).max()) <= 1e-3


BAD_TARGETS = [
    ("a 6-vector", [0.5, 0.0, 0.3, 0.0, 0.0, 1.0], ("body", "targets", 0), "at least 7"),
    ("an 8-vector", [0.5, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0, 0.0], ("body", "targets", 0), "at most 7"),
    ("a zero quaternion", [0.5, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0], ("body", "targets", 0), "has norm 0"),
    ("Euler angles", [0.5, 0.0, 0.3, 0.1, 0.2, 0.3, 0.0], ("body", "targets", 0), "has norm 0.3742"),
    ("a 3x3 matrix", [[1, 0, 0], [0, 1, 0], [0, 0, 1]], ("body", "targets", 0, 0), "at least 4"),
    ("a 4x4 scaled", [[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 1]], ("body", "targets", 0), "orthonormal"),
    ("a 4x4 rounded", [[0.7071, -0.7071, 0, 0], [0.7071, 0.7071, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], None, "1e-06"),
    ("a 4x4 of text", [["1", 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], ("body", "targets", 0, 0, 0), ""),
    (
        "a quaternion 2 % off",
        {"position": [0.5, 0.0, 0.3], "orientation": [0.0, 0.0, 0.0, 1.02]},
        ("body", "targets", 0, "orientation"),
        "orientation has norm 1.02; a quaternion (x, y, z, w) must have norm 1 to within 0.01",
    ),
]


@pytest.mark.parametrize(("case", "target", "loc", "fragment"), BAD_TARGETS, ids=[c[0] for c in BAD_TARGETS])
async def test_malformed_targets_are_422_naming_the_field(
    api: tuple[FastAPI, httpx.AsyncClient], case: str, target: Any, loc: tuple | None, fragment: str
) -> None:
    _, client = api
    response = await client.post("/v1/robots/ur5e/ik", json={"targets": [target]})
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    if loc is not None:
        assert tuple(error["loc"]) == loc, error
    assert tuple(error["loc"][:3]) == ("body", "targets", 0) and fragment in error["msg"], error


async def test_the_library_refuses_the_quaternions_the_server_refuses(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, client = api
    robot = robot_of(app, "ur5e")
    for norm, accepted in ((1.009, True), (0.992, True), (1.02, False), (0.5, False)):
        pose = [0.5, 0.0, 0.3, 0.0, 0.0, 0.0, norm]
        response = await client.post("/v1/robots/ur5e/ik", json={"targets": [pose], "max_iterations": 0})
        assert (response.status_code == 200) == accepted, (norm, response.text)
        target = torch.tensor(pose, dtype=torch.float64)
        if accepted:
            ik_layer.solve(robot, target, max_iterations=0)
        else:
            with pytest.raises(ik_layer.IKLayerError, match=f"target quaternion has norm {norm:.4g}"):
                ik_layer.solve(robot, target, max_iterations=0)


async def test_the_client_sends_a_posture_and_answers_as_the_library(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, _ = api
    robot = robot_of(app, "talos")
    _, body = readme_floating_base_example()
    targets = torch.tensor(
        [[[*p["position"], *p["orientation"]] for p in body["targets"][0].values()]] * 3, dtype=torch.float64
    )
    posture = torch.tensor(body["posture"], dtype=torch.float64)
    weights = torch.tensor([[1.0] * 6, body["weights"]["right_sole_link"]], dtype=torch.float64)
    transport = httpx.ASGITransport(app=app)
    async with AsyncClient("http://ik.test", transport=transport, max_targets=2) as remote:  # in two requests
        result = await remote.solve("talos", targets, posture=posture, weights=weights)
        with pytest.raises(ik_layer.ShapeError, match=r"posture must have shape \(\.\.\., nq\)"):
            await remote.solve("talos", targets, posture=posture.expand(2, 19))
    local = ik_layer.solve(robot, targets, weights=weights, posture=posture)
    assert bool(result.success.all())
    torch.testing.assert_close(result.q, local.q, rtol=0, atol=1e-9)


async def test_the_readme_service_curl_examples_are_solved(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = api
    section = README.split("## Service", 1)[1].split("### Several frames", 1)[0]
    bodies = re.findall(r"curl -s localhost:8000/v1/robots/ur5e/ik .*?-d '(.*?)'", section, re.DOTALL)
    assert len(bodies) == 2 and "posture" in bodies[1]
    for body in bodies:
        solutions = await solve(client, "ur5e", json.loads(body))
        assert [s["status"] for s in solutions] == ["solved"]
