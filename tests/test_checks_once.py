"""Check once, then trust: a call checks its inputs exactly once (one :meth:`Problem.prepare`), and every layer below
takes the checked problem whole: the library's solve, its reference path, goal sets, sets of solutions and the
differentiable layer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import ik_layer
from ik_layer.core import problem as problem_module
from ik_layer.core.options import SolveOptions
from ik_layer.model.robot import Robot
from ik_layer.reference import solve_reference


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
