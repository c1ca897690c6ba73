"""``ik_layer.solve(..., timeout=)``: targets unsolved when the time runs out stop with their best configuration so
far and ``status == DEADLINE``, on the engine and the reference path; every answer's ``status`` tells why it
stopped; bad timeouts get clear errors."""

from __future__ import annotations

import math

import pytest
import torch

import ik_layer
from ik_layer import DEADLINE, EXHAUSTED, ROW_STATUS, SOLVED, IKLayerError
from ik_layer.engine.scheduler import lone_budget

BUDGET = {"max_iterations": 10_000, "num_seeds": 64, "restart_after": 50}  # seconds of work per hopeless target


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def off_the_plane(robot: ik_layer.Robot, n: int) -> torch.Tensor:
    """Targets of planar3 (its links in the x-y plane) lifted 0.2 m off its plane: within its reach, never met."""
    target = robot.fk(robot.random_q((n,), generator=gen(1)))
    target[:, 2, 3] += 0.2
    return target


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_targets_unsolved_when_the_time_runs_out_answer_deadline(reference: bool) -> None:
    robot = ik_layer.load_robot("planar3")
    hopeless = off_the_plane(robot, 4)
    result = ik_layer.solve(robot, hopeless, timeout=0.3, reference=reference, generator=gen(2), **BUDGET)
    assert result.status is not None
    assert result.status.tolist() == [DEADLINE] * 4 and not bool(result.success.any())
    # stopped before the budget (on the engine, alone: each target's seeds one after another)
    budget = BUDGET["max_iterations"] if reference else lone_budget(ik_layer.SolveOptions(**BUDGET))
    assert bool((result.iterations < budget).all())
    inside = (result.q >= robot.lower) & (result.q <= robot.upper)
    assert bool(inside.all())
    # the best configuration so far: as close to the target as the plane lets it come
    assert bool((result.position_error < 0.25).all())


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_targets_solved_in_time_answer_solved(reference: bool) -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q((16,), generator=gen(3)))
    result = ik_layer.solve(robot, target, timeout=60, reference=reference, generator=gen(4))
    assert result.status is not None and bool(result.success.all())
    assert result.status.tolist() == [SOLVED] * 16


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_every_answer_says_why_it_stopped(reference: bool) -> None:
    robot = ik_layer.load_robot("planar3")
    reachable = robot.fk(robot.random_q((3,), generator=gen(5)))
    target = torch.cat((reachable, off_the_plane(robot, 2)))
    result = ik_layer.solve(robot, target.reshape(5, 4, 4), reference=reference, generator=gen(6), max_iterations=60)
    assert result.status is not None and result.status.dtype == torch.int32
    assert result.status.tolist() == [SOLVED] * 3 + [EXHAUSTED] * 2
    assert torch.equal(result.success, result.status == SOLVED)
    assert [ROW_STATUS[code] for code in result.status.tolist()] == ["solved"] * 3 + ["exhausted"] * 2


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf, "1", True])
def test_a_bad_timeout_is_refused_naming_it(timeout: object) -> None:
    robot = ik_layer.load_robot("panda")
    with pytest.raises(IKLayerError, match="timeout must be a positive number of seconds"):
        ik_layer.solve(robot, robot.fk(robot.neutral_q()), timeout=timeout)
