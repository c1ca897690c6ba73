"""Tests of the batched IK solver ``ik_layer.solve``.

Pinocchio is the oracle: every solution is checked with ``pin.forwardKinematics``
on ``robot.model`` (float64), never only with the solver's own flag. Targets are
forward kinematics of seeded random configurations inside the joint limits, so
they are reachable by construction.
"""

from __future__ import annotations

import math
from functools import cache, partial
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, IKResult, NonFiniteError, ShapeError, SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.model.lie import matrix_to_pose, pose_error

solve = ik_layer.solve  # replaced per test by the `path` fixture: every test runs on both paths


@pytest.fixture(params=[False, True], ids=["engine", "reference"], autouse=True)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the test on the fused engine and on the eager reference path (``reference=True``)."""
    monkeypatch.setitem(globals(), "solve", partial(ik_layer.solve, reference=request.param))


POS_TOL, ORI_TOL = 1e-4, 1e-3
# How far Pinocchio's float64 errors may sit from the solver's own, per dtype: [m], [rad].
SLACK = {torch.float64: (1e-9, 1e-9), torch.float32: (2e-6, 2e-5)}
ROBOTS = ik_layer.builtin_robots()


def gen(seed: int) -> torch.Generator:
    """A local, seeded CPU generator (never the global RNG)."""
    return torch.Generator().manual_seed(seed)


@cache
def robot_of(name: str, dtype: torch.dtype = torch.float64) -> ik_layer.Robot:
    """Built-in robots are immutable in these tests: load each (name, dtype) once."""
    return ik_layer.load_robot(name, dtype=dtype)


def reachable(robot: ik_layer.Robot, shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Configurations (*shape, dof) inside the limits and their poses ``T_base_ee`` (*shape, 4, 4)."""
    q = robot.random_q(shape, generator=gen(seed))
    return q, robot.fk(q)


def pin_error(robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor) -> np.ndarray:
    """Pinocchio's 6-D error ``[p_t - p; log3(R_t R^T)]`` (n, 6) of ``q`` (..., dof) w.r.t. ``target`` (..., 4, 4)."""
    model = robot.model
    data = model.createData()
    fid = model.getFrameId(robot.ee_frame)
    q_pin = robot.to_pinocchio_q(q).detach().double().reshape(-1, robot.model.nq).numpy()
    t = target.detach().double().reshape(-1, 4, 4).numpy()
    out = np.empty((q_pin.shape[0], 6))
    for i, qi in enumerate(q_pin):
        pin.forwardKinematics(model, data, qi)
        pin.updateFramePlacements(model, data)
        pose = data.oMf[fid]
        out[i, :3] = t[i, :3, 3] - pose.translation
        out[i, 3:] = pin.log3(t[i, :3, :3] @ pose.rotation.T)
    return out


