"""Stages predict and unbatch: one solver call for a batch of jobs equals a direct ik_layer.solve, split per job."""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

import ik_layer
from ik_layer import IKResult, NonFiniteError, SolveOptions
from ik_layer.lie import matrix_to_pose
from ik_layer.server.decode import IKJob
from ik_layer.server.predict import Prediction, fk_poses, predict
from ik_layer.server.unbatch import unbatch

OPTIONS = SolveOptions(num_seeds=2, max_iterations=40)


@pytest.fixture(scope="module")
def ur5e() -> ik_layer.Robot:
    return ik_layer.load_robot("ur5e")


def poses(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random configurations and their (n, 7) end-effector poses."""
    q = robot.random_q((n,), generator=torch.Generator().manual_seed(seed))
    return q, matrix_to_pose(robot.fk(q))


def assert_result_equal(got: IKResult, want: IKResult) -> None:
    for f in fields(IKResult):
        torch.testing.assert_close(getattr(got, f.name), getattr(want, f.name), rtol=0, atol=0)


def test_predict_then_unbatch_is_a_direct_solve_split_per_job(ur5e: ik_layer.Robot) -> None:
    q_a, targets_a = poses(ur5e, 2, seed=1)
    _, targets_b = poses(ur5e, 3, seed=2)
    warm_a = q_a + 0.01
    jobs = [
        IKJob(targets=targets_a, warm_start=warm_a, options=OPTIONS, gradient=True),
        IKJob(targets=targets_b, warm_start=None, options=OPTIONS, gradient=False),
    ]
    prediction = predict(ur5e, jobs, generator=torch.Generator().manual_seed(5))

    generator = torch.Generator().manual_seed(5)  # the same draws: random warm starts for job b, then the seeds
    warm = torch.cat([warm_a, ur5e.random_q((3,), generator)])
    direct = ik_layer.solve(ur5e, torch.cat([targets_a, targets_b]), OPTIONS, warm_start=warm, generator=generator)
    assert_result_equal(prediction.result, direct)
    assert prediction.asked.tolist() == [True, True, False, False, False]
    torch.testing.assert_close(prediction.gradient, ik_layer.target_gradient(ur5e, direct.q[:2]), rtol=0, atol=0)

    a, b = unbatch(prediction, jobs)
    assert_result_equal(a.result, IKResult(**{f.name: getattr(direct, f.name)[:2] for f in fields(IKResult)}))
    assert_result_equal(b.result, IKResult(**{f.name: getattr(direct, f.name)[2:] for f in fields(IKResult)}))
    assert a.asked.tolist() == [True, True] and b.asked.tolist() == [False, False, False]
    torch.testing.assert_close(a.gradient, prediction.gradient, rtol=0, atol=0)
    assert b.gradient.shape == (0, ur5e.dof, 6)
    assert bool(a.result.success.all())  # warm started next to the answer


def test_without_warm_starts_or_gradients_the_solver_draws_everything(ur5e: ik_layer.Robot) -> None:
    _, targets = poses(ur5e, 4, seed=3)
    jobs = [IKJob(targets[:1], None, OPTIONS, False), IKJob(targets[1:], None, OPTIONS, False)]
    prediction = predict(ur5e, jobs, generator=torch.Generator().manual_seed(9))
    direct = ik_layer.solve(ur5e, targets, OPTIONS, generator=torch.Generator().manual_seed(9))
    assert_result_equal(prediction.result, direct)
    assert prediction.gradient.shape == (0, ur5e.dof, 6) and not bool(prediction.asked.any())
    assert [part.result.q.shape[0] for part in unbatch(prediction, jobs)] == [1, 3]


def test_unbatch_gives_each_job_its_own_gradient_block() -> None:
    jobs = [IKJob(torch.zeros(n, 7), None, OPTIONS, asked) for n, asked in ((1, True), (2, False), (2, True))]
    result = IKResult(
        q=torch.arange(5.0)[:, None],
        success=torch.tensor([True, False, True, False, True]),
        position_error=torch.arange(5.0) / 10,
        orientation_error=torch.arange(5.0) / 100,
        iterations=torch.arange(5),
    )
    gradient = torch.arange(3.0)[:, None, None].expand(3, 1, 6)
    asked = torch.tensor([True, False, False, True, True])
    parts = unbatch(Prediction(result=result, asked=asked, gradient=gradient), jobs)
    assert [p.result.q.squeeze(-1).tolist() for p in parts] == [[0.0], [1.0, 2.0], [3.0, 4.0]]
    assert [p.result.iterations.tolist() for p in parts] == [[0], [1, 2], [3, 4]]
    assert [p.gradient[:, 0, 0].tolist() for p in parts] == [[0.0], [], [1.0, 2.0]]


def test_jobs_of_different_options_are_refused(ur5e: ik_layer.Robot) -> None:
    _, targets = poses(ur5e, 2, seed=4)
    jobs = [IKJob(targets[:1], None, OPTIONS, False), IKJob(targets[1:], None, OPTIONS.replace(num_seeds=3), False)]
    with pytest.raises(ValueError, match="equal solver options"):
        predict(ur5e, jobs)


def test_non_finite_solutions_are_refused(ur5e: ik_layer.Robot, monkeypatch: pytest.MonkeyPatch) -> None:
    _, targets = poses(ur5e, 1, seed=6)
    solved = ik_layer.solve(ur5e, targets, OPTIONS)
    broken = IKResult(**{**{f.name: getattr(solved, f.name) for f in fields(IKResult)}, "q": solved.q * torch.nan})
    monkeypatch.setattr(ik_layer, "solve", lambda *args, **kwargs: broken)
    with pytest.raises(NonFiniteError, match="non-finite solutions"):
        predict(ur5e, [IKJob(targets, None, OPTIONS, False)])


def test_fk_poses_are_the_robot_fk(ur5e: ik_layer.Robot) -> None:
    q, want = poses(ur5e, 3, seed=8)
    got = fk_poses(ur5e, q)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got.shape == (3, 7) and got.device.type == "cpu"
