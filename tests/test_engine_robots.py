"""The engine kernel on robots beyond one serial chain: several frames, mimic joints, a floating base.

The eager solver is the reference, as in ``test_engine_kernel.py``: one kernel iteration from the same state
gives the eager step's q, damping and cost, and seeds that never restart follow the eager solve iteration for
iteration. Solves are verified by recomputing every frame's error in float64 with ``Robot.fk``.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest
import torch

import ik_layer
from ik_layer import SolveOptions
from ik_layer.core.lm import LM
from ik_layer.core.problem import Problem
from ik_layer.engine import EXHAUSTED, RUNNING, SOLVED, BlockLauncher, Engine, open_store
from ik_layer.engine.reach import reach
from ik_layer.model.chain import Layout
from ik_layer.model.lie import pose_error
from ik_layer.reference import _LMState, _Solve
from ik_layer.testing import random_configurations
from tests.conftest import erd_urdf_path
from tests.test_model_mimic import CHAIN

pytestmark = pytest.mark.usefixtures("each_store")  # every test on both engine stores

F64, F32 = torch.float64, torch.float32
TALOS = "talos_data/robots/talos_reduced.urdf"
SOLO = "solo_description/robots/solo12.urdf"
HANDS = ["gripper_left_base_link", "gripper_right_base_link"]
WHOLE_BODY = ["left_sole_link", "right_sole_link", *HANDS]
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
POSITION_ONLY = torch.tensor([1.0, 1, 1, 0, 0, 0])

ROBOTS = ["talos-hands", "talos-body", "solo-feet", "solo-base-feet", "mimic"]


@cache
def robot_of(name: str, dtype: torch.dtype) -> ik_layer.Robot:
    """The robots of :data:`ROBOTS`: a tree with two hands (fixed base), a humanoid and a quadruped on a floating
    base (the quadruped's base link a target too), and a chain of mimic joints."""
    if name == "mimic":
        return ik_layer.load_robot(CHAIN, "tip", dtype=dtype)
    path, frames = {
        "talos-hands": (TALOS, HANDS),
        "talos-body": (TALOS, WHOLE_BODY),
        "solo-feet": (SOLO, FEET),
        "solo-base-feet": (SOLO, ["base_link", *FEET]),
    }[name]
    return ik_layer.load_robot(erd_urdf_path(path), ee_frames=frames, floating_base=name != "talos-hands", dtype=dtype)


def frames_of(robot: ik_layer.Robot) -> int:
    return 1 if robot.ee_frames is None else len(robot.ee_frames)


def default_weights(name: str, robot: ik_layer.Robot, n: int) -> torch.Tensor:
    """Ones, per frame; the quadruped's feet position-only."""
    w = torch.ones(n, frames_of(robot), 6, dtype=robot.dtype)
    if name.startswith("solo"):
        w[:, -4:] = POSITION_ONLY.to(robot.dtype)
    return w if robot.ee_frames is not None else w[:, 0]


def worst_errors(robot64: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> tuple:
    """Position and orientation errors over the weighted axes, the worst frame's, recomputed in float64."""
    n = q.shape[0]
    e = pose_error(target.double(), robot64.fk(q.double())).reshape(n, -1, 6) * (weights.reshape(n, -1, 6) > 0)
    return e[..., :3].norm(dim=-1).amax(-1), e[..., 3:].norm(dim=-1).amax(-1)


def test_layouts():
    assert robot_of("talos-hands", F64).chains.layout == Layout(frames=2, length=9, joints=16)
    assert robot_of("solo-base-feet", F64).chains.layout == Layout(frames=5, length=3, joints=12, floating=True)
    assert robot_of("mimic", F64).chains.layout == Layout(frames=1, length=6, joints=3)


@pytest.mark.parametrize("with_posture", [False, True], ids=["plain", "posture"])
@pytest.mark.parametrize("dtype", [F64, F32], ids=str)
@pytest.mark.parametrize("name", ROBOTS)
def test_one_iteration_matches_eager_step(name: str, dtype: torch.dtype, with_posture: bool) -> None:
    """From the same q and damping, one kernel iteration gives the eager step's q, mu and cost, with random
    per-frame weights (some axes zero), dampings over the whole range and, optionally, postures."""
    robot = robot_of(name, dtype)
    g = torch.Generator().manual_seed(31)
    n = 128
    q0 = random_configurations(robot, n, g)
    target = robot.fk(random_configurations(robot, n, g))
    weights = torch.rand(n, frames_of(robot), 6, generator=g, dtype=dtype) * 2
    weights[torch.rand(weights.shape, generator=g) < 0.2] = 0
    weights[..., 0] = 1
    weights = weights if robot.ee_frames is not None else weights[:, 0]
    low, high = (-6, 6) if dtype == F64 else (-3, 3)  # float32: well-conditioned steps only (see test_engine_kernel)
    mu = (10 ** (torch.rand(n, generator=g, dtype=dtype) * (high - low) + low)).clamp(1e-6, 1e6)
    mu[: n // 4] = LM.mu_init
    posture = robot.wrap(random_configurations(robot, n, g)) if with_posture else None
    options = SolveOptions(check_every=1000, restart_after=10_000)
    rows = torch.arange(n)

    problem = _Solve(robot, target, weights, options, posture, None)
    start = dataclasses.replace(_LMState.start(problem, rows, q0[:, None]), mu=mu[:, None])
    ref = start.step(problem, rows)
    slots = open_store(robot, n)
    slots.admit(rows, target, q0, options, weights=weights, posture=posture)
    slots.mu.copy_(mu)
    BlockLauncher(slots)(1)

    assert (slots.iterations == 1).all() and (slots.status == RUNNING).all()
    # The null-space pull cancels in rank-deficient steps: float64 LU (eager) and Cholesky (kernel) part by
    # eps cond |pull| (see test_engine_kernel); float32 steps agree to its precision.
    q_tol, cost_rtol = ((1e-6 if with_posture else 1e-9), 1e-8) if dtype == F64 else (2e-3, 5e-3)
    torch.testing.assert_close(slots.check_cost, start.cost[:, 0], rtol=cost_rtol, atol=0)
    close = (slots.q - ref.q[:, 0]).abs().amax(-1) <= q_tol
    assert float(close.double().mean()) >= (1.0 if dtype == F64 and not with_posture else 0.95)
    torch.testing.assert_close(slots.mu[close], ref.mu[close, 0], rtol=1e-12, atol=0)
    torch.testing.assert_close(slots.cost[close], ref.cost[close, 0], rtol=cost_rtol, atol=1e-30)
    assert int((slots.mu < mu).sum()) >= n // 4  # accepted steps are compared (rejected ones keep q0)
    if robot.floating_base:
        torch.testing.assert_close(slots.q[:, 3:7].norm(dim=-1), torch.ones(n, dtype=dtype), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ROBOTS)
def test_trajectories_without_restart_match_eager_solve(name: str) -> None:
    """Seeds that never restart follow the eager solver (one seed, same start) iteration for iteration."""
    robot = robot_of(name, F64)
    g = torch.Generator().manual_seed(32)
    n = 100
    q0 = random_configurations(robot, n, g)
    target = robot.fk(random_configurations(robot, n, g))
    weights = default_weights(name, robot, n)
    options = SolveOptions()
    ref = ik_layer.solve(robot, target, options, warm_start=q0, weights=weights, num_seeds=1, reference=True)
    slots = open_store(robot, n)
    slots.admit(torch.arange(n), target, q0, options, weights=weights)
    launch = BlockLauncher(slots)
    while bool(slots.running().any()):
        launch(8)
    clean = slots.age == slots.iterations  # never restarted
    assert int(clean.sum()) >= n // 5
    assert float((slots.iterations[clean].long() == ref.iterations[clean]).double().mean()) >= 0.97
    assert float(((slots.status[clean] == SOLVED) == ref.success[clean]).double().mean()) >= 0.97
    same = clean & (slots.iterations.long() == ref.iterations)
    torch.testing.assert_close(slots.best_q[same], ref.q[same], rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [F64, F32], ids=str)
@pytest.mark.parametrize("name", ROBOTS)
def test_reachable_targets_solved_and_verified(name: str, dtype: torch.dtype) -> None:
    """Default options on the engine: >= 99 % of FK targets solved, every success verified in float64."""
    robot = robot_of(name, dtype)
    n = 200
    g = torch.Generator().manual_seed(33)
    target = robot.fk(random_configurations(robot, n, g))
    weights = default_weights(name, robot, n)
    result = ik_layer.solve(robot, target, weights=weights, generator=torch.Generator().manual_seed(34))
    ok = result.success
    assert float(ok.double().mean()) >= 0.99, f"{int((~ok).sum())} of {n} reachable targets failed"
    pos, ori = worst_errors(robot_of(name, F64), result.q, target, weights)
    slack = 1e-9 if dtype == F64 else 2e-5
    assert (pos[ok] <= 1e-4 + slack).all() and (ori[ok] <= 1e-3 + slack).all()
    torch.testing.assert_close(result.position_error.double(), pos, rtol=0, atol=slack)
    joints = result.q[:, robot.nq - robot.lower.shape[0] :]
    assert bool(((joints >= robot.lower) & (joints <= robot.upper)).all())


def test_a_frame_out_of_reach_gives_the_target_up_early():
    """Two hands: the right one 0.3 m beyond its chain's reach gives the target one seed of ``restart_after``
    iterations; a floating base reaches everywhere and rules nothing out."""
    robot = robot_of("talos-hands", F64)
    g = torch.Generator().manual_seed(35)
    target = robot.fk(robot.random_q((4,), generator=g))
    bound = reach(robot.chains)
    direction = torch.randn(4, 3, generator=g, dtype=F64)
    far = torch.from_numpy(bound.centre[1]) + (bound.radius[1] + 0.3) * direction / direction.norm(dim=-1)[:, None]
    target[:2, 1, :3, 3] = far[:2]
    options = SolveOptions(num_seeds=4)
    engine = Engine(robot, capacity=16, block=8)
    request = engine.submit(Problem.prepare(robot, target, options), seed=3)
    engine.run(request)
    assert request.unreachable.tolist() == [True, True, False, False]
    assert request.status.tolist()[:2] == [EXHAUSTED] * 2 and request.result().success.tolist()[2:] == [True] * 2
    assert request.iterations.tolist()[:2] == [options.restart_after] * 2
    floating = robot_of("talos-body", F64)
    far_body = floating.fk(floating.random_q((1,), generator=g))
    far_body[..., :3, 3] += 100.0  # every frame 100 m away: the base walks there
    assert not reach(floating.chains).beyond(far_body, torch.ones(1, 4, 6, dtype=F64), 1e-4).any()
    result = ik_layer.solve(floating, far_body, generator=torch.Generator().manual_seed(36))
    assert bool(result.success.all())


@pytest.mark.parametrize("dtype", [F64, F32])
def test_one_target_is_ruled_out_as_in_a_batch(dtype):
    """One host target of one frame is measured in plain floats (the lone solve's path): the same answers as the
    arrays' path of a batch, on targets about the reach's boundary, with position axes weighted or not."""
    robot = ik_layer.load_robot("ur5e", dtype=dtype)
    bound = reach(robot.chains)
    g = torch.Generator().manual_seed(37)
    target = robot.fk(robot.random_q((300,), generator=g))
    direction = torch.randn(300, 3, generator=g, dtype=F64)
    scale = bound.radius[0] * (1 + torch.randn(300, dtype=F64) * 1e-3)  # about the boundary
    centre = torch.from_numpy(bound.centre[0])
    target[:, :3, 3] = (centre + scale[:, None] * direction / direction.norm(dim=-1)[:, None]).to(dtype)
    weights = (torch.rand(300, 6, generator=g, dtype=F64) > 0.2).to(dtype)
    batch = bound.beyond(target.numpy(), weights.numpy(), 1e-4)
    one = [bool(bound.beyond(target[i : i + 1].numpy(), weights[i : i + 1].numpy(), 1e-4)[0]) for i in range(300)]
    assert one == batch.tolist()
    assert 0 < sum(one) < 300  # both answers occur


@pytest.mark.parametrize("name", ROBOTS)
def test_a_start_outside_the_limits_begins_as_robot_wrap_puts_it(name: str) -> None:
    """The kernel brings given starts inside the limits as :meth:`Robot.wrap`: joints past their limits, and a
    floating base's quaternion scaled to unit norm."""
    robot = robot_of(name, F64)
    n = 8
    q = random_configurations(robot, n, torch.Generator().manual_seed(61))
    away = q.clone()
    away[:, -robot.lower.shape[0] :] += torch.linspace(-9.0, 9.0, n, dtype=F64)[:, None]
    if robot.floating_base:
        away[:, 3:7] *= torch.linspace(0.1, 3.0, n, dtype=F64)[:, None]
    weights = default_weights(name, robot, n)
    result = ik_layer.solve(robot, robot.fk(q), warm_start=away, max_iterations=0, weights=weights)
    assert (result.iterations == 0).all()
    torch.testing.assert_close(result.q, robot.wrap(away), rtol=0, atol=1e-12)