def pin_errors(
    robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio's position [m] and orientation [rad] error norms (n,), over the axes with non-zero weight."""
    e = pin_error(robot, q, target)
    if weights is not None:
        e = e * (np.broadcast_to(weights.double().numpy(), e.shape) > 0)
    return np.linalg.norm(e[:, :3], axis=1), np.linalg.norm(e[:, 3:], axis=1)


def assert_verified(
    robot: ik_layer.Robot,
    res: IKResult,
    target: torch.Tensor,
    *,
    weights: torch.Tensor | None = None,
    max_failures: int = 0,
    pos_tol: float = POS_TOL,
    ori_tol: float = ORI_TOL,
) -> None:
    """Check a result against Pinocchio row by row: reported errors, success flag, failures, limits."""
    slack_p, slack_o = SLACK[robot.dtype]
    pos, ori = pin_errors(robot, res.q, target, weights)
    ok = res.success.reshape(-1).numpy()
    np.testing.assert_allclose(res.position_error.reshape(-1).double().numpy(), pos, rtol=0, atol=slack_p)
    np.testing.assert_allclose(res.orientation_error.reshape(-1).double().numpy(), ori, rtol=0, atol=slack_o)
    # The flag agrees with the oracle: flagged rows are within tolerance, the others are not.
    assert (pos[ok] <= pos_tol + slack_p).all() and (ori[ok] <= ori_tol + slack_o).all()
    assert ((pos[~ok] > pos_tol - slack_p) | (ori[~ok] > ori_tol - slack_o)).all()
    failures = int((~ok).sum())
    assert failures <= max_failures, f"{failures} of {ok.size} reachable targets failed; worst pos {pos.max():.2e} m"
    assert_in_limits(robot, res.q)


def assert_in_limits(robot: ik_layer.Robot, q: torch.Tensor) -> None:
    """Limited joints inside [lower, upper] exactly; continuous joints in (-pi, pi]."""
    assert torch.isfinite(q).all()
    flat = q.reshape(-1, robot.dof)
    cont = robot.continuous
    assert (flat[:, ~cont] >= robot.lower[~cont]).all() and (flat[:, ~cont] <= robot.upper[~cont]).all()
    assert (flat[:, cont] > -math.pi).all() and (flat[:, cont] <= math.pi).all()


# --------------------------------------------------------------------------- reachable targets


@pytest.mark.parametrize("name", ROBOTS)
def test_reachable_targets_verified_by_pinocchio_float64(name: str) -> None:
    robot = robot_of(name)
    _, target = reachable(robot, (300,), seed=1)
    res = solve(robot, target, generator=gen(2))
    assert_verified(robot, res, target, max_failures=1)
    assert res.success.dtype == torch.bool and res.iterations.dtype == torch.int64
    assert res.q.dtype == torch.float64


def test_float32_successes_hold_when_checked_in_float64(request: pytest.FixtureRequest) -> None:
    """A float32 solver rounds its own errors by about 1e-7 m: it holds them to 99 % of the tolerances
    (``LM.float32_margin``), so that no reported success fails a float64 check against the float64 targets
    (without the margin: 1 of these 20,000 panda targets, 1.00010e-4 m for 1e-4)."""
    robot64, robot32 = robot_of("panda"), robot_of("panda", torch.float32)
    n = 2000 if request.node.callspec.params["path"] else 20_000  # the eager reference path: fewer
    target = robot64.fk(robot64.random_q((n,), generator=gen(1)))
    res = solve(robot32, target.float(), generator=gen(3))
    e = pose_error(target, robot64.fk(res.q.double()))
    held = (e[:, :3].norm(dim=-1) <= 1e-4) & (e[:, 3:].norm(dim=-1) <= 1e-3)
    assert float(res.success.double().mean()) >= 0.999
    assert not bool((res.success & ~held).any()), f"{int((res.success & ~held).sum())} false successes"


@pytest.mark.parametrize("name", ROBOTS)
def test_reachable_targets_float32_reach_the_tolerances(name: str) -> None:
    robot = robot_of(name, torch.float32)
    _, target = reachable(robot, (300,), seed=3)
    res = solve(robot, target, generator=gen(4))
    assert res.q.dtype == torch.float32 and res.position_error.dtype == torch.float32
    assert_verified(robot, res, target, max_failures=1)


def test_one_targets_default_weights_are_shared_and_left_as_they_are() -> None:
    """One target's default weights are one row of ones shared by every problem (made once: a lone solve's costliest
    tensor); solves of one target, sets of solutions and the layer's gradients leave it ones."""
    robot = robot_of("panda")
    q, target = reachable(robot, (3,), seed=40)
    shared = Problem.prepare(robot, target[0]).weights
    assert Problem.prepare(robot, target[1]).weights is shared
    assert solve(robot, target[0], generator=gen(41)).success
    assert solve(robot, target[1], num_solutions=2, objective="closest", warm_start=q[0], generator=gen(42)).success[0]
    pose = target[2].clone().requires_grad_()
    ik_layer.ik(robot, pose, generator=gen(43)).sum().backward()
    assert pose.grad is not None and bool(pose.grad.isfinite().all())
    assert torch.equal(shared, torch.ones(1, 6, dtype=torch.float64))


def test_failed_rows_report_the_budget_as_iterations() -> None:
    robot = robot_of("ur5e")
    _, target = reachable(robot, (20,), seed=5)
    res = solve(robot, target, max_iterations=3, generator=gen(6))
    assert (res.iterations <= 3).all()
    assert (res.iterations[~res.success] == 3).all()
    assert_verified(robot, res, target, max_failures=20)


# --------------------------------------------------------------------------- closed form


def planar3_solutions(x: float, y: float, yaw: float) -> list[np.ndarray]:
    """Both inverse kinematics solutions of the planar 0.5/0.4/0.3 m arm for tip pose (x, y, yaw)."""
    a, b, c = 0.5, 0.4, 0.3
    wx, wy = x - c * math.cos(yaw), y - c * math.sin(yaw)
    cos2 = (wx * wx + wy * wy - a * a - b * b) / (2 * a * b)
    sols = []
    for q2 in (math.acos(max(-1.0, min(1.0, cos2))), -math.acos(max(-1.0, min(1.0, cos2)))):
        q1 = math.atan2(wy, wx) - math.atan2(b * math.sin(q2), a + b * math.cos(q2))
        sols.append(np.array([q1, q2, yaw - q1 - q2]))
    return sols


def angle_gap(a: np.ndarray, b: np.ndarray) -> float:
    """Largest joint difference modulo 2 pi [rad]."""
    d = np.remainder(a - b + np.pi, 2 * np.pi) - np.pi
    return float(np.abs(d).max())


def test_planar3_matches_closed_form() -> None:
    robot = robot_of("planar3")
    q_true = robot.random_q((200,), generator=gen(7))
    # Keep away from the straight / folded elbow, where the two branches merge.
    q_true = q_true[q_true[:, 1].sin().abs() > 0.2][:120]
    target = robot.fk(q_true)
    res = solve(robot, target, generator=gen(8))
    assert_verified(robot, res, target)
    branches = set()
    for q, t in zip(res.q.numpy(), target.numpy(), strict=False):
        yaw = math.atan2(t[1, 0], t[0, 0])
        gaps = [angle_gap(q, s) for s in planar3_solutions(t[0, 3], t[1, 3], yaw)]
        assert min(gaps) < 1e-2, f"q={q} is neither closed-form solution (gaps {gaps})"
        branches.add(int(np.argmin(gaps)))
    assert branches == {0, 1}, "random seeds should find both elbow branches over the batch"


def test_planar3_target_stays_in_plane() -> None:
    robot = robot_of("planar3")
    _, target = reachable(robot, (50,), seed=9)
    assert torch.allclose(target[:, 2, 3], torch.zeros(50, dtype=torch.float64))
    res = solve(robot, target, generator=gen(10))
    assert res.success.all()


# --------------------------------------------------------------------------- warm starts


@pytest.mark.parametrize("name", ["panda", "ur5e"])
def test_warm_start_from_the_answer_takes_no_iteration(name: str) -> None:
    robot = robot_of(name)
    q, target = reachable(robot, (100,), seed=11)
    res = solve(robot, target, warm_start=q, generator=gen(12))
    assert res.success.all()
    assert (res.iterations == 0).all()
    torch.testing.assert_close(res.q, q, rtol=0, atol=1e-12)
    res0 = solve(robot, target, warm_start=q, max_iterations=0, generator=gen(12))
    assert res0.success.all() and (res0.iterations == 0).all()


@pytest.mark.parametrize("name", ["panda", "ur5e"])
def test_warm_start_near_the_answer_converges_in_few_iterations(name: str) -> None:
    robot = robot_of(name)
    q, target = reachable(robot, (100,), seed=13)
    near = robot.wrap(q + 0.01 * torch.randn(q.shape, generator=gen(14), dtype=q.dtype))
    res = solve(robot, target, warm_start=near, generator=gen(15))
    assert_verified(robot, res, target)
    assert res.iterations.max() <= 4
    assert res.iterations.double().median() <= 2
    # It stays on the nearby solution rather than jumping to another branch.
    assert (res.q - q).abs().max() < 0.1


# --------------------------------------------------------------------------- weights


def test_position_only_target() -> None:
    robot = robot_of("panda")
    _, target = reachable(robot, (100,), seed=16)
    # Replace the orientations by unrelated ones: they must not matter.
    _, other = reachable(robot, (100,), seed=17)
    target = target.clone()
    target[:, :3, :3] = other[:, :3, :3]
    w = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64)
    res = solve(robot, target, weights=w, generator=gen(18))
    assert_verified(robot, res, target, weights=w)
    assert (res.orientation_error == 0).all()
    full_ori = pin_errors(robot, res.q, target)[1]
    assert np.median(full_ori) > 0.1  # the orientation really was ignored


