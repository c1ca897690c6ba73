"""Obstacles over HTTP: ``obstacles`` and ``scene`` in IK requests, scenes registered per robot, ``min_distance`` in
the answers (checked against the library's collision term at the answered configurations), and every bad obstacle or
scene refused with a 4xx naming it while the server keeps serving."""

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
from ik_layer import Box, Sphere
from ik_layer.collision.cost import CollisionCost
from ik_layer.collision.shapes import MAX_OBSTACLES
from ik_layer.model.lie import matrix_to_pose
from ik_layer.robots import REGISTRY
from ik_layer.server import Settings
from ik_layer.server.state import MAX_SCENES
from tests.conftest import serving

pytestmark = pytest.mark.anyio

MARGIN = 0.01
PLANAR_SPHERES = Path(__file__).parent / "data" / "planar3_spheres.yml"  # 4 spheres on planar3's links
SERVER_OPTION = ("robots.json", '\\"collision\\"')  # the 422 names the robot spec's field (JSON-escaped quotes)
TABLE = {"type": "box", "pose": [0.6, 0.0, -0.09, 0.0, 0.0, 0.0, 1.0], "size": [0.8, 1.0, 0.1]}
BALL = {"type": "sphere", "center": [0.35, 0.3, 0.45], "radius": 0.1}
POLE = {"type": "capsule", "a": [0.5, -0.4, 0.1], "b": [0.5, -0.4, 0.7], "radius": 0.05}
SCENE = [TABLE, BALL, POLE]
LIBRARY_SCENE = [
    Box([0.6, 0.0, -0.09, 0, 0, 0, 1], [0.8, 1.0, 0.1]),
    Sphere([0.35, 0.3, 0.45], 0.1),
    ik_layer.Capsule([0.5, -0.4, 0.1], [0.5, -0.4, 0.7], 0.05),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with serving(Settings(robots=["panda", "planar3"], max_targets=64)) as pair:
        yield pair


@pytest.fixture
def client(api: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return api[1]


@pytest.fixture(scope="module")
def panda(api: tuple[FastAPI, httpx.AsyncClient]) -> ik_layer.Robot:
    return api[0].state.ik.robots["panda"].robot


def free_targets(robot: ik_layer.Robot, n: int, seed: int) -> list[list[float]]:
    """Poses of ``n`` random configurations at least 3 cm clear of ``SCENE`` (each target has a free answer)."""
    cost = CollisionCost.of(robot, LIBRARY_SCENE, ik_layer.SolveOptions.build(collision_margin=MARGIN))
    assert cost is not None
    q = robot.random_q((40 * n,), generator=torch.Generator().manual_seed(seed))
    free = q[cost.min_distance(robot, q) > 0.03][:n]
    assert len(free) == n
    return matrix_to_pose(robot.fk(free)).tolist()


def least_distance(robot: ik_layer.Robot, q: list[list[float]], obstacles: list[Any]) -> torch.Tensor:
    """The library's least distance at ``q`` between panda's spheres and ``obstacles`` (the reference)."""
    cost = CollisionCost.of(robot, obstacles, ik_layer.SolveOptions.build(collision_margin=MARGIN))
    assert cost is not None
    return cost.min_distance(robot, torch.tensor(q, dtype=robot.dtype))


def reported(answers: list[dict[str, Any]]) -> torch.Tensor:
    """The answers' ``min_distance`` values, in float64."""
    return torch.tensor([a["min_distance"] for a in answers], dtype=torch.float64)


async def solve(client: httpx.AsyncClient, **body: Any) -> list[dict[str, Any]]:
    response = await client.post("/v1/robots/panda/ik", json=body)
    assert response.status_code == 200, response.text
    return response.json()["solutions"]


def assert_error(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    text = response.text
    assert all(word in text for word in words), text


# --------------------------------------------------------------------------- solving with obstacles


async def test_answers_keep_clear_of_the_obstacles_and_report_their_least_distance(
    client: httpx.AsyncClient, panda: ik_layer.Robot
) -> None:
    targets = free_targets(panda, 24, seed=3)
    answers = await solve(client, targets=targets, obstacles=SCENE, collision_margin=MARGIN)
    q = [a["q"] for a in answers]
    reference = least_distance(panda, q, LIBRARY_SCENE)
    torch.testing.assert_close(reported(answers), reference, atol=1e-12, rtol=0)
    cost = CollisionCost.of(panda, LIBRARY_SCENE, ik_layer.SolveOptions.build(self_collision=0))
    assert cost is not None
    _least, pairs = cost.closest(panda, torch.tensor(q, dtype=panda.dtype))
    for answer, (sphere, obstacle) in zip(answers, pairs.tolist(), strict=True):
        link = panda.collision_spheres[sphere][0]
        assert answer["closest"] == {"link": link, "sphere": sphere, "obstacle": obstacle}
    success = torch.tensor([a["success"] for a in answers])
    assert success.float().mean() >= 0.9
    assert bool((reference[success] >= MARGIN).all())
    for answer, target in zip(answers, targets, strict=True):
        if answer["success"]:
            pose = matrix_to_pose(panda.fk(torch.tensor(answer["q"], dtype=panda.dtype))).tolist()
            assert max(abs(a - b) for a, b in zip(pose[:3], target[:3], strict=True)) < 1e-4


async def test_runs_of_one_type_keep_each_obstacle_s_index(client: httpx.AsyncClient, panda: ik_layer.Robot) -> None:
    """The server builds each run of one type as one batched shape: the closest obstacle is still named by its index
    in the request, and the distances are the library's for the shapes one by one."""
    balls = [([0.3 + 0.1 * k, 0.35, 0.2 + 0.15 * k], 0.04 + 0.01 * k) for k in range(3)]
    small = ([0.45, -0.3, 0.25, 0, 0, 0.383, 0.924], [0.1, 0.2, 0.3])
    body = [TABLE, *({"type": "sphere", "center": c, "radius": r} for c, r in balls), POLE]
    body += [{"type": "box", "pose": small[0], "size": small[1]}, TABLE]
    shapes = [LIBRARY_SCENE[0], *(Sphere(c, r) for c, r in balls), LIBRARY_SCENE[2], Box(*small), LIBRARY_SCENE[0]]
    targets = free_targets(panda, 16, seed=4)
    answers = await solve(client, targets=targets, obstacles=body, max_iterations=5)
    q = torch.tensor([a["q"] for a in answers], dtype=panda.dtype)
    cost = CollisionCost.of(panda, shapes, ik_layer.SolveOptions.build(collision_margin=MARGIN))
    assert cost is not None
    least, pairs = cost.closest(panda, q)
    torch.testing.assert_close(reported(answers), least, atol=1e-12, rtol=0)
    assert [a["closest"]["obstacle"] for a in answers] == pairs[:, 1].tolist()
    assert len({a["closest"]["obstacle"] for a in answers}) >= 2  # more than one obstacle comes nearest
    put = await client.put("/v1/robots/panda/scenes/runs", json={"obstacles": body})
    assert put.json() == {"name": "runs", "obstacles": len(body)}
    assert (await client.delete("/v1/robots/panda/scenes/runs")).json() == put.json()


async def test_a_target_inside_an_obstacle_comes_back_unsolved_with_its_least_distance(
    client: httpx.AsyncClient, panda: ik_layer.Robot
) -> None:
    (target,) = free_targets(panda, 1, seed=5)
    swallowing = {"type": "sphere", "center": target[:3], "radius": 0.15}
    (answer,) = await solve(client, targets=[target], obstacles=[swallowing], max_iterations=60)
    assert answer["success"] is False
    (reference,) = least_distance(panda, [answer["q"]], [Sphere(target[:3], 0.15)]).tolist()
    assert answer["min_distance"] == pytest.approx(reference, abs=1e-9)
    assert reference < 0


async def test_self_collision_alone_reports_min_distance_and_plain_requests_do_not(
    client: httpx.AsyncClient, panda: ik_layer.Robot
) -> None:
    targets = free_targets(panda, 4, seed=9)
    checked = await solve(client, targets=targets, self_collision=1)
    plain = await solve(client, targets=targets)
    assert all("min_distance" in a for a in checked)
    assert all("min_distance" not in a for a in plain)
    cost = CollisionCost.of(panda, [], ik_layer.SolveOptions.build(self_collision=1))
    assert cost is not None
    reference = cost.min_distance(panda, torch.tensor([a["q"] for a in checked], dtype=panda.dtype))
    torch.testing.assert_close(reported(checked), reference, atol=1e-12, rtol=0)
    _least, pairs = cost.closest(panda, torch.tensor([a["q"] for a in checked], dtype=panda.dtype))
    for answer, (sphere, other) in zip(checked, pairs.tolist(), strict=True):
        names = {"link": panda.collision_spheres[sphere][0], "other_link": panda.collision_spheres[-1 - other][0]}
        assert answer["closest"] == {**names, "sphere": sphere, "other_sphere": -1 - other}


async def test_box_poses_take_every_pose_form(client: httpx.AsyncClient, panda: ik_layer.Robot) -> None:
    targets = free_targets(panda, 2, seed=11)
    matrix = [[1.0, 0, 0, 0.6], [0, 1.0, 0, 0.0], [0, 0, 1.0, -0.09], [0, 0, 0, 1.0]]
    as_object = {"position": [0.6, 0.0, -0.09], "orientation": [0.0, 0.0, 0.0, 1.0]}
    for pose in (matrix, as_object):
        table = {**TABLE, "pose": pose}
        answers = await solve(client, targets=targets, obstacles=[table])
        reference = least_distance(panda, [a["q"] for a in answers], LIBRARY_SCENE[:1])
        torch.testing.assert_close(reported(answers), reference)


async def test_each_target_keeps_clear_of_its_own_obstacles(client: httpx.AsyncClient, panda: ik_layer.Robot) -> None:
    """One list of obstacles per target, after a named scene's: each answer's least distance and closest obstacle
    are those of the named scene's obstacles, then its own; a target with none of its own has the named ones."""
    targets = free_targets(panda, 5, seed=19)
    own = [[BALL], [POLE], [], [BALL, POLE], [POLE, BALL]]
    library = {id(BALL): LIBRARY_SCENE[1], id(POLE): LIBRARY_SCENE[2]}
    assert (await client.put("/v1/robots/panda/scenes/floor", json={"obstacles": [TABLE]})).status_code == 200
    answers = await solve(client, targets=targets, scene="floor", obstacles=own, collision_margin=MARGIN)
    for answer, mine in zip(answers, own, strict=True):
        scene = [LIBRARY_SCENE[0], *(library[id(entry)] for entry in mine)]
        cost = CollisionCost.of(panda, scene, ik_layer.SolveOptions.build(collision_margin=MARGIN))
        assert cost is not None
        least, pair = cost.closest(panda, torch.tensor(answer["q"], dtype=panda.dtype))
        assert answer["min_distance"] == pytest.approx(float(least), abs=1e-12)
        assert answer["closest"]["obstacle"] == int(pair[1]) and answer["closest"]["sphere"] == int(pair[0])
        assert not answer["success"] or float(least) >= MARGIN
    assert sum(answer["success"] for answer in answers) >= 4
    await client.delete("/v1/robots/panda/scenes/floor")


async def test_obstacles_per_target_must_match_the_targets(client: httpx.AsyncClient) -> None:
    pose = [0.3, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0]
    two = await client.post("/v1/robots/panda/ik", json={"targets": [pose] * 3, "obstacles": [[BALL], [BALL]]})
    assert_error(two, 422, "obstacles", "2 rows", "3 targets")
    bad = {**BALL, "radius": -1}
    inner = await client.post("/v1/robots/panda/ik", json={"targets": [pose] * 2, "obstacles": [[BALL], [bad]]})
    assert_error(inner, 422, "obstacles", "radius")
    mixed = await client.post("/v1/robots/panda/ik", json={"targets": [pose] * 2, "obstacles": [[BALL], BALL]})
    assert_error(mixed, 422, "obstacles")
    too_many = [[BALL] * (MAX_OBSTACLES + 1), []]
    over = await client.post("/v1/robots/panda/ik", json={"targets": [pose] * 2, "obstacles": too_many})
    assert_error(over, 422, "obstacles", str(MAX_OBSTACLES))
    assert (await client.get("/health")).status_code == 200


# --------------------------------------------------------------------------- named scenes


async def test_a_registered_scene_applies_to_requests_naming_it(
    client: httpx.AsyncClient, panda: ik_layer.Robot
) -> None:
    put = await client.put("/v1/robots/panda/scenes/bench", json={"obstacles": SCENE})
    assert put.status_code == 200, put.text
    assert put.json() == {"name": "bench", "obstacles": 3}
    listed = (await client.get("/v1/robots/panda/scenes")).json()
    assert {"name": "bench", "obstacles": 3} in listed["scenes"] and listed["robot"] == "panda"
    targets = free_targets(panda, 8, seed=13)
    extra = {"type": "sphere", "center": [-0.5, 0.0, 0.5], "radius": 0.05}
    answers = await solve(client, targets=targets, scene="bench", obstacles=[extra])
    reference = least_distance(panda, [a["q"] for a in answers], [*LIBRARY_SCENE, Sphere([-0.5, 0.0, 0.5], 0.05)])
    torch.testing.assert_close(reported(answers), reference)
    deleted = await client.delete("/v1/robots/panda/scenes/bench")
    assert deleted.status_code == 200 and deleted.json()["obstacles"] == 3
    gone = await client.post("/v1/robots/panda/ik", json={"targets": targets[:1], "scene": "bench"})
    assert_error(gone, 422, "scene", "bench")


async def test_putting_a_scene_again_replaces_it(client: httpx.AsyncClient) -> None:
    await client.put("/v1/robots/panda/scenes/again", json={"obstacles": SCENE})
    second = await client.put("/v1/robots/panda/scenes/again", json={"obstacles": [BALL]})
    assert second.json() == {"name": "again", "obstacles": 1}
    assert (await client.delete("/v1/robots/panda/scenes/again")).json()["obstacles"] == 1


async def test_a_robot_keeps_a_bounded_number_of_scenes(client: httpx.AsyncClient) -> None:
    for k in range(MAX_SCENES):
        assert (await client.put(f"/v1/robots/panda/scenes/s{k}", json={"obstacles": [BALL]})).status_code == 200
    over = await client.put("/v1/robots/panda/scenes/one-more", json={"obstacles": [BALL]})
    assert_error(over, 409, "delete one first")
    assert over.json()["limit"] == MAX_SCENES
    for k in range(MAX_SCENES):
        await client.delete(f"/v1/robots/panda/scenes/s{k}")
    assert (await client.get("/v1/robots/panda/scenes")).json()["scenes"] == []


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("obstacle", "words"),
    [
        ({"type": "sphere", "center": [0, 0, 0], "radius": -0.1}, ("radius", "greater than 0")),
        ({"type": "sphere", "center": [0, 0], "radius": 0.1}, ("center",)),
        ({"type": "cone", "center": [0, 0, 0], "radius": 0.1}, ("sphere", "box", "capsule")),
        ({"center": [0, 0, 0], "radius": 0.1}, ("type",)),
        ({"type": "box", "pose": [0, 0, 0, 0, 0, 0, 0], "size": [1, 1, 1]}, ("pose", "norm")),
        ({"type": "box", "pose": [0, 0, 0, 0, 0, 0, 1], "size": [1, 0, 1]}, ("size",)),
        ({"type": "capsule", "a": [0, 0, 0], "b": [0, 0, 1], "radius": 0.1, "height": 2}, ("height",)),
        ({"type": "sphere", "center": [0, 0, "1"], "radius": 0.1}, ("center",)),
        ({"type": "sphere", "center": [0, 0, 1e300], "radius": 0.1}, ("center",)),
    ],
)
async def test_a_bad_obstacle_is_refused_naming_it(
    client: httpx.AsyncClient, obstacle: dict[str, Any], words: tuple[str, ...]
) -> None:
    pose = [0.3, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0]
    response = await client.post("/v1/robots/panda/ik", json={"targets": [pose], "obstacles": [BALL, obstacle]})
    assert_error(response, 422, "obstacles", *words)
    scene = await client.put("/v1/robots/panda/scenes/bad", json={"obstacles": [obstacle]})
    assert_error(scene, 422, "obstacles", *words)


async def test_too_many_obstacles_are_refused(client: httpx.AsyncClient) -> None:
    many = [BALL] * (MAX_OBSTACLES + 1)
    response = await client.post(
        "/v1/robots/panda/ik", json={"targets": [[0.3, 0, 0.5, 1, 0, 0, 0]], "obstacles": many}
    )
    assert_error(response, 422, "obstacles", str(MAX_OBSTACLES))
    await client.put("/v1/robots/panda/scenes/big", json={"obstacles": [BALL] * MAX_OBSTACLES})
    both = await client.post(
        "/v1/robots/panda/ik", json={"targets": [[0.3, 0, 0.5, 1, 0, 0, 0]], "scene": "big", "obstacles": [BALL]}
    )
    assert_error(both, 422, "obstacles", str(MAX_OBSTACLES))
    await client.delete("/v1/robots/panda/scenes/big")


async def test_a_robot_without_collision_spheres_refuses_obstacles(
    client: httpx.AsyncClient, panda: ik_layer.Robot
) -> None:
    body = {"targets": [[0.5, 0.5, 0, 0, 0, 0, 1]], "obstacles": [BALL]}
    refused = await client.post("/v1/robots/planar3/ik", json=body)
    assert_error(refused, 422, "collision spheres", *SERVER_OPTION)
    assert refused.json()["detail"][0]["loc"] == ["body", "obstacles"] and "load_robot" not in refused.text
    selfish = {"targets": [[0.5, 0.5, 0, 0, 0, 0, 1]], "self_collision": 1}
    refused = await client.post("/v1/robots/planar3/ik", json=selfish)
    assert_error(refused, 422, *SERVER_OPTION)
    assert refused.json()["detail"][0]["loc"] == ["body", "self_collision"]
    scene = await client.put("/v1/robots/planar3/scenes/x", json={"obstacles": [BALL]})
    assert_error(scene, 422, "collision spheres", *SERVER_OPTION)
    robots = {r["name"]: r for r in (await client.get("/v1/robots")).json()["robots"]}
    assert (robots["planar3"]["collision"], robots["planar3"]["collision_spheres"]) == ("auto", 0)
    assert panda.collision is not None
    assert robots["panda"]["collision"] == "auto"
    assert robots["panda"]["collision_spheres"] == len(panda.collision.radii) > 0


def with_mesh_collisions(urdf: str) -> str:
    """``urdf`` with a collision mesh on every link ending in a digit (meshes are never read)."""
    mesh = '<collision><geometry><mesh filename="package://arm/meshes/{}.stl"/></geometry></collision>'
    return re.sub(r'<link name="(link\d)"/>', lambda m: f'<link name="{m[1]}">{mesh.format(m[1])}</link>', urdf)


async def test_a_robot_from_a_spec_file_takes_collision_spheres_for_its_mesh_geometry(tmp_path: Path) -> None:
    """A URDF whose collision geometry is meshes has no spheres by default ("auto" covers primitives only); its
    robots.json entry's "collision" gives it some, and it then solves with obstacles over HTTP."""
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(with_mesh_collisions(REGISTRY["planar3"].urdf.read_text()))
    assert "<mesh" in urdf.read_text()
    spheres = str(PLANAR_SPHERES)
    specs = [{"source": str(urdf), "name": "meshes"}, {"source": str(urdf), "name": "balls", "collision": spheres}]
    (tmp_path / "robots.json").write_text(json.dumps(specs))
    async with serving(Settings(robots=[f"@{tmp_path / 'robots.json'}"])) as (app, client):
        listed = {r["name"]: r for r in (await client.get("/v1/robots")).json()["robots"]}
        assert (listed["meshes"]["collision"], listed["meshes"]["collision_spheres"]) == ("auto", 0)
        assert (listed["balls"]["collision"], listed["balls"]["collision_spheres"]) == (spheres, 4)
        balls = app.state.ik.robots["balls"].robot
        q = torch.tensor([[0.3, 0.6, -0.4], [-0.5, -0.8, 0.9]], dtype=balls.dtype)
        targets = matrix_to_pose(balls.fk(q)).tolist()
        ball = {"type": "sphere", "center": [0.5, 0.6, 0.0], "radius": 0.1}
        body = {"targets": targets, "obstacles": [ball], "collision_margin": MARGIN, "self_collision": 1}
        assert_error(await client.post("/v1/robots/meshes/ik", json=body), 422, *SERVER_OPTION)
        response = await client.post("/v1/robots/balls/ik", json=body)
        assert response.status_code == 200, response.text
        answers = response.json()["solutions"]
        assert all(a["success"] for a in answers)
        cost = CollisionCost.of(
            balls,
            [Sphere(ball["center"], ball["radius"])],
            ik_layer.SolveOptions.build(self_collision=1, collision_margin=MARGIN),
        )
        assert cost is not None
        reference = cost.min_distance(balls, torch.tensor([a["q"] for a in answers], dtype=balls.dtype))
        torch.testing.assert_close(reported(answers), reference, atol=1e-12, rtol=0)
        assert bool((reference >= MARGIN).all())


async def test_unknown_scenes_and_bad_names_are_refused(client: httpx.AsyncClient) -> None:
    pose = [0.3, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0]
    unknown = await client.post("/v1/robots/panda/ik", json={"targets": [pose], "scene": "nowhere"})
    assert_error(unknown, 422, "nowhere")
    assert_error(await client.delete("/v1/robots/panda/scenes/nowhere"), 404, "nowhere")
    assert_error(await client.put("/v1/robots/panda/scenes/a%20b", json={"obstacles": []}), 422, "scene")
    assert_error(await client.put("/v1/robots/panda/scenes/" + "x" * 65, json={"obstacles": []}), 422, "scene")
    assert_error(await client.put("/v1/robots/nobody/scenes/x", json={"obstacles": []}), 404, "nobody")
    assert_error(
        await client.put("/v1/robots/panda/scenes/x", content=b"{", headers={"content-type": "application/json"}), 422
    )
    assert (await client.get("/health")).status_code == 200


# --------------------------------------------------------------------------- the Python client


async def test_the_client_sends_obstacles_and_scenes_and_reads_min_distance(
    api: tuple[FastAPI, httpx.AsyncClient], panda: ik_layer.Robot
) -> None:
    from ik_layer.client import AsyncClient, InvalidRequest, RemoteRobotNotFound

    targets = torch.tensor(free_targets(panda, 6, seed=17), dtype=torch.float64)
    async with AsyncClient("http://ik.test", transport=httpx.ASGITransport(app=api[0])) as remote:
        assert await remote.put_scene("panda", "table", SCENE[:1]) == 1
        assert await remote.scenes("panda") == {"table": 1}
        result = await remote.solve("panda", targets.reshape(2, 3, 7), scene="table", obstacles=SCENE[1:])
        assert result.min_distance is not None and result.min_distance.shape == (2, 3)
        reference = least_distance(panda, result.q.reshape(-1, 7).tolist(), LIBRARY_SCENE)
        torch.testing.assert_close(result.min_distance.reshape(-1), reference, atol=1e-12, rtol=0)
        assert result.result().min_distance is result.min_distance
        _least, pairs = CollisionCost.of(panda, LIBRARY_SCENE, ik_layer.SolveOptions.build()).closest(  # type: ignore[union-attr]
            panda, result.q.reshape(-1, 7)
        )
        assert torch.equal(torch.as_tensor(result.closest_pair).reshape(-1, 2), pairs)
        plain = await remote.solve("panda", targets)
        assert plain.min_distance is None
        each = await remote.solve("panda", targets[:2], obstacles=[[SCENE[1]], [SCENE[2]]])
        transport = httpx.ASGITransport(app=api[0])
        async with AsyncClient("http://ik.test", transport=transport, max_targets=1) as one_by_one:
            split = await one_by_one.solve("panda", targets[:2], obstacles=[[SCENE[1]], [SCENE[2]]])  # own ones along
        for answer in (each, split):
            assert answer.min_distance is not None
            for row in range(2):
                alone = least_distance(panda, answer.q[row : row + 1].tolist(), [LIBRARY_SCENE[1 + row]])
                torch.testing.assert_close(answer.min_distance[row : row + 1], alone, atol=1e-12, rtol=0)
        assert await remote.delete_scene("panda", "table") == 1
        with pytest.raises(InvalidRequest, match="table"):
            await remote.solve("panda", targets, scene="table")
        with pytest.raises(InvalidRequest, match="radius"):
            await remote.put_scene("panda", "bad", [{"type": "sphere", "center": [0, 0, 0], "radius": -1}])
        with pytest.raises(RemoteRobotNotFound, match="nobody"):
            await remote.put_scene("nobody", "x", SCENE)
        with pytest.raises(ik_layer.IKLayerError, match="obstacles"):
            await remote.solve("panda", targets, obstacles=[Sphere([0, 0, 0], 0.1)])  # type: ignore[list-item]
