"""The fused LM block kernel (ik_layer.engine) against the eager solver's math, and its solves verified.

The eager solver (``ik_layer.reference._LMState`` / ``_Solve``) is the reference: one kernel
iteration from the same state must give the same q, damping and cost; whole trajectories that never
restart must end at the same iteration with the same answer. Solutions are verified by recomputing
their errors in float64 with ``Robot.fk`` and ``lie.pose_error``, never only with the kernel's flag.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import warp as wp

import ik_layer
from ik_layer import SolveOptions
from ik_layer.core.lm import LM
from ik_layer.core.options import OPTION_SPECS
from ik_layer.engine import (
    EMPTY,
    EXHAUSTED,
    RUNNING,
    SOLVED,
    BlockLauncher,
    lm_block_kernel,
    open_store,
)
from ik_layer.model.chain import Layout
from ik_layer.model.lie import pose_error
from ik_layer.model.trig import sin_cos_function
from ik_layer.reference import _LMState, _Solve
from ik_layer.terms import BUILT_IN, gains_of, rank_of_cost, term_data
from ik_layer.terms.objective import Objective
from ik_layer.testing import solve_on_engine

pytestmark = pytest.mark.usefixtures("each_store")  # every test on both engine stores

F64, F32 = torch.float64, torch.float32
DTYPES = [F64, F32]
BUILTIN = ik_layer.builtin_robots()
POS_TOL, ORI_TOL = 1e-4, 1e-3
# How far a float64 recomputation of the errors may sit from the kernel's own, per dtype: [m], [rad].
SLACK = {F64: (1e-9, 1e-9), F32: (2e-6, 2e-5)}
# One seed per target (the eager solver runs 4 by default): twice the eager budget.
ONE_SEED = SolveOptions(max_iterations=400)

MIXED = "mixed-urdf"


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@cache
def builtin(name: str, dtype: torch.dtype) -> ik_layer.Robot:
    return ik_layer.load_robot(name, dtype=dtype)


@pytest.fixture
def robot_of(tiny_urdf: Path) -> Callable[[str, torch.dtype], ik_layer.Robot]:
    """``robot_of(name, dtype)``: a built-in robot, or conftest's every-joint-kind URDF for :data:`MIXED`."""

    def load(name: str, dtype: torch.dtype) -> ik_layer.Robot:
        if name == MIXED:
            every_joint = ["j_cont", "j_side", "j_off", "j_prism", "j_neg", "j_cont_off"]  # default: the chain's only
            robot = ik_layer.load_robot(tiny_urdf, "tool", active_joints=every_joint, dtype=dtype)
            assert robot._chain_cols.numel() == 5  # the chain's joints (a side joint, if kept, is off it)
            assert bool(robot.continuous.any()) and not bool(robot._revolute.all())
            return robot
        return builtin(name, dtype)

    return load


def run_slots(robot: ik_layer.Robot, target, q0, options, *, block: int, weights=None, seed: int = 0, posture=None):
    """Slots for ``target`` (n, 4, 4) started at ``q0``, run by blocks until none is RUNNING."""
    n = target.shape[0]
    slots = open_store(robot, n)
    slots.admit(torch.arange(n), target, q0, options, weights=weights, seed=seed, posture=posture)
    launch = BlockLauncher(slots)
    for _ in range(options.max_iterations + 1):
        if not bool(slots.running().any()):
            break
        launch(block)
    assert not bool(slots.running().any())
    return slots


def limited_chain_joints(robot: ik_layer.Robot) -> torch.Tensor:
    cols = robot._chain_cols
    return cols[~robot.continuous[cols]]


def errors64(robot64: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor, weights=None) -> tuple:
    """Position and orientation error norms of ``q`` w.r.t. ``target``, recomputed with a float64 robot."""
    assert robot64.dtype == F64
    e = pose_error(target.double(), robot64.fk(q.double()))
    if weights is not None:
        e = e * (weights.double() > 0)
    return e[:, :3].norm(dim=-1), e[:, 3:].norm(dim=-1)


def assert_in_limits(robot: ik_layer.Robot, q: torch.Tensor) -> None:
    assert torch.isfinite(q).all()
    cont = robot.continuous
    assert (q[:, ~cont] >= robot.lower[~cont]).all() and (q[:, ~cont] <= robot.upper[~cont]).all()
    assert (q[:, cont] > -math.pi).all() and (q[:, cont] <= math.pi).all()


def skip_unless_it_applies(robot: ik_layer.Robot, secondary: str) -> None:
    """Skip a test of a secondary term (or ``"plain"``) where it has nothing to do on ``robot``."""
    if secondary == "manipulability" and not robot.chains.serial_arm:
        pytest.skip("manipulability applies to serial arms")
    if secondary == "centring" and bool((robot.continuous | robot.full_turn).all()):
        pytest.skip("no joint stops at its limits: centring adds nothing")