def test_orientation_only_target() -> None:
    robot = robot_of("ur5e")
    _, target = reachable(robot, (100,), seed=19)
    target = target.clone()
    target[:, :3, 3] += torch.tensor([5.0, 0, 0], dtype=torch.float64)  # unreachable position, ignored
    w = torch.tensor([0.0, 0, 0, 1, 1, 1], dtype=torch.float64)
    res = solve(robot, target, weights=w, generator=gen(20))
    assert_verified(robot, res, target, weights=w)
    assert (res.position_error == 0).all()


def test_weighted_targets_report_unscaled_errors() -> None:
    robot = robot_of("panda")
    _, target = reachable(robot, (100,), seed=21)
    w = torch.tensor([10.0, 10, 10, 0.5, 0.5, 0.5], dtype=torch.float64)
    res = solve(robot, target, weights=w, generator=gen(22))
    # Non-unit weights change the cost, not the reported errors or the tolerances.
    assert_verified(robot, res, target, weights=w, max_failures=1)


def test_single_axis_dropped() -> None:
    robot = robot_of("ur5e")
    _, target = reachable(robot, (60,), seed=23)
    target = target.clone()
    target[:, 2, 3] += 3.0  # z far out of reach, but its weight is zero
    w = torch.tensor([1.0, 1, 0, 1, 1, 1], dtype=torch.float64)
    res = solve(robot, target, weights=w, generator=gen(24))
    e = pin_error(robot, res.q, target)
    assert res.success.all()
    assert (np.linalg.norm(e[:, :2], axis=1) <= POS_TOL).all()
    assert (np.abs(e[:, 2]) > 1.0).all()  # z really was ignored
    assert_verified(robot, res, target, weights=w)


