"""Sets of answers over HTTP: ``num_solutions`` and ``objective`` in IK requests, run as the library's
:class:`ik_layer.core.solutions.SolutionSearch` on the worker's shared engine. Every answer is checked against the
library: each success reaches its target (FK), a target's successes lie apart, rank by the objective, and carry their
own gradient; bad combinations are refused with a 4xx naming the field."""

from __future__ import annotations

import typing
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import torch
from fastapi import FastAPI

import ik_layer
from ik_layer.collision.cost import CollisionCost
from ik_layer.core.solutions import SEPARATION, objective_scores
from ik_layer.model.lie import matrix_to_pose, pose_error
from ik_layer.server import Settings
from ik_layer.server.schemas import Objective
from tests.conftest import serving

pytestmark = pytest.mark.anyio

MAX_WORK = 1_000_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    settings = Settings(
        robots=["ur5e", "panda"], max_targets=16, max_queued_work=MAX_WORK, num_seeds=4, max_iterations=100
    )
    async with serving(settings, timeout=120) as pair:
        yield pair


@pytest.fixture
def client(api: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return api[1]


def robot_of(api: tuple[FastAPI, httpx.AsyncClient], name: str) -> ik_layer.Robot:
    return api[0].state.ik.robots[name].robot


def random_targets(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, list[list[float]]]:
    """``n`` random configurations and their poses ``[x, y, z, qx, qy, qz, qw]``."""
    q = robot.random_q((n,), generator=torch.Generator().manual_seed(seed))
    return q, matrix_to_pose(robot.fk(q)).tolist()


async def solve(client: httpx.AsyncClient, robot: str, **body: Any) -> list[Any]:
    response = await client.post(f"/v1/robots/{robot}/ik", json=body)
    assert response.status_code == 200, response.text
    return response.json()["solutions"]


def joint_distance(robot: ik_layer.Robot, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Joint distance, full-turn and continuous joints compared modulo a turn (the library's SEPARATION's)."""
    gap = a - b
    turned = torch.remainder(gap + torch.pi, 2 * torch.pi) - torch.pi
    return torch.where(robot.continuous | robot.full_turn, turned, gap).norm(dim=-1)


def assert_reached(robot: ik_layer.Robot, answers: list[dict[str, Any]], target: list[float]) -> torch.Tensor:
    """The successful answers' configurations, each checked to reach ``target`` within the default tolerances."""
    q = torch.tensor([a["q"] for a in answers if a["success"]], dtype=robot.dtype)
    want = ik_layer.as_transform(torch.tensor(target, dtype=robot.dtype)).expand(len(q), 4, 4)
    error = pose_error(want, robot.fk(q))
    assert float(error[:, :3].norm(dim=-1).max()) <= 1e-4 and float(error[:, 3:].norm(dim=-1).max()) <= 1e-3
    return q


def test_the_objective_field_is_the_library_objectives() -> None:
    assert typing.get_args(Objective) == ik_layer.OBJECTIVES


async def test_a_ur5e_target_answers_eight_distinct_solutions_with_their_own_gradients(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    ur5e = robot_of(api, "ur5e")
    _, targets = random_targets(ur5e, 3, seed=1)
    sets = await solve(client, "ur5e", targets=targets, num_solutions=8, return_gradient=True)
    assert len(sets) == 3 and all(len(answers) == 8 for answers in sets)
    found = []
    for answers, target in zip(sets, targets, strict=True):
        q = assert_reached(ur5e, answers, target)
        found.append(len(q))
        apart = joint_distance(ur5e, q[:, None], q[None])
        assert bool((apart + torch.eye(len(q), dtype=q.dtype) * SEPARATION >= SEPARATION).all())
        for answer in answers:
            assert answer["status"] == ("solved" if answer["success"] else "exhausted")
            gradient = torch.tensor(answer["gradient"], dtype=ur5e.dtype)
            want = ik_layer.target_gradient(ur5e, torch.tensor(answer["q"], dtype=ur5e.dtype))
            torch.testing.assert_close(gradient, want if answer["success"] else torch.zeros_like(want))
        assert [a["success"] for a in answers] == sorted((a["success"] for a in answers), reverse=True)
    assert sum(found) >= 3 * 6  # a generic UR5e target has 8 branches; the search finds most of them


async def test_closest_answers_rank_by_their_distance_to_the_warm_start(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    panda = robot_of(api, "panda")
    q, targets = random_targets(panda, 4, seed=2)
    seed = panda.wrap(q + 0.3 * torch.randn(q.shape, generator=torch.Generator().manual_seed(3), dtype=q.dtype))
    sets = await solve(client, "panda", targets=targets, warm_start=seed.tolist(), objective="closest", num_solutions=3)
    for answers, target, start in zip(sets, targets, seed, strict=True):
        solved = assert_reached(panda, answers, target)
        assert len(solved) >= 2  # the local minima of the distance near the warm start: one per branch
        distance = joint_distance(panda, solved, start)
        assert distance.tolist() == sorted(distance.tolist())
    one = await solve(client, "panda", targets=targets, warm_start=seed.tolist(), objective="closest")
    assert all(isinstance(answer, dict) for answer in one)  # one solution: the plain shape


async def test_manipulability_answers_rank_by_manipulability(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    ur5e = robot_of(api, "ur5e")
    _, targets = random_targets(ur5e, 2, seed=4)
    sets = await solve(client, "ur5e", targets=targets, objective="manipulability", num_solutions=4)
    for answers, target in zip(sets, targets, strict=True):
        solved = assert_reached(ur5e, answers, target)
        score = objective_scores(ur5e, "manipulability", solved, None)
        assert score.tolist() == sorted(score.tolist())


async def test_slots_left_when_time_runs_out_say_deadline(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    ur5e = robot_of(api, "ur5e")
    _, targets = random_targets(ur5e, 2, seed=5)
    sets = await solve(client, "ur5e", targets=targets, num_solutions=8, timeout=1e-6)
    assert all(a["status"] == "deadline" and not a["success"] for answers in sets for a in answers)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"objective": "closest"}, ["objective", "warm_start"]),
        ({"objective": "posture"}, ["objective", "posture"]),
        ({"objective": "fastest"}, ["objective"]),
        ({"num_solutions": 0}, ["num_solutions"]),
        ({"num_solutions": ik_layer.MAX_SOLUTIONS + 1}, ["num_solutions"]),
        ({"num_solutions": 2.0}, ["num_solutions"]),
    ],
)
async def test_bad_sets_are_refused_naming_the_field(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient, body: dict[str, Any], words: list[str]
) -> None:
    _, targets = random_targets(robot_of(api, "ur5e"), 1, seed=6)
    response = await client.post("/v1/robots/ur5e/ik", json={"targets": targets, **body})
    assert response.status_code == 422, response.text
    assert all(word in response.text for word in words), response.text
    assert len(await solve(client, "ur5e", targets=targets)) == 1  # still serving


async def test_the_work_of_every_round_counts_against_the_limit(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    _, targets = random_targets(robot_of(api, "ur5e"), 16, seed=7)
    plain = await client.post("/v1/robots/ur5e/ik", json={"targets": targets, "max_iterations": 1000})
    assert plain.status_code == 200, plain.text  # 16 x 4 x 1000 fits the limit...
    body = {"targets": targets, "max_iterations": 1000, "num_solutions": 8}
    response = await client.post("/v1/robots/ur5e/ik", json=body)
    assert response.status_code == 413, response.text  # ...its search's rounds do not
    assert "num_solutions" in response.text


# --------------------------------------------------------------------------- goal sets


async def test_each_row_of_goals_answers_its_first_goal_solved_and_says_which(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    ur5e = robot_of(api, "ur5e")
    _, poses = random_targets(ur5e, 3, seed=8)
    away = [5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]  # out of reach
    goals = [[away, poses[0]], [poses[1], poses[2], away], [away]]
    answers = await solve(client, "ur5e", goals=goals, return_gradient=True, max_iterations=60)
    assert [a["goal"] for a in answers[:2]] == [1, 0] and [a["success"] for a in answers] == [True, True, False]
    assert_reached(ur5e, answers[:1], poses[0])
    assert_reached(ur5e, answers[1:2], poses[1])
    assert answers[2]["goal"] == 0 and answers[2]["status"] == "exhausted"
    for answer in answers:
        gradient = torch.tensor(answer["gradient"], dtype=ur5e.dtype)
        want = ik_layer.target_gradient(ur5e, torch.tensor(answer["q"], dtype=ur5e.dtype))
        torch.testing.assert_close(gradient, want if answer["success"] else torch.zeros_like(want))


async def test_goals_ranked_by_closest_pick_the_goal_nearest_the_warm_start(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    panda = robot_of(api, "panda")
    q, poses = random_targets(panda, 4, seed=9)
    goals = [[poses[1], poses[0]], [poses[3], poses[2]]]  # each row's second goal is the warm start's own
    warm = torch.stack([q[0], q[2]])
    first = await solve(client, "panda", goals=goals, warm_start=warm.tolist())
    closest = await solve(client, "panda", goals=goals, warm_start=warm.tolist(), objective="closest")
    assert [a["goal"] for a in first] == [0, 0] and [a["goal"] for a in closest] == [1, 1]
    for answer, start in zip(closest, warm, strict=True):
        assert joint_distance(panda, torch.tensor(answer["q"], dtype=panda.dtype), start) < 1e-6


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"targets": ["<pose>"], "goals": [["<pose>"]]}, 422, ["targets", "goals"]),
        ({}, 422, ["targets", "goals"]),
        ({"goals": [[]]}, 422, ["goals"]),
        ({"goals": [["<pose>"] * 257]}, 422, ["goals"]),
        ({"goals": [["<pose>"]], "num_solutions": 2}, 422, ["num_solutions"]),
        ({"goals": [["<pose>"]], "warm_start": [[0.0] * 6] * 2}, 422, ["rows of goals"]),
        ({"goals": [["<pose>"] * 9, ["<pose>"] * 8]}, 413, ["goals", "16"]),
        ({"goals": [["<pose>", {"position": [0, 0, 0]}]]}, 422, ["goals", "orientation"]),
    ],
)
async def test_bad_goals_are_refused_naming_the_field(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient, body: dict[str, Any], status: int,
    words: list[str],
) -> None:  # fmt: skip
    _, (pose,) = random_targets(robot_of(api, "ur5e"), 1, seed=10)

    def filled(x: Any) -> Any:
        if x == "<pose>":
            return pose
        return [filled(y) for y in x] if isinstance(x, list) else x

    response = await client.post("/v1/robots/ur5e/ik", json={k: filled(v) for k, v in body.items()})
    assert response.status_code == status, response.text
    assert all(word in response.text for word in words), response.text


async def test_each_row_of_goals_keeps_clear_of_its_own_scene(
    api: tuple[FastAPI, httpx.AsyncClient], client: httpx.AsyncClient
) -> None:
    panda = robot_of(api, "panda")
    _, poses = random_targets(panda, 3, seed=11)
    balls = [[{"type": "sphere", "center": [0.0, 0.0, 1.5 + 0.1 * k], "radius": 0.05}] for k in range(2)]
    body = {"goals": [[poses[0], poses[1]], [poses[2]]], "obstacles": balls}
    answers = await solve(client, "panda", **body)
    for answer, k in zip(answers, range(2), strict=True):
        scene = [ik_layer.Sphere([0.0, 0.0, 1.5 + 0.1 * k], 0.05)]
        cost = CollisionCost.of(panda, scene, ik_layer.SolveOptions())
        assert cost is not None
        want = cost.min_distance(panda, torch.tensor([answer["q"]], dtype=panda.dtype))
        assert answer["success"] and answer["min_distance"] == pytest.approx(float(want), abs=1e-12)