def gain_options(secondary: str) -> dict[str, float]:
    """The option that switches ``secondary`` on at gain 0.5, if it is one (the posture is an argument)."""
    return {secondary: 0.5} if secondary in OPTION_SPECS else {}


SECONDARY = ["plain", *(term.name for term in BUILT_IN)]


# --------------------------------------------------------------------------- one iteration vs eager


@pytest.mark.parametrize("secondary", SECONDARY)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", [*BUILTIN, MIXED])
def test_one_iteration_matches_eager_step(robot_of, name: str, dtype: torch.dtype, secondary: str) -> None:
    """From the same q and damping, one kernel iteration gives the eager step's q, mu and cost,
    including rows whose step pushes a joint past its limit (start near it, target beyond it).
    With a secondary term: on every other row (random postures for the posture; the centring or
    manipulability option for the others), the eager step with it; the others without, in one launch."""
    robot = robot_of(name, dtype)
    skip_unless_it_applies(robot, secondary)
    g = gen(11)
    n, n_limit = 192, 96
    q0 = robot.random_q((n,), generator=g)
    target = robot.fk(robot.random_q((n,), generator=g))
    # rows 0..n_limit-1: one limited joint 0.02 inside a limit, the target posed with it 0.6 beyond
    limited = limited_chain_joints(robot)
    joint = limited[torch.randint(0, limited.numel(), (n_limit,), generator=g)]
    at_upper = torch.rand(n_limit, generator=g) < 0.5
    rows = torch.arange(n_limit)
    edge = torch.where(at_upper, robot.upper[joint] - 0.02, robot.lower[joint] + 0.02)
    beyond = torch.where(at_upper, robot.upper[joint] + 0.6, robot.lower[joint] - 0.6)
    q0[rows, joint] = edge
    q_far = q0[:n_limit].clone()
    q_far[rows, joint] = beyond
    target[:n_limit] = robot.kinematics(q_far, jacobian=False)[0]
    # weights with some zero axes, damping spread over the whole range
    weights = torch.rand(n, 6, generator=g, dtype=dtype) * 2
    weights[n_limit:][torch.rand(n - n_limit, 6, generator=g) < 0.2] = 0
    weights[:, 0] = 1
    # float32 steps at the smallest damping are ill-conditioned (cond ~ 1e5): LU (eager) and Cholesky
    # (kernel) agree to ~1e-2 only, so float32 rows keep mu in [1e-3, 1e3]
    low, high = (-6, 6) if dtype == F64 else (-3, 3)
    mu = (10 ** (torch.rand(n, generator=g, dtype=dtype) * (high - low) + low)).clamp(1e-6, 1e6)
    mu[: n // 4] = LM.mu_init

    # no restart and no success within the iteration (a full-turn joint's rows may meet a looser tolerance at once)
    options = SolveOptions(
        check_every=1000, restart_after=10_000, position_tolerance=1e-15, orientation_tolerance=1e-15
    )
    all_rows = torch.arange(n)
    posture = robot.random_q((n,), generator=g) if secondary == "posture" else None
    pulling = options.replace(**gain_options(secondary))

    def eager_step(options: SolveOptions, posture: torch.Tensor | None) -> tuple[_LMState, _LMState]:
        problem = _Solve(robot, target, weights, options, posture, None)
        start = _LMState.start(problem, all_rows, q0[:, None])
        start = dataclasses.replace(start, mu=mu[:, None])
        return start, start.step(problem, all_rows)

    start, ref = eager_step(options, None)
    ref_q, ref_mu, ref_cost = ref.q[:, 0], ref.mu[:, 0], ref.cost[:, 0]
    slots = open_store(robot, n)
    if secondary == "plain":
        slots.admit(all_rows, target, q0, options, weights=weights)
    else:
        pulled = all_rows % 2 == 0
        _, ref_pulled = eager_step(pulling, posture)
        # the term changes the step: the null-space pull of the redundant arms, the damped part elsewhere
        moved = (ref_pulled.q[pulled, 0] - ref_q[pulled]).abs().amax(-1) > 1e-3
        assert float(moved.double().mean()) >= (0.5 if robot.dof > 6 else 0.1)
        ref_q = torch.where(pulled[:, None], ref_pulled.q[:, 0], ref_q)
        ref_mu = torch.where(pulled, ref_pulled.mu[:, 0], ref_mu)
        ref_cost = torch.where(pulled, ref_pulled.cost[:, 0], ref_cost)
        for rows, opts, pose in ((all_rows[pulled], pulling, posture), (all_rows[~pulled], options, None)):
            pose = None if pose is None else pose[rows]
            slots.admit(rows, target[rows], q0[rows], opts, weights=weights[rows], posture=pose)
        assert torch.equal((slots.gains != 0).any(-1), pulled)
    slots.mu.copy_(mu)
    BlockLauncher(slots)(1)

    assert (slots.iterations == 1).all() and (slots.status == RUNNING).all()
    q_tol, cost_rtol = (1e-10, 1e-9) if dtype == F64 else (1e-3, 2e-3)
    torch.testing.assert_close(slots.check_cost, start.cost[:, 0], rtol=cost_rtol, atol=0)  # cost at q0
    if secondary == "plain":
        torch.testing.assert_close(slots.q, ref_q, rtol=0, atol=q_tol)
        measured = torch.ones(n, dtype=torch.bool)
    else:
        # The null-space term ``pull - (H + damping I)^-1 H pull`` cancels: LU (eager) and Cholesky (kernel)
        # each round it to about eps cond(H + damping I) |pull|, above 1e-10 at the smallest dampings of a
        # rank-deficient H (zero weights, non-redundant arms); such rows are held to 4 times that bound.
        hess = start.jac[:, 0].transpose(-1, -2) @ (weights[:, :, None] * start.jac[:, 0])
        damping = mu * start.cost[:, 0] + max(1e-9, 100 * torch.finfo(dtype).eps)
        cond = (torch.linalg.eigvalsh(hess)[:, -1] + damping) / damping
        objective = Objective(robot, BUILT_IN, gains_of(pulling, posture is not None), term_data(posture, None))
        pull = objective.terms_gradient(q0, start.jac[:, 0])
        if secondary == "manipulability":  # its gradient solves with J J^T + eps I: rounded to eps cond of that too
            gram = start.jac[:, 0] @ start.jac[:, 0].mT + LM.damping_floor(dtype) * torch.eye(6, dtype=dtype)
            cond = cond * torch.linalg.cond(gram)
        bound = torch.finfo(dtype).eps * cond * pull.abs().amax(-1)
        tol = torch.clamp(4 * bound, min=q_tol)
        diff = (slots.q - ref_q).abs().amax(-1)
        assert (diff <= tol).all(), f"row {int((diff / tol).argmax())}: {float((diff / tol).max())} x its tolerance"
        assert float((diff[pulled] <= q_tol).double().mean()) >= 0.8  # the conditioning bound is the exception
        torch.testing.assert_close(slots.q[~pulled], ref_q[~pulled], rtol=0, atol=q_tol)
        measured = tol == q_tol  # rows held to the conditioning bound are checked by q only (their costs differ more)
    torch.testing.assert_close(slots.mu, ref_mu, rtol=1e-12, atol=0)
    torch.testing.assert_close(slots.cost[measured], ref_cost[measured], rtol=cost_rtol, atol=1e-30)
    # the active-set pass ran: limit rows of a joint that stops at its limits end with a joint exactly at one; those
    # of a full-turn joint come back inside by a whole turn (both accepted)
    accepted = slots.mu < mu
    stopped = (slots.q[:n_limit] == robot.upper).any(-1) | (slots.q[:n_limit] == robot.lower).any(-1)
    came_round = (slots.q[rows, joint] - edge).abs() > math.pi
    for kind, ended in ((~robot.full_turn[joint], stopped), (robot.full_turn[joint], came_round)):
        assert int((ended & kind & accepted[:n_limit]).sum()) >= int(kind.sum()) // 4
    assert int(accepted.sum()) >= n // 2 and int((~accepted).sum()) >= 1  # both outcomes are compared
    assert_in_limits(robot, slots.q)


@pytest.mark.parametrize("secondary", SECONDARY)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", BUILTIN)
def test_trajectories_without_restart_match_eager_solve(name: str, dtype: torch.dtype, secondary: str) -> None:
    """Seeds that never restart follow the eager solver (one seed, same start) iteration for iteration.

    With a secondary term the eager solver, like the kernel, answers with its polished success: one seed, whose
    first success polishes (its rank, from the term's cost, below every score > 1) until the polish stops.
    """
    robot = builtin(name, dtype)
    skip_unless_it_applies(robot, secondary)
    g = gen(12)
    n = 200
    q0 = robot.random_q((n,), generator=g)
    target = robot.fk(robot.random_q((n,), generator=g))
    posture = robot.random_q((n,), generator=gen(14)) if secondary == "posture" else None
    options = SolveOptions(**gain_options(secondary))
    ref = ik_layer.solve(
        robot, target, options, warm_start=q0, num_seeds=1, posture=posture, generator=gen(13), reference=True
    )
    slots = run_slots(robot, target, q0, options, block=8, posture=posture)
    clean = slots.age == slots.iterations  # never restarted, so the restart draws play no part
    assert int(clean.sum()) >= n // 5
    same_iterations = slots.iterations[clean].long() == ref.iterations[clean]
    solved = slots.status[clean] == SOLVED
    if secondary == "plain":
        assert float(same_iterations.double().mean()) >= (1.0 if dtype == F64 else 0.97)
        assert float((solved == ref.success[clean]).double().mean()) >= (1.0 if dtype == F64 else 0.97)
        if dtype == F64:
            torch.testing.assert_close(slots.best_q[clean], ref.q[clean], rtol=0, atol=1e-6)
    elif dtype == F64:
        # A polish keeps a step iff the terms' cost falls: at near ties (a doubled scale overshooting) the kernel's
        # and the eager solver's roundings decide apart, and they stop at different iterations (measured: 65-99 %
        # of rows alike), at the same optimum (measured: median 1e-7, at most 5e-4 apart).
        assert float(same_iterations.double().mean()) >= 0.6
        assert bool((solved == ref.success[clean]).all())
        apart = (slots.best_q[clean] - ref.q[clean]).abs().amax(-1)
        assert float(apart.median()) <= 1e-6 and float(apart.max()) <= 1e-3
    else:
        # float32 rounds the null-space term (a cancellation) to ~1 % of the pull, so trajectories part:
        # the eager float32 solve itself takes its float64 twin's iteration count on only ~70 % of these rows.
        # The kernel must follow the float64 solve as closely as the eager float32 one does.
        ref64 = ik_layer.solve(
            builtin(name, F64), target.double(), options, warm_start=q0.double(), num_seeds=1,
            posture=None if posture is None else posture.double(), generator=gen(13), reference=True,
        )  # fmt: skip
        twin = ref64.iterations[clean]
        agree_kernel = float((slots.iterations[clean].long() == twin).double().mean())
        agree_eager = float((ref.iterations[clean] == twin).double().mean())
        assert agree_kernel >= agree_eager - 0.1, (agree_kernel, agree_eager)
        assert float((solved == ref.success[clean]).double().mean()) >= 0.9
    if secondary != "plain":  # a solved slot ranks by the term's cost, an exhausted one by its score
        done = slots.status == SOLVED
        q_done = slots.best_q[done]
        ranked = Objective(
            robot, BUILT_IN, gains_of(options, posture is not None),
            term_data(None if posture is None else posture[done], None),
        )  # fmt: skip
        cost = ranked.terms_cost(q_done, robot.kinematics(q_done, jacobian=True)[1])
        # float32: the log-determinant rounds to about eps cond(J J^T), ~1e-5 of the rank at ordinary arms
        rtol = 1e-12 if dtype == F64 else (1e-4 if secondary == "manipulability" else 1e-6)
        torch.testing.assert_close(slots.best_score[done], rank_of_cost(cost), rtol=rtol, atol=0)
        assert (slots.best_score[slots.status == EXHAUSTED] > 1).all()


@pytest.mark.parametrize("restart_after", [4, 1000])
def test_progress_check_restarts_as_the_eager_rule(restart_after: int) -> None:
    """At the first check (iteration 4) a seed restarts iff its cost fell by less than half, it ran
    ``restart_after`` iterations, or its damping hit the maximum; a restart starts a fresh window."""
    robot = builtin("panda", F64)
    g = gen(14)
    n = 200
    q0 = robot.random_q((n,), generator=g)
    target = robot.fk(robot.random_q((n,), generator=g))
    options = SolveOptions(check_every=4, restart_after=restart_after)
    weights = torch.ones(n, 6, dtype=F64)
    problem = _Solve(robot, target, weights, options, None, None)
    rows = torch.arange(n)
    start = state = _LMState.start(problem, rows, q0[:, None])
    for _ in range(4):
        state = state.step(problem, rows)
    slots = open_store(robot, n)
    slots.admit(rows, target, q0, options)
    BlockLauncher(slots)(4)

    open_ = slots.status == RUNNING
    assert bool(open_.any()) and (slots.iterations[open_] == 4).all()
    stalled = (state.cost[:, 0] > 0.5 * start.cost[:, 0]) | (state.mu[:, 0] >= 1e6) | (restart_after <= 4)
    restarted = slots.age == 0
    assert torch.equal(restarted[open_], stalled[open_])
    assert bool((open_ & restarted).any())
    assert bool((open_ & ~restarted).any()) == (restart_after > 4)  # with 4, every open seed restarts
    # kept seeds carry on; restarted ones hold a fresh configuration, damping and progress window
    torch.testing.assert_close(slots.q[open_ & ~restarted], state.q[open_ & ~restarted, 0], rtol=0, atol=1e-10)
    fresh = open_ & restarted
    assert (slots.mu[fresh] == LM.mu_init).all()
    assert ((slots.q[fresh] - state.q[fresh, 0]).abs().amax(-1) > 1e-3).all()
    e = pose_error(target[fresh], robot.fk(slots.q[fresh]))
    torch.testing.assert_close(slots.cost[fresh], (e * e).sum(-1), rtol=1e-12, atol=0)
    torch.testing.assert_close(slots.check_cost[open_], slots.cost[open_], rtol=0, atol=0)
    assert_in_limits(robot, slots.q)


# --------------------------------------------------------------------------- solves, verified


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", [*BUILTIN, MIXED])
def test_reachable_targets_solved_and_verified(robot_of, name: str, dtype: torch.dtype) -> None:
    robot = robot_of(name, dtype)
    n = 300
    target = robot.fk(robot.random_q((n,), generator=gen(21)))
    res = solve_on_engine(robot, target, ONE_SEED, seed=22)
    ok = res.success
    assert float(ok.double().mean()) >= 0.995, f"{int((~ok).sum())} of {n} reachable targets failed"
    pos, ori = errors64(robot_of(name, F64), res.q, target)
    slack_p, slack_o = SLACK[dtype]
    assert (pos[ok] <= POS_TOL + slack_p).all() and (ori[ok] <= ORI_TOL + slack_o).all()
    torch.testing.assert_close(res.position_error.double(), pos, rtol=0, atol=slack_p)
    torch.testing.assert_close(res.orientation_error.double(), ori, rtol=0, atol=slack_o)
    assert ((res.iterations[ok] >= 1) & (res.iterations[ok] <= ONE_SEED.max_iterations)).all()
    assert (res.iterations[~ok] == ONE_SEED.max_iterations).all()
    assert res.q.dtype == dtype and res.iterations.dtype == torch.int64 and res.success.dtype == torch.bool
    assert_in_limits(robot, res.q)


def test_weighted_axes_position_only() -> None:
    """Zero-weight axes drop out of the cost and of the reported errors (position-only targets)."""
    robot = builtin("panda", F64)
    target = robot.fk(robot.random_q((64,), generator=gen(31)))
    target[:, :3, :3] = torch.eye(3, dtype=F64)  # orientations mostly out of reach: ignored
    weights = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=F64)
    res = solve_on_engine(robot, target, ONE_SEED, weights=weights, seed=32)
    assert bool(res.success.all())
    assert (res.orientation_error == 0).all()
    pos, _ = errors64(robot, res.q, target, weights)
    assert (pos <= POS_TOL + 1e-9).all()