def test_per_target_weights_broadcast() -> None:
    robot = robot_of("ur5e")
    _, target = reachable(robot, (2, 30), seed=25)
    target = target.clone()
    target[0, :, :3, 3] += 5.0  # first row of targets: position unreachable, orientation only
    w = torch.tensor([[0.0, 0, 0, 1, 1, 1], [1.0, 1, 1, 1, 1, 1]], dtype=torch.float64)[:, None, :]
    res = solve(robot, target, weights=w, generator=gen(26))
    assert res.success.shape == (2, 30)
    assert_verified(robot, res, target, weights=w.expand(2, 30, 6).reshape(-1, 6))
    assert (res.position_error[0] == 0).all() and (res.position_error[1] > 0).all()


# --------------------------------------------------------------------------- unreachable


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_unreachable_targets_fail_with_finite_values(dtype: torch.dtype) -> None:
    robot = robot_of("panda", dtype)
    _, target = reachable(robot, (12,), seed=27)
    target = target.clone()
    target[:, :3, 3] += torch.tensor([5.0, 0, 0], dtype=dtype)
    res = solve(robot, target, max_iterations=60, generator=gen(28))
    assert not res.success.any()
    # The engine gives a target provably out of reach one seed of restart_after (40) iterations; not the reference.
    assert (res.iterations == (60 if solve.keywords["reference"] else 40)).all()
    for x in (res.q, res.position_error, res.orientation_error):
        assert torch.isfinite(x).all()
    assert_in_limits(robot, res.q)
    assert (res.position_error > 3.0).all()  # 5 m out, reach under 1 m from the base
    assert_verified(robot, res, target, max_failures=12)  # errors consistent with Pinocchio FK


# --------------------------------------------------------------------------- joint limits


