"""Check once, then trust: a call checks its inputs exactly once (one :meth:`Problem.prepare`), and every layer below
takes the checked problem whole: the library's solve, its reference path, goal sets, sets of solutions, the
differentiable layer and an HTTP request."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import torch

import ik_layer
from ik_layer.core import problem as problem_module
from ik_layer.core.options import SolveOptions
from ik_layer.model.lie import matrix_to_pose
from ik_layer.model.robot import Robot
from ik_layer.reference import solve_reference
from ik_layer.server import Settings
from ik_layer.server.decode import ik_job, prepare
from ik_layer.server.exceptions import NoCollisionSpheres
from ik_layer.server.schemas import IKRequest
from tests.conftest import serving


@pytest.fixture(scope="module")
def robot() -> ik_layer.Robot:
    return ik_layer.load_robot("ur5e", collision="auto")


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts of the calls of the checks a request needs: target, options, collision."""
    counts: Counter[str] = Counter()

    def counted(name: str, check: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return check(*args, **kwargs)

        return call

    monkeypatch.setattr(Robot, "check_target", counted("check_target", Robot.check_target))
    build = SolveOptions.build.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(SolveOptions, "build", classmethod(counted("SolveOptions.build", build)))
    monkeypatch.setattr(problem_module, "check_collision", counted("check_collision", problem_module.check_collision))
    one_host_target = problem_module._one_host_target

    def host_target(robot: Robot, pose: Any) -> Any:  # one host pose checked in plain floats: the target's check
        transform = one_host_target(robot, pose)
        counts["check_target"] += transform is not None
        return transform

    monkeypatch.setattr(problem_module, "_one_host_target", host_target)
    yield counts


ONCE = {"check_target": 1, "SolveOptions.build": 1, "check_collision": 1}


def targets(robot: ik_layer.Robot, *shape: int) -> torch.Tensor:
    return robot.fk(robot.random_q(shape, generator=torch.Generator().manual_seed(3)))


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"reference": True},
        {"num_seeds": 2, "obstacles": [ik_layer.Sphere(torch.tensor([0.0, 0.6, 0.3], dtype=torch.float64), 0.05)]},
        {"num_solutions": 3, "objective": "closest", "warm_start": torch.zeros(6, dtype=torch.float64)},
        {"objective": "manipulability"},
    ],
    ids=["engine", "reference", "obstacles", "solutions", "objective"],
)
def test_solve_checks_each_input_once(robot, checks, arguments):
    result = ik_layer.solve(robot, targets(robot, 4), **arguments)
    assert dict(checks) == ONCE
    assert result.success.any()


def test_a_goal_set_checks_its_goals_once(robot, checks):
    goals = targets(robot, 3, 2)  # 3 rows of 2 goals
    result = ik_layer.solve(robot, goals, goal_set=True, warm_start=torch.zeros(3, 6, dtype=torch.float64))
    assert dict(checks) == ONCE
    assert result.q.shape == (3, 6) and result.goal is not None


def test_the_layer_checks_once(robot, checks):
    target = targets(robot, 4).requires_grad_()
    tool = torch.eye(4, dtype=torch.float64)
    tool[2, 3] = 0.1
    q = ik_layer.ik(robot, target, tool=tool, num_seeds=2)
    assert dict(checks) == ONCE
    q.sum().backward()
    assert target.grad is not None and bool(torch.isfinite(target.grad).all())
    assert dict(checks) == ONCE  # the backward pass checks nothing more


def test_a_checked_problem_is_taken_as_it_is_by_the_engine(robot, checks):
    problem = ik_layer.Problem.prepare(robot, targets(robot, 2), ik_layer.SolveOptions(num_seeds=2))
    assert dict(checks) == {"check_target": 1, "check_collision": 1}  # given options: taken as they are
    checks.clear()
    engine = ik_layer.Engine(robot)
    engine.solve(problem, seed=1)
    solve_reference(robot, problem)
    assert not checks


# --------------------------------------------------------------------------- over HTTP


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[httpx.AsyncClient]:
    async with serving(Settings(robots=["ur5e"], max_targets=16, num_seeds=2), timeout=120) as (_, client):
        yield client


def pose_rows(robot: ik_layer.Robot, n: int) -> list[list[float]]:
    return matrix_to_pose(targets(robot, n)).tolist()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"obstacles": [{"type": "sphere", "center": [0.0, 0.6, 0.3], "radius": 0.05}]},
        {"num_solutions": 2, "objective": "closest", "warm_start": [[0.0] * 6] * 3},
    ],
    ids=["plain", "obstacles", "solutions"],
)
@pytest.mark.parametrize("rows", [1, 3])
async def test_an_http_request_is_checked_once(robot, api, checks, fields, rows):
    if "warm_start" in fields:
        fields = {**fields, "warm_start": [[0.0] * 6] * rows}
    response = await api.post("/v1/robots/ur5e/ik", json={"targets": pose_rows(robot, rows), **fields})
    assert response.status_code == 200, response.text
    assert dict(checks) == ONCE
    rows = response.json()["solutions"]  # a list per target with num_solutions
    assert any(s["success"] for row in rows for s in (row if isinstance(row, list) else [row]))


@pytest.mark.anyio
async def test_an_http_refusal_of_obstacles_names_the_server_option(api, checks, monkeypatch):
    bare = ik_layer.load_robot("ur5e", collision=None)
    assert bare.collision is None
    job = ik_job(bare, IKRequest.model_validate({"targets": [[0.3, 0.2, 0.4, 0, 0, 0, 1]], "self_collision": 1}),
                 Settings(robots=["ur5e"]))  # fmt: skip
    with pytest.raises(NoCollisionSpheres, match=r"robots\.json") as refused:
        prepare(bare, [job])
    assert refused.value.loc == ("body", "self_collision") and checks["check_collision"] == 1