def test_posture_brings_solutions_closer_to_it() -> None:
    """Panda (7 dof, one redundant): the null-space pull ends the solves nearer a random posture than
    the same solves without it, with every success verified and inside the limits."""
    robot = builtin("panda", F64)
    g = gen(91)
    n = 200
    q0 = robot.random_q((n,), generator=g)
    target = robot.fk(robot.random_q((n,), generator=g))
    posture = robot.random_q((n,), generator=g)
    plain = run_slots(robot, target, q0, ONE_SEED, block=16)
    pulled = run_slots(robot, target, q0, ONE_SEED, block=16, posture=posture)
    distance = {}
    for key, slots in (("plain", plain), ("pulled", pulled)):
        ok = slots.status == SOLVED
        assert float(ok.double().mean()) >= 0.99
        pos, ori = errors64(robot, slots.best_q[ok], target[ok])
        assert (pos <= POS_TOL + 1e-9).all() and (ori <= ORI_TOL + 1e-9).all()
        assert_in_limits(robot, slots.best_q)
        distance[key] = (slots.best_q[ok] - posture[ok]).norm(dim=-1)
    assert float(distance["pulled"].median()) < 0.9 * float(distance["plain"].median())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unreachable_target_exhausts_its_budget(dtype: torch.dtype) -> None:
    robot = builtin("panda", dtype)
    target = robot.fk(robot.random_q((6,), generator=gen(41)))
    target[:, :3, 3] += torch.tensor([5.0, 0.0, 0.0], dtype=dtype)  # 5 m away
    options = SolveOptions(max_iterations=60)
    q0 = robot.random_q((6,), generator=gen(42))
    slots = run_slots(robot, target, q0, options, block=16)
    assert (slots.status == EXHAUSTED).all() and (slots.iterations == 60).all()
    assert_in_limits(robot, slots.best_q)
    assert torch.isfinite(slots.best_score).all() and (slots.best_score > 1e4).all()

    res = solve_on_engine(robot, target, options, seed=43)
    assert not bool(res.success.any())
    assert (res.iterations == options.restart_after).all()  # provably out of reach: one short seed
    assert_in_limits(robot, res.q)
    assert (res.position_error > 2.5).all()  # the arm reaches about 1 m


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", [*BUILTIN, MIXED])
def test_warm_start_at_the_answer_takes_no_iteration(robot_of, name: str, dtype: torch.dtype) -> None:
    robot = robot_of(name, dtype)
    q = robot.random_q((16,), generator=gen(51))
    res = solve_on_engine(robot, robot.fk(q), warm_start=q)
    assert bool(res.success.all())
    assert (res.iterations == 0).all()
    assert torch.equal(res.q, robot.wrap(q))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", [*BUILTIN, MIXED])