CONTINUOUS_URDF = """<?xml version="1.0"?>
<robot name="cont4">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="l3"/><link name="l4"/><link name="tip"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 0 1"/><limit lower="-2.5" upper="2.5" effort="1" velocity="1"/></joint>
  <joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 1 0"/></joint>
  <joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/>
    <origin xyz="0 0 0.4"/><axis xyz="0 1 0"/><limit lower="-2.0" upper="2.0" effort="1" velocity="1"/></joint>
  <joint name="j4" type="continuous"><parent link="l3"/><child link="l4"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 0 1"/></joint>
  <joint name="jt" type="fixed"><parent link="l4"/><child link="tip"/><origin xyz="0.1 0 0.05"/></joint>
</robot>
"""


@pytest.fixture
def continuous_robot(tmp_path: Path) -> ik_layer.Robot:
    path = tmp_path / "cont4.urdf"
    path.write_text(CONTINUOUS_URDF)
    robot = ik_layer.load_robot(path, "tip")
    assert robot.continuous.tolist() == [False, True, False, True]
    return robot


def test_continuous_joints_are_wrapped(continuous_robot: ik_layer.Robot) -> None:
    robot = continuous_robot
    q, target = reachable(robot, (150,), seed=29)
    res = solve(robot, target, generator=gen(30))
    assert_verified(robot, res, target, max_failures=1)
    # A warm start several turns away on the continuous joints comes back wrapped, already solved.
    turns = torch.tensor([0.0, 4 * math.pi, 0.0, -6 * math.pi], dtype=torch.float64)
    res = solve(robot, target, warm_start=q + turns, generator=gen(31))
    assert (res.iterations == 0).all()
    assert_in_limits(robot, res.q)
    torch.testing.assert_close(res.q, q, rtol=0, atol=1e-9)


def test_limits_hold_for_targets_just_outside_reach() -> None:
    robot = robot_of("ur5e")
    q = robot.random_q((40,), generator=gen(32))
    q = q.clone()
    q[:, 1] = robot.upper[1]  # configurations on a limit ...
    target = robot.fk(q)
    target[:, :3, 3] += 0.05  # ... and targets a little beyond them
    res = solve(robot, target, max_iterations=40, generator=gen(33))
    assert_in_limits(robot, res.q)
    assert_verified(robot, res, target, max_failures=40)


# --------------------------------------------------------------------------- input forms and shapes


def test_pose_and_matrix_targets_give_the_same_answer() -> None:
    robot = robot_of("panda")
    _, target = reachable(robot, (60,), seed=34)
    a = solve(robot, target, generator=gen(35))
    b = solve(robot, matrix_to_pose(target), generator=gen(35))
    assert torch.equal(a.success, b.success) and torch.equal(a.iterations, b.iterations)
    torch.testing.assert_close(a.q, b.q, rtol=0, atol=1e-6)
    # Quaternions within QUATERNION_NORM_TOLERANCE of unit norm are normalised: the same pose; farther ones raise.
    pose = matrix_to_pose(target)
    pose[:, 3:] *= 1.009
    c = solve(robot, pose, generator=gen(35))
    torch.testing.assert_close(a.q, c.q, rtol=0, atol=1e-6)
    pose[:, 3:] *= 3.0
    with pytest.raises(IKLayerError, match=r"target quaternion has norm 3\.027"):
        solve(robot, pose, generator=gen(35))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0,)])
@pytest.mark.parametrize("form", ["matrix", "pose"])
def test_batch_shapes(shape: tuple[int, ...], form: str) -> None:
    robot = robot_of("ur5e")
    _, target = reachable(robot, shape, seed=36)
    if form == "pose":
        target = matrix_to_pose(target)
    res = solve(robot, target, generator=gen(37))
    assert res.q.shape == (*shape, robot.dof)
    for x in (res.success, res.position_error, res.orientation_error, res.iterations):
        assert x.shape == shape
    assert res.success.all()


