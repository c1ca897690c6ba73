"""The seed table (:mod:`ik_layer.core.seeding`): a target with no given start begins at the stored configuration
nearest it, on the engine (the kernel's lookup, both stores, both dtypes) as on the reference path; the lookup is the
brute-force nearest by the full distance; the table is per placement of the robot, absent with a floating base, and
cuts iterations."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import torch

import ik_layer
from ik_layer.core.problem import Problem
from ik_layer.core.seeding import ROTATION_WEIGHT, TABLE_SIZE, nearest_starts, seed_table
from ik_layer.engine import Engine

F64 = torch.float64


def targets_and_weights(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reachable targets and mixed weights: random ones, some rows position-only, some orientation-light."""
    g = torch.Generator().manual_seed(seed)
    target = robot.fk(robot.random_q((n,), generator=g))
    frames = 1 if robot.ee_frames is None else len(robot.ee_frames)
    weights = torch.rand(n, frames, 6, generator=g, dtype=robot.dtype) + 0.01
    weights[::3, :, 3:] = 0.0  # position-only
    weights[1::3, :, 3:] *= 0.01
    return target, weights.reshape(n, 6) if robot.ee_frames is None else weights


def full_distance(target: torch.Tensor, weights: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """(n, M) the distance the lookup minimises, written out: per frame the weighted squared position distance plus
    ROTATION_WEIGHT times the mean rotation weight times |R - R_j|_F^2."""
    n, frames = target.shape[0], pose.shape[1]
    target, weights = target.reshape(n, 1, frames, 4, 4), weights.reshape(n, 1, frames, 6)
    pos = (weights[..., :3] * (target[..., :3, 3] - pose[None, ..., 9:]) ** 2).sum(-1)
    rot = ((target[..., :3, :3].reshape(n, 1, frames, 9) - pose[None, ..., :9]) ** 2).sum(-1)
    return (pos + ROTATION_WEIGHT * weights[..., 3:].mean(-1) * rot).sum(-1)


@pytest.mark.parametrize("name", ["panda", "ur5e"])
def test_the_lookup_is_the_nearest_entry_by_the_full_distance(name: str) -> None:
    robot = ik_layer.load_robot(name)
    table = seed_table(robot)
    assert table is not None and table.q.shape == (TABLE_SIZE, robot.nq)
    target, weights = targets_and_weights(robot, 300, seed=1)
    picked = nearest_starts(table, target, weights)
    distance = full_distance(target, weights, table.pose)
    rows = (picked[:, None] == table.q[None]).all(-1).float().argmax(-1)  # the entry each start is
    assert torch.equal(table.q[rows], picked)
    best = distance.min(-1).values
    torch.testing.assert_close(distance.gather(1, rows[:, None])[:, 0], best, rtol=1e-12, atol=1e-12)
    pose = robot.fk(table.q)  # the table's poses are its configurations'
    torch.testing.assert_close(table.pose[:, 0, 9:], pose[:, :3, 3], rtol=0, atol=0)
    torch.testing.assert_close(table.pose[:, 0, :9], pose[:, :3, :3].reshape(-1, 9), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("store", ["host", "tensor"])
def test_the_kernel_starts_at_the_references_nearest_entry(store: str, dtype: torch.dtype) -> None:
    """With one seed and no iterations the answer is the start: the kernel's pick, on either store, is the reference
    path's."""
    robot = ik_layer.load_robot("panda", dtype=dtype)
    target, weights = targets_and_weights(robot, 200, seed=2)
    engine = Engine(robot, capacity=200, store=store)
    kernel = ik_layer.solve(robot, target, weights=weights, max_iterations=0, num_seeds=1, engine=engine)
    reference = ik_layer.solve(robot, target, weights=weights, max_iterations=0, num_seeds=1, reference=True)
    table = seed_table(robot)
    assert table is not None and table.q.dtype == dtype
    expected = nearest_starts(table, target, weights)
    assert torch.equal(kernel.q, expected) and torch.equal(reference.q, expected)


def test_several_frames_look_up_every_frame() -> None:
    robot = ik_layer.load_robot("panda", ee_frames=["panda_link4", "panda_hand_tcp"])
    target, weights = targets_and_weights(robot, 100, seed=3)
    table = seed_table(robot)
    assert table is not None and table.pose.shape == (TABLE_SIZE, 2, 12)
    kernel = ik_layer.solve(robot, target, weights=weights, max_iterations=0)
    picked = nearest_starts(table, target, weights)
    assert torch.equal(kernel.q, picked)
    rows = (picked[:, None] == table.q[None]).all(-1).float().argmax(-1)
    distance = full_distance(target, weights, table.pose)
    torch.testing.assert_close(distance.gather(1, rows[:, None])[:, 0], distance.min(-1).values, rtol=1e-12, atol=0)


def test_given_starts_and_problems_that_decline_the_table_start_elsewhere() -> None:
    robot = ik_layer.load_robot("panda")
    target, _ = targets_and_weights(robot, 50, seed=4)
    table = seed_table(robot)
    assert table is not None
    warm = robot.random_q((50,), generator=torch.Generator().manual_seed(5))
    given = ik_layer.solve(robot, target, warm_start=warm, max_iterations=0)
    assert torch.equal(given.q, robot.wrap(warm))
    problem = replace(Problem.prepare(robot, target, max_iterations=0), nearest_start=False)
    drawn = Engine(robot, capacity=50).solve(problem, seed=6)
    assert not (drawn.q[:, None] == table.q[None]).all(-1).any()  # uniform draws, none a table entry


def test_the_table_is_per_placement_and_absent_with_a_floating_base(erd_urdf) -> None:
    robot = ik_layer.load_robot("panda")
    assert seed_table(robot) is seed_table(robot)
    first = seed_table(robot)
    robot.to(torch.float32)
    moved = seed_table(robot)
    assert moved is not None and first is not None and moved.q.dtype == torch.float32
    torch.testing.assert_close(moved.q, first.q.float(), rtol=1e-6, atol=1e-6)  # drawn the same way
    solo = ik_layer.load_robot(
        erd_urdf("solo_description/robots/solo12.urdf"), ee_frames=["FL_FOOT"], floating_base=True
    )
    assert seed_table(solo) is None


@pytest.mark.parametrize("name", ["panda", "ur5e"])
def test_starts_from_the_table_cut_the_iterations(name: str) -> None:
    robot = ik_layer.load_robot(name)
    target = robot.fk(robot.random_q((1000,), generator=torch.Generator().manual_seed(7)))
    problem = Problem.prepare(robot, target)
    engine = Engine(robot, capacity=1000)
    nearest = engine.solve(problem, seed=8)
    uniform = engine.solve(replace(problem, nearest_start=False), seed=8)
    assert nearest.success.float().mean() >= uniform.success.float().mean() - 0.001
    assert nearest.iterations.float().mean() < 0.85 * uniform.iterations.float().mean()


def test_targets_no_launch_reached_by_their_deadline_are_measured_at_a_drawn_start() -> None:
    """Under a deadline on the CPU, slots never started are evaluated at a start drawn in the limits, not at the table's
    nearest entry (the lookup costs several times the evaluation, and these targets are not solved either way); each
    answers DEADLINE after no iteration, its errors those of its configuration."""
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q((1000,), generator=torch.Generator().manual_seed(9)))
    table = seed_table(robot)
    assert table is not None
    engine = Engine(robot, capacity=1000)
    late = engine.solve(Problem.prepare(robot, target), seed=10, deadline=time.monotonic())  # no time to iterate
    assert late.status is not None and late.status.tolist() == [ik_layer.DEADLINE] * 1000
    assert not bool(late.iterations.any())
    assert not (late.q[:, None] == table.q[None]).all(-1).any()  # uniform draws, none a table entry
    assert bool(((late.q >= robot.lower) & (late.q <= robot.upper)).all())
    reached = robot.fk(late.q)
    torch.testing.assert_close(
        late.position_error, (reached[:, :3, 3] - target[:, :3, 3]).norm(dim=-1), rtol=1e-9, atol=1e-12
    )