def test_starts_outside_the_limits_begin_as_robot_wrap_puts_them(robot_of, name: str, dtype: torch.dtype) -> None:
    """The kernel brings a given start inside the limits as :meth:`Robot.wrap` does: continuous joints turns
    away, limited joints past a limit (clamped), with no iteration run."""
    robot = robot_of(name, dtype)
    q = robot.random_q((16,), generator=gen(55))
    away = q + torch.linspace(-9.0, 9.0, 16, dtype=dtype)[:, None]  # up to about 1.4 turns, both ways
    res = solve_on_engine(robot, robot.fk(q), SolveOptions(max_iterations=0), warm_start=away)
    assert (res.iterations == 0).all()
    torch.testing.assert_close(res.q, robot.wrap(away), rtol=0, atol=1e-12 if dtype == F64 else 1e-5)
    assert_in_limits(robot, res.q)


def test_batch_shape_is_kept_and_rows_are_the_flat_solve() -> None:
    robot = builtin("planar3", F64)
    target = robot.fk(robot.random_q((2, 3), generator=gen(53)))
    res = solve_on_engine(robot, target, seed=54)
    flat = solve_on_engine(robot, target.reshape(6, 4, 4), seed=54)
    assert torch.equal(res.q.reshape(6, 3), flat.q) and torch.equal(res.iterations.reshape(6), flat.iterations)
    assert res.success.all() and res.success.shape == (2, 3)
    empty = solve_on_engine(robot, target[:0, 0])
    assert empty.q.shape == (0, 3) and empty.iterations.shape == (0,)