def test_warm_start_and_posture_broadcast_from_dof() -> None:
    robot = robot_of("panda")
    q, target = reachable(robot, (2, 3), seed=38)
    q0 = q[1, 2]
    res = solve(robot, target, warm_start=q0, posture=q0, generator=gen(39))
    assert res.q.shape == (2, 3, 7)
    assert res.success.all()
    assert res.iterations[1, 2] == 0
    torch.testing.assert_close(res.q[1, 2], q0, rtol=0, atol=1e-12)
    # Per-target warm_start (..., dof) broadcasts too.
    res = solve(robot, target, warm_start=q, generator=gen(39))
    assert (res.iterations == 0).all()


# --------------------------------------------------------------------------- posture


def test_posture_makes_redundant_solutions_predictable() -> None:
    robot = robot_of("panda")
    posture = (robot.lower + robot.upper) / 2
    near = robot.wrap(posture + 0.2 * torch.randn(100, 7, generator=gen(40), dtype=torch.float64))
    target = robot.fk(near)
    a = solve(robot, target, posture=posture, generator=gen(41))
    b = solve(robot, target, posture=posture, generator=gen(42))
    free = solve(robot, target, generator=gen(41))
    assert_verified(robot, a, target)
    assert_verified(robot, b, target)
    # Independent of the random seeds ...
    assert (a.q - b.q).norm(dim=-1).max() < 1e-2
    # ... and closer to the posture than without it.
    d_post = (a.q - posture).norm(dim=-1)
    d_free = (free.q - posture).norm(dim=-1)
    assert d_post.median() < 0.5 * d_free.median()
    assert (d_post <= d_free + 1e-6).float().mean() >= 0.95


def test_posture_is_preferred_for_targets_far_from_it() -> None:
    robot = robot_of("panda")
    posture = (robot.lower + robot.upper) / 2
    _, target = reachable(robot, (60,), seed=43)
    a = solve(robot, target, posture=posture, generator=gen(44))
    free = solve(robot, target, generator=gen(44))
    assert_verified(robot, a, target, max_failures=1)
    assert (a.q - posture).norm(dim=-1).median() < (free.q - posture).norm(dim=-1).median()


# --------------------------------------------------------------------------- bad inputs


def _raises(match: str, cls: type[Exception] = IKLayerError, **kwargs) -> None:
    robot = robot_of("ur5e")
    target = kwargs.pop("target", None)
    if target is None:
        target = reachable(robot, (4,), seed=45)[1]
    with pytest.raises(cls, match=match) as info:
        solve(robot, target, **kwargs)
    assert isinstance(info.value, ValueError)


F64 = torch.float64


@pytest.mark.parametrize(
    ("kwargs", "match", "cls"),
    [
        ({"target": torch.zeros(4, 5, dtype=F64)}, "target", ShapeError),
        ({"target": torch.zeros(4, 3, 3, dtype=F64)}, "target", ShapeError),
        ({"target": torch.full((2, 7), float("nan"), dtype=F64)}, "target", NonFiniteError),
        ({"target": torch.full((2, 4, 4), float("inf"), dtype=F64)}, "target", NonFiniteError),
        ({"target": torch.tensor([[0.3, 0, 0.5, 0, 0, 0, 0]], dtype=F64)}, "quaternion has norm 0", IKLayerError),
        ({"target": torch.eye(4)}, "target", IKLayerError),  # float32 target, float64 robot
        ({"target": np.eye(4)}, "target", ShapeError),
        ({"warm_start": torch.zeros(5, dtype=F64)}, "warm_start", ShapeError),
        ({"warm_start": torch.zeros(3, 6, dtype=F64)}, "warm_start", ShapeError),  # does not broadcast to (4,)
        ({"warm_start": torch.zeros(6)}, "warm_start", IKLayerError),  # dtype mismatch
        ({"warm_start": torch.full((6,), float("nan"), dtype=F64)}, "warm_start", NonFiniteError),
        ({"posture": torch.zeros(7, dtype=F64)}, "posture", ShapeError),
        ({"position_tolerance": -1e-4}, "position_tolerance", IKLayerError),
        ({"orientation_tolerance": 0.0}, "orientation_tolerance", IKLayerError),
        ({"position_tolerance": float("nan")}, "position_tolerance", IKLayerError),
        ({"weights": torch.ones(5, dtype=F64)}, "weights", ShapeError),
        ({"weights": torch.ones(3, 6, dtype=F64)}, "weights", ShapeError),
        ({"weights": -torch.ones(6, dtype=F64)}, "weights", IKLayerError),
        ({"weights": torch.zeros(6, dtype=F64)}, "weights", IKLayerError),
        ({"weights": torch.tensor([1.0, 1, 1, float("nan"), 1, 1], dtype=F64)}, "weights", IKLayerError),
        ({"num_seeds": 0}, "num_seeds", IKLayerError),
        ({"num_seeds": True}, "num_seeds", IKLayerError),
        ({"max_iterations": -1}, "max_iterations", IKLayerError),
        ({"max_iterations": 2.5}, "max_iterations", IKLayerError),
        ({"max_iterations": 10**9}, "max_iterations", IKLayerError),
        ({"restart_after": 0}, "restart_after", IKLayerError),
        ({"seed": torch.zeros(6, dtype=F64)}, "unknown solver option", IKLayerError),
        ({"options": {"num_seeds": 2}}, "options", IKLayerError),
        ({"generator": 42}, "generator", IKLayerError),
        ({"target": torch.tensor([[1e300, 0, 0, 0, 0, 0, 1]], dtype=F64)}, "target", IKLayerError),
    ],
)
def test_bad_inputs_raise_naming_the_argument(kwargs: dict, match: str, cls: type[Exception]) -> None:
    _raises(match, cls, **dict(kwargs))


