"""Stage predict: a job solved in parts on an engine, assembled in row order; gradients; FK poses."""

from __future__ import annotations

import time
from dataclasses import fields, replace

import pytest
import torch

import ik_layer
from ik_layer import ROW_STATUS, IKResult, NonFiniteError, SolveOptions
from ik_layer.engine import Engine
from ik_layer.model.lie import matrix_to_pose
from ik_layer.server.decode import IKJob, prepare
from ik_layer.server.predict import Prediction, assemble, fk_poses, joined

OPTIONS = SolveOptions(num_seeds=2, max_iterations=40)


@pytest.fixture(scope="module")
def ur5e() -> ik_layer.Robot:
    return ik_layer.load_robot("ur5e")


def poses(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random configurations and their (n, 7) end-effector poses."""
    q = robot.random_q((n,), generator=torch.Generator().manual_seed(seed))
    return q, matrix_to_pose(robot.fk(q))


def solve_in_parts(robot: ik_layer.Robot, job: IKJob, cuts: list[int], deadline: float) -> IKResult:
    """Submit ``job`` as parts ending at ``cuts`` on a fresh engine, run it until all parts are done and join
    their answers."""
    engine = Engine(robot, capacity=64, block=8)
    (problem,) = prepare(robot, [job])
    edges = [0, *cuts]
    parts = [
        engine.submit(problem.select(slice(a, b)), seed, deadline)
        for seed, (a, b) in enumerate(zip(edges, cuts, strict=False))
    ]
    engine.run()
    return joined(parts)


def as_result(prediction: Prediction, like: IKResult) -> IKResult:
    """The rows of ``prediction`` as the fields of an IKResult of the dtypes of ``like``'s (its status codes)."""
    codes = {name: code for code, name in ROW_STATUS.items()}
    rows = {f.name: getattr(prediction, f.name) for f in fields(IKResult) if f.name != "status"}
    given = {name: torch.tensor(x, dtype=getattr(like, name).dtype) for name, x in rows.items() if x is not None}
    return IKResult(**given, status=torch.tensor([codes[s] for s in prediction.status], dtype=torch.int32))


def test_parts_assemble_in_row_order_and_equal_a_direct_solve(ur5e: ik_layer.Robot) -> None:
    q, targets = poses(ur5e, 5, seed=1)
    warm = q + 0.01  # next to the answer: every row solves from its warm start, as ik_layer.solve does
    job = IKJob(targets.numpy(), warm, OPTIONS, gradient=True, timeout=10.0)
    prediction = assemble(ur5e, job, solve_in_parts(ur5e, job, [2, 5], time.monotonic() + 60))
    direct = ik_layer.solve(ur5e, targets, OPTIONS, warm_start=warm)
    got = as_result(prediction, direct)
    for f in fields(IKResult):
        torch.testing.assert_close(getattr(got, f.name), getattr(direct, f.name), rtol=0, atol=1e-12)
    assert prediction.status == ["solved"] * 5 and all(prediction.success)
    torch.testing.assert_close(prediction.gradient, ik_layer.target_gradient(ur5e, direct.q), rtol=0, atol=1e-12)


def test_failed_rows_get_zero_gradient_and_their_status(ur5e: ik_layer.Robot) -> None:
    _, targets = poses(ur5e, 2, seed=2)
    targets[1, 0] += 5.0  # 5 m further out: unreachable
    job = IKJob(targets.numpy(), None, OPTIONS, gradient=True, timeout=10.0)
    prediction = assemble(ur5e, job, solve_in_parts(ur5e, job, [2], time.monotonic() + 60))
    assert prediction.success == [True, False]
    assert prediction.status == ["solved", "exhausted"]
    assert prediction.iterations[1] == OPTIONS.max_iterations
    q = torch.tensor(prediction.q, dtype=torch.float64)
    torch.testing.assert_close(prediction.gradient[0], ik_layer.target_gradient(ur5e, q[0]))
    assert bool((prediction.gradient[1] == 0).all())


def test_rows_past_their_deadline_retire_with_status_deadline(ur5e: ik_layer.Robot) -> None:
    _, targets = poses(ur5e, 3, seed=3)
    job = IKJob(targets.numpy(), None, OPTIONS, gradient=False, timeout=10.0)
    prediction = assemble(ur5e, job, solve_in_parts(ur5e, job, [3], time.monotonic() - 1))
    assert prediction.status == ["deadline"] * 3 and not any(prediction.success)
    assert prediction.gradient is None
    # the reported errors are those of the configurations returned
    reached = ur5e.fk(torch.tensor(prediction.q, dtype=torch.float64))[:, :3, 3]
    want = ik_layer.model.lie.pose_to_matrix(targets)[:, :3, 3]
    got = torch.tensor(prediction.position_error, dtype=torch.float64)
    torch.testing.assert_close(got, (reached - want).norm(dim=-1))


def test_jobs_are_checked_together_and_keep_their_own_rows_and_options(ur5e: ik_layer.Robot) -> None:
    q, targets = poses(ur5e, 5, seed=4)
    jobs = [
        IKJob(targets[:2].numpy(), q[:2], OPTIONS, gradient=False, timeout=1.0),
        IKJob(targets[2:].numpy(), None, OPTIONS.replace(num_seeds=1), gradient=False, timeout=1.0),
    ]
    first, second = prepare(ur5e, jobs)
    want = ik_layer.model.lie.pose_to_matrix(targets)
    torch.testing.assert_close(torch.cat([first.target, second.target]), want, rtol=0, atol=0)
    torch.testing.assert_close(first.warm_start, q[:2], rtol=0, atol=0)
    assert second.warm_start is None and (first.options, second.options) == (OPTIONS, OPTIONS.replace(num_seeds=1))
    assert first.weights.shape == (2, 6) and second.weights.shape == (3, 6)
    bad = IKJob(targets[:1].numpy(), torch.full((1, 6), float("nan"), dtype=torch.float64), OPTIONS, False, 1.0)
    with pytest.raises(ik_layer.NonFiniteError, match="warm_start"):
        prepare(ur5e, [jobs[0], bad])


def test_non_finite_solutions_are_refused(ur5e: ik_layer.Robot) -> None:
    _, targets = poses(ur5e, 1, seed=6)
    job = IKJob(targets.numpy(), None, OPTIONS, gradient=False, timeout=10.0)
    answers = solve_in_parts(ur5e, job, [1], time.monotonic() + 60)
    with pytest.raises(NonFiniteError, match="non-finite solutions"):
        assemble(ur5e, job, replace(answers, q=answers.q * torch.nan))


def test_fk_poses_are_the_robot_fk(ur5e: ik_layer.Robot) -> None:
    q, want = poses(ur5e, 3, seed=8)
    got = fk_poses(ur5e, q)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got.shape == (3, 7) and got.device.type == "cpu"


# --------------------------------------------------------------------------- several end-effector frames, floating base

SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
POSITION_ONLY = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64)