def test_zero_budget_records_the_start_only() -> None:
    robot = builtin("ur5e", F64)
    q = robot.random_q((4,), generator=gen(52))
    target = robot.fk(q)
    target[2:, :3, 3] += 0.1
    res = solve_on_engine(robot, target, SolveOptions(max_iterations=0), warm_start=q)
    assert res.success.tolist() == [True, True, False, False]
    assert (res.iterations == 0).all() and torch.equal(res.q, q)


# --------------------------------------------------------------------------- determinism, slots


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_results_do_not_depend_on_the_block_size(dtype: torch.dtype) -> None:
    robot = builtin("panda", dtype)
    n = 200
    q0 = robot.random_q((n,), generator=gen(61))
    target = robot.fk(robot.random_q((n,), generator=gen(62)))
    options = SolveOptions(max_iterations=120, num_seeds=1)  # extra seeds start at block boundaries
    runs = [run_slots(robot, target, q0, options, block=b, seed=7) for b in (1, 16, 7)]
    assert bool((runs[0].age != runs[0].iterations).any())  # restarts (in-kernel RNG) took place
    for other in runs[1:]:
        for field in ("q", "best_q", "best_score", "mu", "iterations", "status", "age", "rng", "cost"):
            assert torch.equal(getattr(runs[0], field), getattr(other, field)), field
    again = solve_on_engine(robot, target, options, seed=3, block=1)
    once = solve_on_engine(robot, target, options, seed=3, block=16)
    for field in ("q", "success", "iterations", "position_error", "orientation_error"):
        assert torch.equal(getattr(again, field), getattr(once, field)), field