@pytest.mark.parametrize("robot", [None, "ur5e", object()])
def test_robot_that_is_not_a_robot_raises(robot: object) -> None:
    target = reachable(robot_of("ur5e"), (2,), seed=45)[1]
    with pytest.raises(IKLayerError, match="robot"):
        solve(robot, target)  # type: ignore[arg-type]


def test_options_object_and_changes_combine() -> None:
    robot = robot_of("ur5e")
    _, target = reachable(robot, (8,), seed=45)
    options = SolveOptions(num_seeds=2, max_iterations=0)
    zero = solve(robot, target, options, generator=gen(45))
    assert bool((zero.iterations == 0).all())
    changed = solve(robot, target, options, max_iterations=200, generator=gen(45))
    same = solve(robot, target, options.replace(max_iterations=200), generator=gen(45))
    assert_verified(robot, changed, target)
    torch.testing.assert_close(changed.q, same.q, rtol=0, atol=0)


def test_zero_weights_on_one_target_only_raise() -> None:
    w = torch.ones(4, 6, dtype=F64)
    w[2] = 0
    _raises("weights", weights=w)


def test_non_rigid_matrix_target_raises() -> None:
    robot = robot_of("ur5e")
    target = reachable(robot, (4,), seed=46)[1].clone()
    target[:, :3, :3] *= 2.0
    _raises("target", target=target, max_iterations=4)


def test_wrong_bottom_row_target_raises() -> None:
    robot = robot_of("ur5e")
    target = reachable(robot, (4,), seed=46)[1].clone()
    target[:, 3, 0] = 1.0
    _raises("target", target=target, max_iterations=4)


# --------------------------------------------------------------------------- reproducibility


def test_same_generator_same_result() -> None:
    robot = robot_of("panda")
    _, target = reachable(robot, (50,), seed=47)
    a = solve(robot, target, generator=gen(48))
    b = solve(robot, target, generator=gen(48))
    for x, y in zip(
        (a.q, a.success, a.position_error, a.orientation_error, a.iterations),
        (b.q, b.success, b.position_error, b.orientation_error, b.iterations),
        strict=False,
    ):
        assert torch.equal(x, y)


def test_solve_leaves_its_inputs_alone() -> None:
    robot = robot_of("panda")
    q, target = reachable(robot, (20,), seed=49)
    q0 = q + 0.05
    before = (target.clone(), q0.clone())
    solve(robot, target, warm_start=q0, posture=q0, generator=gen(50))
    assert torch.equal(target, before[0]) and torch.equal(q0, before[1])