@pytest.fixture(scope="module")
def solo(erd_urdf) -> ik_layer.Robot:
    return ik_layer.load_robot(erd_urdf(SOLO), ee_frames=FEET, floating_base=True)


def test_jobs_of_several_frames_keep_their_own_weights(solo: ik_layer.Robot) -> None:
    q, targets = poses(solo, 5, seed=9)  # (5, 4, 7)
    per_foot = torch.ones(4, 6, dtype=torch.float64)
    per_foot[2, 3:] = 0
    jobs = [
        IKJob(targets[:2].numpy(), None, OPTIONS, gradient=False, timeout=1.0, weights=POSITION_ONLY),
        IKJob(targets[2:4].numpy(), q[2:4], OPTIONS, gradient=False, timeout=1.0),
        IKJob(targets[4:].numpy(), None, OPTIONS, gradient=False, timeout=1.0, weights=per_foot),
    ]
    first, second, third = prepare(solo, jobs)
    assert first.target.shape == (2, 4, 4, 4) and first.weights.shape == (2, 4, 6)
    torch.testing.assert_close(first.weights, POSITION_ONLY.expand(2, 4, 6), rtol=0, atol=0)
    torch.testing.assert_close(second.weights, torch.ones(2, 4, 6, dtype=torch.float64), rtol=0, atol=0)
    torch.testing.assert_close(third.weights, per_foot[None], rtol=0, atol=0)
    torch.testing.assert_close(second.warm_start, q[2:4], rtol=0, atol=0)
    torch.testing.assert_close(third.target, solo.fk(q[4:]), rtol=0, atol=1e-12)


def test_feet_solved_in_parts_with_weighted_gradients(solo: ik_layer.Robot) -> None:
    q, targets = poses(solo, 4, seed=10)
    targets[..., 3:] = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)  # position-only: any orientation
    job = IKJob(targets.numpy(), None, SolveOptions(num_seeds=4), gradient=True, timeout=10.0, weights=POSITION_ONLY)
    prediction = assemble(solo, job, solve_in_parts(solo, job, [1, 4], time.monotonic() + 60))
    q_found = torch.tensor(prediction.q, dtype=torch.float64)
    assert q_found.shape == (4, 19) and all(prediction.success) and prediction.status == ["solved"] * 4
    reached = solo.fk(q_found)[..., :3, 3]
    assert float((reached - targets[..., :3]).norm(dim=-1).max()) <= 1e-4
    assert prediction.gradient is not None and prediction.gradient.shape == (4, 18, 4, 6)
    want = ik_layer.target_gradient(solo, q_found, POSITION_ONLY)
    torch.testing.assert_close(prediction.gradient, want, rtol=0, atol=1e-12)
    got = fk_poses(solo, q)
    assert got.shape == (4, 4, 7)
    torch.testing.assert_close(got, matrix_to_pose(solo.fk(q)), rtol=0, atol=0)