def test_a_slot_does_not_depend_on_the_others() -> None:
    """Same problem, same RNG stream (offset), different slot and neighbours: the same result."""
    robot = builtin("ur5e", F64)
    q0 = robot.random_q((5,), generator=gen(71))
    target = robot.fk(robot.random_q((5,), generator=gen(72)))
    options = SolveOptions(max_iterations=80)
    full = open_store(robot, 5)
    full.admit(torch.arange(5), target, q0, options, seed=9, rng_offset=torch.arange(100, 105))
    alone = open_store(robot, 3)  # row 3 alone, in slot 1, between two empty slots
    alone.admit([1], target[3:4], q0[3:4], options, seed=9, rng_offset=torch.tensor([103]))
    for slots in (full, alone):
        launch = BlockLauncher(slots)
        while bool(slots.running().any()):
            launch(5)
    assert torch.equal(alone.best_q[1], full.best_q[3]) and torch.equal(alone.iterations[1], full.iterations[3])
    assert alone.status.tolist()[0::2] == [EMPTY, EMPTY]
    assert torch.equal(alone.q[0::2], torch.zeros(2, robot.dof, dtype=F64))  # empty slots are not touched


def test_finished_slots_are_left_alone_and_can_be_readmitted() -> None:
    robot = builtin("iiwa14", F64)
    q = robot.random_q((3,), generator=gen(81))
    target = robot.fk(robot.random_q((3,), generator=gen(82)))
    slots = run_slots(robot, target, q, ONE_SEED, block=32)
    before = {k: getattr(slots, k).clone() for k in ("q", "best_q", "iterations", "status", "rng", "cost")}
    BlockLauncher(slots)(10)
    for key, value in before.items():
        assert torch.equal(getattr(slots, key), value), key
    slots.retire([0])
    slots.admit([2], robot.fk(q[2:]), q[2:], ONE_SEED)
    assert slots.status.tolist() == [EMPTY, int(before["status"][1]), RUNNING]
    BlockLauncher(slots)(1)
    assert slots.status[2] == SOLVED and slots.iterations[2] == 0


def test_readmitted_slot_drops_its_secondary_terms() -> None:
    """A slot admitted with a posture and centring, then again without them, iterates as a slot that never had
    them, bit for bit (its launches still take the kernel with the terms compiled in, at gain 0)."""
    robot = builtin("panda", F64)
    q0 = robot.random_q((4,), generator=gen(83))
    target = robot.fk(robot.random_q((4,), generator=gen(84)))
    posture = robot.random_q((4,), generator=gen(85))
    fresh, reused = open_store(robot, 4), open_store(robot, 4)
    fresh.admit(torch.arange(4), target, q0, ONE_SEED)
    reused.admit(torch.arange(4), target, q0, ONE_SEED.replace(centring=0.5), posture=posture)
    BlockLauncher(reused)(3)
    assert torch.equal(reused.gains[:, :2], torch.tensor([[LM.posture_gain, 0.5]] * 4, dtype=F64))
    reused.admit(torch.arange(4), target, q0, ONE_SEED)
    assert (reused.gains == 0).all() and reused.terms_used == {0, 1}
    for slots in (fresh, reused):
        BlockLauncher(slots)(5)
    for field in ("q", "best_q", "best_score", "mu", "iterations", "status", "cost"):
        assert torch.equal(getattr(fresh, field), getattr(reused, field)), field


def test_kernel_is_cached_per_layout_and_dtype() -> None:
    arm = Layout(frames=1, length=7, joints=7)
    assert lm_block_kernel(arm, F64) is lm_block_kernel(Layout(1, 7, 7), F64)
    assert lm_block_kernel(arm, F64) is not lm_block_kernel(arm, F32)
    assert builtin("panda", F64).chains.layout == arm
    assert (Layout(4, 3, 12, floating=True).nq, Layout(4, 3, 12, floating=True).dof) == (19, 18)
    for bad in ((0, 1, 1), (1, 0, 1), (1, 1, 0), (1.0, 1, 1)):
        with pytest.raises(ValueError):
            Layout(*bad)
    with pytest.raises(TypeError):
        lm_block_kernel(arm, torch.float16)


def test_admitting_a_slice_of_slots_equals_admitting_their_indices() -> None:
    robot = builtin("ur5e", F64)
    q0 = robot.random_q((3,), generator=gen(86))
    target = robot.fk(robot.random_q((3,), generator=gen(87)))
    by_slice, by_index = open_store(robot, 5), open_store(robot, 5)
    by_slice.admit(slice(1, 4), target, q0, ONE_SEED, seed=4)
    by_index.admit(torch.arange(1, 4), target, q0, ONE_SEED, seed=4)
    BlockLauncher(by_slice)(8, 4)  # the first 4 slots only: slot 4 is empty
    BlockLauncher(by_index)(8)
    for field in ("q", "best_q", "best_score", "mu", "iterations", "status", "rng", "cost"):
        assert torch.equal(getattr(by_slice, field), getattr(by_index, field)), field


@pytest.mark.parametrize("store", ["host", "tensor"])
def test_a_launch_over_a_range_of_slots_runs_those_alone(store: str) -> None:
    """``BlockLauncher(block, rows, first)`` (the deadline's slices, ik_layer.engine.pace) advances slots first to
    first + rows - 1 and no other, each exactly as a launch over all of them does."""
    robot = builtin("ur5e", F64)
    target = robot.fk(robot.random_q((6,), generator=gen(88)))
    ranged, whole = open_store(robot, 6, store), open_store(robot, 6, store)
    for slots in (ranged, whole):
        slots.admit(slice(0, 6), target, None, ONE_SEED, seed=7)
    BlockLauncher(ranged)(8, 3, 2)  # slots 2, 3, 4
    BlockLauncher(whole)(8)
    assert ranged.iterations.tolist() == [0, 0, 8, 8, 8, 0]
    for field in ("q", "best_q", "best_score", "iterations", "status", "rng"):
        mine, all_of_them = getattr(ranged, field)[2:5], getattr(whole, field)[2:5]
        assert torch.equal(mine, all_of_them), field
    with pytest.raises(ValueError, match="rows"):
        BlockLauncher(ranged)(8, 5, 2)


# --------------------------------------------------------------------------- starts drawn in the kernel


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_random_starts_are_drawn_in_the_limits_from_the_restart_stream(dtype: torch.dtype, tiny_urdf: Path) -> None:
    robot = ik_layer.load_robot(tiny_urdf, ee_frame="tool", dtype=dtype)
    n = 64
    target = robot.fk(robot.random_q((n,), generator=gen(70)))
    drawn = open_store(robot, n)
    drawn.admit(torch.arange(n), target, None, SolveOptions(max_iterations=0), seed=5)  # no iteration: the start
    BlockLauncher(drawn)(4)
    assert drawn.status.tolist() == [EXHAUSTED] * n and drawn.random_start.tolist() == [2] * n
    q = drawn.best_q
    assert bool(((q >= robot.lower) & (q <= robot.upper)).all())
    assert torch.equal(q, robot.wrap(q)) and len({tuple(row) for row in q.tolist()}) == n  # one stream per slot
    assert float(q[:, ~robot.continuous].std(dim=0).min()) > 0.1  # spread over the limits

    # Same seed and offsets: the same starts and the same solve, whatever the block size and the block-0 launches.
    options = SolveOptions(max_iterations=150, num_seeds=1)
    runs = []
    for block in (1, 16):
        slots = open_store(robot, n)
        slots.admit(torch.arange(n), target, None, options, seed=5)
        launch = BlockLauncher(slots)
        launch(0)  # draws the starts; a later launch neither draws again nor reseeds the stream
        for _ in range(options.max_iterations + 1):
            if not bool(slots.running().any()):
                break
            launch(block)
        runs.append(slots)
    for field in ("q", "best_q", "best_score", "iterations", "status", "rng"):
        assert torch.equal(getattr(runs[0], field), getattr(runs[1], field)), field
    assert float((runs[0].status == SOLVED).float().mean()) >= 0.9
    # A given start in the same slot afterwards: no draw.
    runs[0].admit([0], target[:1], q[:1], options, seed=5)
    assert runs[0].random_start[0].item() == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_sin_cos_agree_with_the_c_library(dtype: torch.dtype):
    # Angles anywhere up to 1e5 (the polynomials' range in float64), near multiples of pi / 2 where the reduced
    # angle is tiny, then the C library's range and non-finite angles.
    wp.init()  # as the engine does before its first launch
    sin_cos = sin_cos_function(wp.float64 if dtype == F64 else wp.float32)

    @wp.kernel(module="unique", enable_backward=False)
    def evaluate(x: wp.array(dtype=Any), out: wp.array2d(dtype=Any)):  # typed by the arrays at launch
        i = wp.tid()
        s, c = sin_cos(x[i])
        out[i, 0] = s
        out[i, 1] = c

    rng = np.random.default_rng(7)
    near = np.arange(-400, 400) * (np.pi / 2)
    x = np.concatenate([
        rng.uniform(-7.0, 7.0, 20_000), rng.uniform(-1e5, 1e5, 20_000), near, near + 1e-9, np.nextafter(near, 0.0),
        [0.0, -0.0, 1e-300, 2.5e5, -1e9, 1e300],
    ])  # fmt: skip
    if dtype == F32:  # the angles float32 holds
        x = x[np.abs(x) < 1e30].astype(np.float32).astype(np.float64)
    inputs = torch.from_numpy(np.concatenate([x, [np.inf, -np.inf, np.nan]])).to(dtype)
    out = torch.zeros(len(inputs), 2, dtype=dtype)
    wp.launch(evaluate, dim=len(inputs), inputs=[wp.from_torch(inputs), wp.from_torch(out)], device="cpu")
    got = out.double().numpy()
    exact = np.stack([np.sin(x), np.cos(x)], -1)
    tol = 2.3e-16 if dtype == F64 else 1.2e-7  # one unit in the last place of 1
    assert float(np.abs(got[: len(x)] - exact).max()) <= tol
    assert np.isnan(got[len(x) :]).all()  # sin and cos of inf and NaN are NaN, as the C library's
