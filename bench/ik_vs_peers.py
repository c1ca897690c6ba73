"""Benchmark: batched IK, ik-layer vs pytorch-kinematics and the classic Pinocchio CLIK loop, on the CPU.

The same reachable targets (``robot.fk`` of configurations drawn uniformly inside the joint limits,
fixed seed) for panda, ur5e and iiwa14 at each batch size (default 1k and 10k), solved by

* ``ik-layer f64`` / ``ik-layer f32``: ``ik_layer.solve`` with its defaults (4 seeds per target,
  200 iterations), the robot and targets in float64 / float32.
* ``pk PseudoInverseIK``: pytorch-kinematics' ``PseudoInverseIK`` (float64, same URDF files, ee links
  ``panda_link8`` / ``tool0``) with the best settings we found reading ``pytorch_kinematics/ik.py``
  and trying them (see :data:`PK_SETTINGS`): 20 random restarts sampled uniformly in the joint limits
  (10 solve 97 % of panda targets, 20 solve 99.5 %, 30 solve 99.9 % at half the speed of 20), its
  default 50 iterations (converged retries need about 15; pk steps the whole batch until the last
  problem is done, so a larger budget only costs time),
  ``early_stopping_any_converged`` (without it every problem runs the full budget: 5-7x slower at
  the same success), no "no-improvement" early stopping (it never helped success), the default
  error-proportional LM damping 0.1 (0.01 loses ~2 points of success), lr 1 (its line search is
  ~40x slower for no gain), its final joint-limit enforcement (wrap + clamped refinement) on.
  Its tolerances are set to the strict ones (1e-4 m, 1e-3 rad) so it does not stop early at looser
  ones. At the largest batch it runs once (``--pk-max-batch``) because it is slow.
* ``pinocchio CLIK``: the loop of Pinocchio's inverse-kinematics example, one target at a time in
  Python: damped pseudo-inverse on the ``log6`` error of the end-effector frame with the
  ``Jlog6`` correction, ``pin.integrate``, joints clamped to their limits after every step,
  random restarts in the limits every ``--clik-restart`` (20) iterations within the same
  200-iteration budget as ik-layer. Step 1 and damping 1e-3 instead of the example's 0.1 and 1e-12
  (with a 0.1 step, 200 iterations are too few: about 90 are needed per seed to reach 1e-4; we
  tried steps 0.1-1, damping 1e-12-1e-2 and restarts every 10-200 iterations: 41-51 % success for
  the example's settings, 87-93 % for these). It is timed
  on a subset (``--clik-subset``, default 200 targets) and its rate is extrapolated per target.
* ``rtb ik_LM``: roboticstoolbox-python's C++ Levenberg-Marquardt (``ETS.ik_LM``, Chan's damping,
  ``k`` 1), one target per call, on the ETS of the same URDF file up to the same ee frame (joint
  order checked against ours). ``tol`` 5e-9 on its cost ``E = |e|^2 / 2`` (e: position and
  angle-axis error), i.e. ``|e| <= 1e-4``; ``joint_limits=True`` (a converged search outside the
  limits is rejected and the next one starts). Its budget has the CLIK semantics: ``ilimit`` 20
  iterations per search, ``slimit`` 10 searches (random restarts in the limits), 200 iterations in
  all (``--rtb-ilimit``, ``--rtb-slimit``; its own defaults, 30 x 100, reach 100 % on panda at
  about the same speed: a rejected search ends when it converges, so a search rarely uses its whole
  ``ilimit``). Its restarts come from C++ ``rand()``, not from our seed.
* ``TRAC-IK``: ``pytracik`` (TRAC-IK's KDL pseudo-inverse and SQP solvers racing in two threads),
  solve type Speed (the first solution wins), timeout 5 ms per target, ``eps`` 1e-5 per twist
  component (so at most 1.7e-5 m / rad), built from the URDF text between the URDF's root link and
  the ee frame (joint order checked by comparing its FK and limits with ours), seeded per target
  with a configuration drawn in the limits (fixed seed), one target per call. Its time limit is
  wall clock, so its success depends on the machine's load. A failed target keeps its seed (and
  fails the check); answers are clamped to Pinocchio's limits (it parses them in float32, as pk).

rtb and TRAC-IK are skipped, with a printed line, when they are not installed
(``pip install roboticstoolbox-python pytracik``), or with ``--no-rtb`` / ``--no-tracik``.

Every solution is checked in float64 with Pinocchio (``forwardKinematics`` +
``updateFramePlacements`` on ``robot.model``), never with the solvers' own flags: a solution
counts at ``1e-4 m / 1e-3 rad`` if its position error is <= 1e-4 m and its orientation error
(``|log3(R_target R^T)|``) is <= 1e-3 rad. Configurations outside the joint limits are reported in
the ``in limits`` column (pk's are clamped to Pinocchio's limits first: it parses them in float32).

Times are wall clock of one ``solve`` call for the whole batch (median of ``--repeats`` runs: by
default ``max(3, 1000 // batch)`` below 10k, so that a small batch's figure is a median over many
calls, and 1 at 10k; after a warm-up on a small batch; for the per-target peers, the whole Python
loop over the targets); ``solves/s`` = targets / time. The ``ik-layer x`` columns are ik-layer's
solves/s (f64, f32) divided by that row's. ``--latency N`` adds a table of batch-1 latency: N
other targets, one per call, for every solver (median and p99 in ms, and the success of those
answers), and the time to answer an unreachable target (other targets pushed 1 m further from the
base, out of every arm's reach; median ms, and its ratio to the reachable median; such answers must
all fail the check). Each solver makes ``--repeats`` passes (default 3) over those targets and the
pass with the lowest median counts, for every solver alike.

Run: ``python bench/ik_vs_peers.py`` (a few minutes), ``--quick`` (200 targets unless ``--batch`` is
given, under a minute), ``--batch 1000 --batch 5000``, ``--latency 200``, ``--json results.json``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import gc
import importlib
import importlib.metadata
import json
import logging
import math
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import numpy as np
import pinocchio as pin
import torch
from common import markdown_table

import ik_layer
from ik_layer.robots import REGISTRY

ROBOTS = ["panda", "ur5e", "iiwa14"]
STRICT = (1e-4, 1e-3)  # [m], [rad]
LOOSE = (1e-3, 1e-2)
SEED = 20240611
MAX_ITERATIONS = 200  # ik-layer's default budget, also given to CLIK
PK_REFINEMENT = 10  # pk's default clamped joint-limit refinement iterations, run after its main loop
PK_SETTINGS = {
    "num_retries": 20,
    "max_iterations": 50,
    "lr": 1.0,
    "lm_damping": 0.1,
    "regularlization": 1e-9,
    "early_stopping_any_converged": True,
    "early_stopping_no_improvement": None,
    "enforce_joint_limits": True,
}
CLIK_SETTINGS = {"dt": 1.0, "damping": 1e-3}
CLIK_RESTART = 20  # CLIK iterations per random restart
# roboticstoolbox-python's ETS.ik_LM: tol bounds E = |e|^2 / 2, so 5e-9 means |e| <= 1e-4 (position and angle-axis).
RTB_SETTINGS = {"ilimit": 20, "slimit": 10, "tol": 5e-9, "joint_limits": True, "method": "chan", "k": 1.0}
RTB_MODULE = "roboticstoolbox._fknm_c"  # rtb's C++ extension: absent from its pure-Python wheels, needed by ik_LM
TRACIK_SETTINGS = {"timeout": 0.005, "eps": 1e-5, "solve_type": "Speed"}  # timeout [s] per target
PEER_PACKAGES = {  # import name: pip name, of the optional peers
    "pytorch_kinematics": "pytorch-kinematics",
    RTB_MODULE: "roboticstoolbox-python",
    "pytracik": "pytracik",
}


def pk_settings(budget: int | None = None) -> dict:
    """:data:`PK_SETTINGS`, or with a total ``budget`` of iterations: main loop plus joint-limit refinement.

    The refinement gets ``min(10, budget // 2)`` of the budget, so that every solver gets the same
    number of steps (``None``: pk's 50 iterations plus its 10 refinement iterations).
    """
    if budget is None:
        return dict(PK_SETTINGS)
    refinement = min(PK_REFINEMENT, budget // 2)
    return {**PK_SETTINGS, "max_iterations": budget - refinement, "num_limit_refinement_iterations": refinement}


def rtb_settings(budget: int | None = None) -> dict:
    """:data:`RTB_SETTINGS`, or with a total ``budget`` of iterations: ``slimit`` searches of ``ilimit`` (<= 20) each.

    The fewest searches of at most 20 iterations that fit the budget: 200 -> 10 x 20, 30 -> 2 x 15, 10 -> 1 x 10.
    """
    if budget is None:
        return dict(RTB_SETTINGS)
    slimit = -(-budget // RTB_SETTINGS["ilimit"])
    return {**RTB_SETTINGS, "ilimit": budget // slimit, "slimit": slimit}


@functools.cache
def importable(module: str) -> bool:
    """Whether ``module`` imports; when it does not, say so once on stderr, with its pip name."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        package = PEER_PACKAGES.get(module, module)
        print(f"{package} is not importable ({exc}): skipped (pip install {package})", file=sys.stderr, flush=True)
        return False
    return True


@dataclass
class Row:
    """One (solver, robot, batch) measurement; errors are Pinocchio's, in float64."""

    solver: str
    robot: str
    batch: int
    evaluated: int  # targets whose solutions were checked (the CLIK subset for CLIK)
    timed: int  # targets in the timed solve calls
    seconds: float  # median wall time of one call over ``timed`` targets [s]
    solves_per_s: float
    success_strict: float
    success_loose: float
    in_limits: float
    pos_median: float  # [m]
    pos_p99: float
    ori_median: float  # [rad]
    ori_p99: float
    repeats: int
    notes: str = ""
    ratio_f64: float | None = None  # ik-layer f64 solves/s over this row's
    ratio_f32: float | None = None
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- verification


def pin_errors(model: pin.Model, frame: str, q_pin: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio position [m] and orientation [rad] errors (n,) of configurations (n, nq) against (n, 4, 4)."""
    data = model.createData()
    fid = model.getFrameId(frame)
    pos, ori = np.empty(len(q_pin)), np.empty(len(q_pin))
    for i, (qi, t) in enumerate(zip(q_pin, targets, strict=False)):
        pin.forwardKinematics(model, data, qi)
        pin.updateFramePlacements(model, data)
        m = data.oMf[fid]
        pos[i] = np.linalg.norm(t[:3, 3] - m.translation)
        ori[i] = np.linalg.norm(pin.log3(t[:3, :3] @ m.rotation.T))
    return pos, ori


def verify(robot: ik_layer.Robot, q: torch.Tensor, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pinocchio position [m] and orientation [rad] errors and in-limits flags (n,) of q (n, dof) vs targets (n, 4, 4).

    Non-finite configurations get infinite errors. The limits are the solver's, rounded to q's dtype
    (float32 rounds them by up to ~1e-7 rad).
    """
    q64 = q.detach().to(torch.float64).cpu()
    lower, upper = (x.to(q.dtype).double().cpu() for x in (robot.lower, robot.upper))
    finite = torch.isfinite(q64).all(-1)
    in_limits = finite & ((q64 >= lower) & (q64 <= upper)).all(-1)
    q_pin = robot.to_pinocchio_q(torch.where(finite[:, None], q64, lower)).numpy()
    pos, ori = pin_errors(robot.model, robot.ee_frame, q_pin, np.asarray(targets, dtype=np.float64))
    pos[~finite.numpy()] = np.inf
    ori[~finite.numpy()] = np.inf
    return pos, ori, in_limits.numpy()


def succeeded(pos: np.ndarray, ori: np.ndarray, tolerance: tuple[float, float] = STRICT) -> np.ndarray:
    """Per target, whether both errors are within ``tolerance`` (position [m], orientation [rad])."""
    return (pos <= tolerance[0]) & (ori <= tolerance[1])


def summarize(robot: ik_layer.Robot, q: torch.Tensor, targets: np.ndarray, **fields) -> Row:
    """Check joint configurations (n, dof) with Pinocchio (:func:`verify`) and fill a :class:`Row`."""
    pos, ori, in_limits = verify(robot, q, targets)
    strict, loose = succeeded(pos, ori, STRICT), succeeded(pos, ori, LOOSE)
    return Row(
        robot=robot.name,
        evaluated=len(pos),
        success_strict=float(strict.mean()),
        success_loose=float(loose.mean()),
        in_limits=float(in_limits.mean()),
        pos_median=float(np.median(pos)),
        pos_p99=float(np.quantile(pos, 0.99)),
        ori_median=float(np.median(ori)),
        ori_p99=float(np.quantile(ori, 0.99)),
        **fields,
    )


def timed(fn: Callable[[], torch.Tensor], repeats: int) -> tuple[torch.Tensor, float]:
    """Run ``fn`` ``repeats`` times; its last output and the median wall time [s]."""
    samples, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - start)
    return out, statistics.median(samples)  # type: ignore[return-value]


def make_targets(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reachable targets: ``n`` configurations drawn uniformly in the limits (fixed seed) and their FK (n, 4, 4)."""
    q_true = robot.random_q((n,), generator=torch.Generator(robot.device).manual_seed(seed))
    return q_true, robot.fk(q_true)


# --------------------------------------------------------------------------- the solvers


def ik_layer_options(budget: int = MAX_ITERATIONS) -> ik_layer.SolveOptions:
    """ik-layer's defaults (4 seeds per target) with the strict tolerances and an iteration ``budget``."""
    return ik_layer.SolveOptions(max_iterations=budget, position_tolerance=STRICT[0], orientation_tolerance=STRICT[1])


def solve_ik_layer(
    robot: ik_layer.Robot, targets: torch.Tensor, budget: int = MAX_ITERATIONS, seed: int = SEED + 1
) -> ik_layer.IKResult:
    """``ik_layer.solve`` with :func:`ik_layer_options`, its random starts drawn from ``seed``."""
    generator = torch.Generator(robot.device).manual_seed(seed)
    return ik_layer.solve(robot, targets.to(robot.dtype), ik_layer_options(budget), generator=generator)


def one_at_a_time(robot: ik_layer.Robot) -> Callable[[int, torch.Tensor], torch.Tensor]:
    """``ik_layer.solve`` of one target per call as a caller in a loop makes it: the options built once, one
    generator (seeded once) for the run, the target in the robot's dtype."""
    options, generator = ik_layer_options(), torch.Generator(robot.device).manual_seed(SEED + 1)
    return lambda i, t: ik_layer.solve(robot, t.to(robot.dtype), options, generator=generator).q


def run_ik_layer(
    name: str, dtype: torch.dtype, q_true: torch.Tensor, targets: torch.Tensor, repeats: int
) -> tuple[torch.Tensor, float, dict]:
    robot = ik_layer.load_robot(name, dtype=dtype)
    t = targets.to(dtype)
    solve_ik_layer(robot, t[:64], seed=0)  # warm-up
    holder = {}

    def call() -> torch.Tensor:
        res = solve_ik_layer(robot, t)
        holder["res"] = res
        return res.q

    q, seconds = timed(call, repeats)
    res = holder["res"]
    extra = {
        "own_success": float(res.success.double().mean()),
        "iterations_mean": float(res.iterations.double().mean()),
        "iterations_max": int(res.iterations.max()) if res.iterations.numel() else 0,
    }
    return q, seconds, extra


@functools.cache
def pk_chain(name: str, dtype: torch.dtype):
    import pytorch_kinematics as pk

    urdf = REGISTRY[name].urdf.read_text()
    return pk.build_serial_chain_from_urdf(urdf, REGISTRY[name].ee_frame).to(dtype=dtype)


def solve_pk(robot: ik_layer.Robot, targets: torch.Tensor, settings: dict | None = None) -> tuple[torch.Tensor, dict]:
    """pk's ``PseudoInverseIK`` in float64 on targets (n, 4, 4) with ``settings`` (default :data:`PK_SETTINGS`).

    Returns q (n, dof), clamped to Pinocchio's limits, and pk's own iteration count and success rate.
    """
    import pytorch_kinematics as pk

    settings = PK_SETTINGS if settings is None else settings
    chain = pk_chain(robot.name, torch.float64)
    if chain.get_joint_parameter_names() != robot.joint_names:
        raise RuntimeError(f"joint order differs: pk {chain.get_joint_parameter_names()} vs {robot.joint_names}")
    limits = torch.stack((chain.low, chain.high), dim=-1)
    # pk samples its restarts with the global RNG when the solver is built: seed it for reproducibility.
    torch.manual_seed(SEED + 2)
    ik = pk.PseudoInverseIK(chain, pos_tolerance=STRICT[0], rot_tolerance=STRICT[1], joint_limits=limits, **settings)
    sol = ik.solve(pk.Transform3d(matrix=targets.detach().double().cpu()))
    # Per target: a converged retry if any (pk's own flag), else the one of least scaled error.
    score = sol.err_pos / STRICT[0] + sol.err_rot / STRICT[1]
    score = torch.where(sol.converged, torch.full_like(score, -1.0), score)
    best = score.argmin(dim=1)
    q = sol.solutions[torch.arange(len(best)), best]
    # pk parses the limits in float32 (off by ~5e-9 rad): clamp to Pinocchio's before checking.
    q = torch.minimum(torch.maximum(q.double(), robot.lower.double().cpu()), robot.upper.double().cpu())
    return q, {"iterations": sol.iterations, "own_success": float(sol.converged_any.double().mean())}


def run_pk(
    name: str, robot: ik_layer.Robot, targets: torch.Tensor, repeats: int, settings: dict
) -> tuple[torch.Tensor, float, dict]:
    if robot.name != name:
        raise ValueError(f"robot {robot.name!r} is not {name!r}")
    solve_pk(robot, targets[:64], settings)  # warm-up
    holder = {}

    def call() -> torch.Tensor:
        q, holder["info"] = solve_pk(robot, targets, settings)
        return q

    q, seconds = timed(call, repeats)
    return q, seconds, {**holder["info"], **settings}


def clik_one(
    model: pin.Model,
    data: pin.Data,
    fid: int,
    target: pin.SE3,
    rng: np.random.Generator,
    budget: int,
    restart_every: int,
    dt: float,
    damping: float,
) -> tuple[np.ndarray, int]:
    """Pinocchio's CLIK example for one target, with random restarts; (q, iterations used)."""
    lower, upper = model.lowerPositionLimit, model.upperPositionLimit
    eye = np.eye(6)
    best_q, best_score = None, np.inf
    q = rng.uniform(lower, upper)
    for it in range(budget + 1):
        if it and it % restart_every == 0:
            q = rng.uniform(lower, upper)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        current = data.oMf[fid]
        pos = np.linalg.norm(target.translation - current.translation)
        ori = np.linalg.norm(pin.log3(target.rotation @ current.rotation.T))
        score = max(pos / STRICT[0], ori / STRICT[1])
        if score < best_score:
            best_q, best_score = q.copy(), score
        if score <= 1 or it == budget:
            return best_q, it
        i_m_d = current.actInv(target)
        err = pin.log6(i_m_d).vector  # error in the frame, as in Pinocchio's example
        jac = pin.getFrameJacobian(model, data, fid, pin.LOCAL)
        jac = -pin.Jlog6(i_m_d.inverse()) @ jac
        v = -jac.T @ np.linalg.solve(jac @ jac.T + damping * eye, err)
        q = np.clip(pin.integrate(model, q, v * dt), lower, upper)
    return best_q, budget  # pragma: no cover


def solve_clik(
    robot: ik_layer.Robot,
    targets: np.ndarray,
    budget: int = MAX_ITERATIONS,
    restart_every: int = CLIK_RESTART,
    settings: dict | None = None,
) -> tuple[torch.Tensor, list[int]]:
    """:func:`clik_one` on each target (n, 4, 4) in turn, ``budget`` iterations each; q (n, dof) and iterations used."""
    model = robot.model
    if robot.continuous.any():
        raise RuntimeError("the CLIK baseline samples q in Pinocchio's coordinates; continuous joints unsupported")
    settings = CLIK_SETTINGS if settings is None else settings
    data = model.createData()
    fid = model.getFrameId(robot.ee_frame)
    rng = np.random.default_rng(SEED + 3)
    out, iters = [], []
    for t in np.asarray(targets, dtype=np.float64):
        q, it = clik_one(
            model, data, fid, pin.SE3(t[:3, :3].copy(), t[:3, 3].copy()), rng, budget, restart_every, **settings
        )
        out.append(q)
        iters.append(it)
    return torch.as_tensor(np.array(out), dtype=torch.float64), iters  # nq == dof: no continuous joints


def run_clik(
    robot: ik_layer.Robot, targets: np.ndarray, restart_every: int, settings: dict
) -> tuple[torch.Tensor, float, dict]:
    start = time.perf_counter()
    q, iters = solve_clik(robot, targets, MAX_ITERATIONS, restart_every, settings)
    seconds = time.perf_counter() - start
    extra = {"iterations_mean": float(np.mean(iters)), "restart_every": restart_every, **settings}
    return q, seconds, extra


def urdf_root_link(urdf: str) -> str:
    """The root link of a URDF document: the one link that is no joint's child."""
    root = ElementTree.fromstring(urdf)
    children = {j.find("child").get("link") for j in root.iter("joint")}
    roots = [link.get("name") for link in root.iter("link") if link.get("name") not in children]
    if len(roots) != 1:
        raise ValueError(f"the URDF has {len(roots)} root links: {roots}")
    return roots[0]


def _check_fk(robot: ik_layer.Robot, fk: Callable[[np.ndarray], np.ndarray], who: str) -> None:
    """Raise unless ``fk`` (q (dof,) -> (4, 4)) agrees with ``robot.fk`` on a few configurations in the limits."""
    q = robot.random_q((4,), generator=torch.Generator(robot.device).manual_seed(SEED + 4))
    ours = robot.fk(q).double().cpu().numpy()
    theirs = np.stack([fk(qi) for qi in q.double().cpu().numpy()])
    if not np.allclose(theirs, ours, atol=1e-9):
        raise RuntimeError(f"{who}'s FK differs from ik-layer's on {robot.name}: joint order or frames differ")


def _clamp(robot: ik_layer.Robot, q: np.ndarray) -> torch.Tensor:
    """q (n, dof) in float64, clamped to Pinocchio's limits (the peers parse them in float32: off by ~5e-9 rad)."""
    q = torch.as_tensor(q, dtype=torch.float64).reshape(-1, robot.dof)
    return torch.minimum(torch.maximum(q, robot.lower.double().cpu()), robot.upper.double().cpu())


@functools.cache
def rtb_ets(name: str):
    """roboticstoolbox-python's ETS of the built-in robot ``name``, from its URDF file up to its ee frame."""
    import roboticstoolbox as rtb
    from roboticstoolbox.models.URDF.URDFRobot import URDF_read

    spec = REGISTRY[name]
    links, robot_name, _ = URDF_read(spec.urdf.resolve())
    model = rtb.Robot(links, name=robot_name)
    ets = model.ets(end=spec.ee_frame)
    joints = {link.jindex: getattr(link, "_joint_name", None) for link in model.links if link.isjoint}
    names = [joints.get(e.jindex) for e in ets.joints()]
    # Keep only the ETS (dropped at exit, :func:`_drop_rtb`): rtb objects alive at exit print nanobind leak
    # warnings, and rtb's methods (``ets`` among them) are lru-cached on the class, holding on to the robot.
    for cls in type(model).__mro__:
        for method in vars(cls).values():
            if hasattr(method, "cache_clear"):
                method.cache_clear()
    del model, links
    gc.collect()
    robot = ik_layer.load_robot(name)
    if names != robot.joint_names:
        raise RuntimeError(f"joint order differs: rtb {names} vs {robot.joint_names}")
    _check_fk(robot, lambda q: ets.fkine(q).A, "roboticstoolbox")
    return ets


@atexit.register
def _drop_rtb() -> None:
    """Free the cached ETSs before the interpreter's teardown."""
    rtb_ets.cache_clear()
    gc.collect()


def solve_rtb(robot: ik_layer.Robot, targets: np.ndarray, settings: dict | None = None) -> tuple[torch.Tensor, dict]:
    """roboticstoolbox-python's C++ ``ETS.ik_LM`` on each target (n, 4, 4) in turn; q (n, dof) and its own stats.

    ``settings`` default to :data:`RTB_SETTINGS`; every search starts from a random configuration in the limits.
    """
    settings = RTB_SETTINGS if settings is None else settings
    ets = rtb_ets(robot.name)
    out, iterations, searches, success = [], 0, 0, 0
    for t in np.ascontiguousarray(targets, dtype=np.float64):
        sol = ets.ik_LM(t, **settings)
        out.append(sol.q)
        iterations += sol.iterations
        searches += sol.searches
        success += bool(sol.success)
    n = max(len(out), 1)
    info = {"own_success": success / n, "iterations_mean": iterations / n, "searches_mean": searches / n}
    return _clamp(robot, np.array(out)), info


def run_per_target(
    solve: Callable[..., tuple[torch.Tensor, dict]],
    robot: ik_layer.Robot,
    targets: np.ndarray,
    repeats: int,
    settings: dict,
) -> tuple[torch.Tensor, float, dict]:
    """Time a per-target peer ``solve(robot, targets, settings) -> (q, info)`` after a 16-target warm-up."""
    solve(robot, targets[:16], settings)
    holder = {}

    def call() -> torch.Tensor:
        q, holder["info"] = solve(robot, targets, settings)
        return q

    q, seconds = timed(call, repeats)
    return q, seconds, {**holder["info"], **settings}


@functools.cache
def tracik_solver(name: str, timeout: float, eps: float, solve_type: str):
    """A ``pytracik.TRAC_IK`` of the built-in robot ``name``: its URDF text, from the root link to the ee frame."""
    import pytracik

    spec = REGISTRY[name]
    urdf = spec.urdf.read_text()
    solver = pytracik.TRAC_IK(
        urdf_root_link(urdf), spec.ee_frame, urdf, timeout, eps, getattr(pytracik.SolveType, solve_type)
    )
    robot = ik_layer.load_robot(name)
    limits = np.array([pytracik.get_joint_lower_bounds(solver), pytracik.get_joint_upper_bounds(solver)])
    ours = torch.stack((robot.lower, robot.upper)).double().cpu().numpy()
    if limits.shape != ours.shape or not np.allclose(limits, ours, atol=1e-6):
        raise RuntimeError(f"TRAC-IK's joint limits differ from ik-layer's on {name}: {limits} vs {ours}")
    _check_fk(robot, lambda q: pytracik.fk(solver, q), "TRAC-IK")
    return solver


def solve_tracik(
    robot: ik_layer.Robot, targets: np.ndarray, settings: dict | None = None, seed: int = SEED + 5
) -> tuple[torch.Tensor, dict]:
    """TRAC-IK (``pytracik``) on each target (n, 4, 4) in turn from a seed drawn in the limits; q (n, dof), stats.

    ``settings`` default to :data:`TRACIK_SETTINGS`. A target TRAC-IK gives up on keeps its seed.
    """
    import pytracik

    settings = TRACIK_SETTINGS if settings is None else settings
    solver = tracik_solver(robot.name, **settings)
    rng = np.random.default_rng(seed)
    lower, upper = robot.lower.double().cpu().numpy(), robot.upper.double().cpu().numpy()
    out, success = [], 0
    for t in np.asarray(targets, dtype=np.float64):
        start = rng.uniform(lower, upper)
        x, y, z = t[:3, 3]
        qx, qy, qz, qw = pin.Quaternion(t[:3, :3]).coeffs()
        result = pytracik.ik(solver, start, x, y, z, qx, qy, qz, qw)
        found = result[0] >= 0  # its return code: the number of solutions found, or negative
        out.append(result[1:] if found else start)
        success += bool(found)
    return _clamp(robot, np.array(out)), {"own_success": success / max(len(out), 1)}


# --------------------------------------------------------------------------- the run


def bench_robot(name: str, batch: int, args: argparse.Namespace, largest: int) -> list[Row]:
    robot = ik_layer.load_robot(name)  # float64: targets and checks
    q_true, targets = make_targets(robot, batch, SEED + batch)
    targets_np = targets.numpy()
    repeats = args.repeats if args.repeats else (max(3, 1000 // batch) if batch < 10_000 else 1)
    rows = []

    for label, dtype in (("ik-layer f64", torch.float64), ("ik-layer f32", torch.float32)):
        q, seconds, extra = run_ik_layer(name, dtype, q_true, targets, repeats)
        rows.append(
            summarize(
                robot,
                q,
                targets_np,
                solver=label,
                batch=batch,
                timed=batch,
                seconds=seconds,
                solves_per_s=batch / seconds,
                repeats=repeats,
                extra=extra,
            )
        )
        log(rows[-1])

    if not args.no_pk and importable("pytorch_kinematics"):
        pk_batch = min(batch, args.pk_max_batch)
        pk_repeats = 1 if batch == largest else repeats
        q, seconds, extra = run_pk(name, robot, targets[:pk_batch], pk_repeats, PK_SETTINGS)
        note = "" if pk_batch == batch else f"first {pk_batch} targets"
        rows.append(
            summarize(
                robot,
                q,
                targets_np[:pk_batch],
                solver="pk PseudoInverseIK",
                batch=batch,
                timed=pk_batch,
                seconds=seconds,
                solves_per_s=pk_batch / seconds,
                repeats=pk_repeats,
                notes=note,
                extra=extra,
            )
        )
        log(rows[-1])

    if not args.no_clik:
        subset = min(batch, args.clik_subset)
        q, seconds, extra = run_clik(robot, targets_np[:subset], args.clik_restart, CLIK_SETTINGS)
        rows.append(
            summarize(
                robot,
                q,
                targets_np[:subset],
                solver="pinocchio CLIK",
                batch=batch,
                timed=subset,
                seconds=seconds,
                solves_per_s=subset / seconds,
                repeats=1,
                notes=f"{subset} targets, one at a time, extrapolated",
                extra=extra,
            )
        )
        log(rows[-1])

    per_target = (
        ("rtb ik_LM", RTB_MODULE, args.no_rtb, functools.partial(run_per_target, solve_rtb), cli_rtb_settings(args)),
        ("TRAC-IK", "pytracik", args.no_tracik, functools.partial(run_per_target, solve_tracik), TRACIK_SETTINGS),
    )
    for label, module, skip, run, settings in per_target:
        if skip or not importable(module):
            continue
        q, seconds, extra = run(robot, targets_np, repeats, settings)
        rows.append(
            summarize(
                robot,
                q,
                targets_np,
                solver=label,
                batch=batch,
                timed=batch,
                seconds=seconds,
                solves_per_s=batch / seconds,
                repeats=repeats,
                notes="one at a time",
                extra=extra,
            )
        )
        log(rows[-1])

    by_label = {r.solver: r for r in rows}
    for r in rows:
        if not r.solver.startswith("ik-layer"):
            r.ratio_f64 = by_label["ik-layer f64"].solves_per_s / r.solves_per_s
            r.ratio_f32 = by_label["ik-layer f32"].solves_per_s / r.solves_per_s
    return rows


def cli_rtb_settings(args: argparse.Namespace) -> dict:
    """:data:`RTB_SETTINGS` with the command line's ``--rtb-ilimit`` and ``--rtb-slimit``."""
    return {**RTB_SETTINGS, "ilimit": args.rtb_ilimit, "slimit": args.rtb_slimit}


@dataclass
class Latency:
    """Batch-1 latency of one solver on one robot: ``targets`` calls of one target each."""

    solver: str
    robot: str
    targets: int
    median_ms: float
    p99_ms: float
    success_strict: float  # of those answers, checked with Pinocchio
    unreachable_median_ms: float  # one call per unreachable target
    unreachable_success: float  # of those answers, checked with Pinocchio: must be 0


def latency_solvers(robot: ik_layer.Robot, args: argparse.Namespace) -> dict[str, Callable[[int, torch.Tensor], Any]]:
    """Every solver of the run as ``fn(i, target (1, 4, 4) float64) -> q (1, dof)``, one target per call (ik-layer
    as :func:`one_at_a_time`, the peers as the batch runs call them)."""
    r64 = ik_layer.load_robot(robot.name, dtype=torch.float64)
    r32 = ik_layer.load_robot(robot.name, dtype=torch.float32)
    solvers: dict[str, Callable[[int, torch.Tensor], Any]] = {
        "ik-layer f64": one_at_a_time(r64),
        "ik-layer f32": one_at_a_time(r32),
    }
    if not args.no_pk and importable("pytorch_kinematics"):
        solvers["pk PseudoInverseIK"] = lambda i, t: solve_pk(robot, t, PK_SETTINGS)[0]
    if not args.no_clik:
        solvers["pinocchio CLIK"] = lambda i, t: solve_clik(
            robot, t.numpy(), MAX_ITERATIONS, args.clik_restart, CLIK_SETTINGS
        )[0]
    if not args.no_rtb and importable(RTB_MODULE):
        rtb = cli_rtb_settings(args)
        solvers["rtb ik_LM"] = lambda i, t: solve_rtb(robot, t.numpy(), rtb)[0]
    if not args.no_tracik and importable("pytracik"):
        solvers["TRAC-IK"] = lambda i, t: solve_tracik(robot, t.numpy(), TRACIK_SETTINGS, seed=SEED + 5 + i)[0]
    return solvers


def make_unreachable(robot: ik_layer.Robot, n: int, seed: int) -> torch.Tensor:
    """Unreachable targets (n, 4, 4): reachable ones (fixed seed) moved 1 m further from the base, radially."""
    _, targets = make_targets(robot, n, seed)
    targets = targets.clone()
    position = targets[:, :3, 3]
    targets[:, :3, 3] = position + position / position.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    return targets


def time_calls(
    robot: ik_layer.Robot, fn: Callable[[int, torch.Tensor], Any], targets: torch.Tensor, passes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Wall times [ms] of ``fn`` on each target in turn, and whether each answer passes the strict check: of the
    pass (of ``passes`` over the same targets, same calls) with the lowest median, the least disturbed by other
    jobs on a shared machine."""
    best: tuple[np.ndarray, list[torch.Tensor]] | None = None
    for _ in range(passes):
        samples, answers = [], []
        for i in range(len(targets)):
            start = time.perf_counter()
            q = fn(i, targets[i : i + 1])
            samples.append(time.perf_counter() - start)
            answers.append(q.detach().double().cpu().reshape(1, -1))
        ms = np.array(samples) * 1e3
        if best is None or np.median(ms) < np.median(best[0]):
            best = (ms, answers)
    assert best is not None
    pos, ori, _ = verify(robot, torch.cat(best[1]), targets.numpy())
    return best[0], succeeded(pos, ori)


def bench_latency(name: str, n: int, args: argparse.Namespace) -> list[Latency]:
    """Median and p99 wall time [ms] of one call per target, ``n`` targets, for every solver; and the median
    time to answer one of ``max(n // 4, 1)`` unreachable targets (each the best of ``--repeats`` passes)."""
    robot = ik_layer.load_robot(name)
    _, targets = make_targets(robot, n, SEED - 1)  # not the batch targets
    far = make_unreachable(robot, max(n // 4, 1), SEED - 2)
    passes = args.repeats or 3
    out = []
    for label, fn in latency_solvers(robot, args).items():
        fn(0, targets[:1])  # warm-up
        ms, ok = time_calls(robot, fn, targets, passes)
        far_ms, far_ok = time_calls(robot, fn, far, passes)
        row = Latency(
            label, name, n, float(np.median(ms)), float(np.quantile(ms, 0.99)), float(ok.mean()),
            float(np.median(far_ms)), float(far_ok.mean()),
        )  # fmt: skip
        out.append(row)
        print(
            f"  {label:<20} {name:<6} batch      1: median {row.median_ms:.2f} ms, p99 {row.p99_ms:.2f} ms "
            f"({row.success_strict:.1%} strict, {n} targets); unreachable: median {row.unreachable_median_ms:.2f} ms "
            f"({row.unreachable_median_ms / row.median_ms:.1f}x), {row.unreachable_success:.1%} success",
            file=sys.stderr,
            flush=True,
        )
    return out


def log(row: Row) -> None:
    print(
        f"  {row.solver:<20} {row.robot:<6} batch {row.batch:>6}: {row.success_strict:7.2%} strict, "
        f"{row.solves_per_s:9.0f} solves/s ({row.seconds:.2f} s for {row.timed})",
        file=sys.stderr,
        flush=True,
    )


def package_versions() -> dict[str, str]:
    """Installed versions of the peers' distributions (absent ones left out)."""
    versions = {}
    for package in PEER_PACKAGES.values():
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[package] = importlib.metadata.version(package)
    return versions


def pct(x: float) -> str:
    return f"{100 * x:.2f} %" if x < 1 else "100 %"


def sci(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.1e}"


def markdown(rows: list[Row]) -> str:
    header = [
        "solver", "robot", "batch", "success 1e-4 m / 1e-3 rad", "success 1 mm / 0.01 rad", "in limits",
        "pos err median / p99 [m]", "ori err median / p99 [rad]", "solves/s", "ik-layer f64 x", "ik-layer f32 x",
    ]  # fmt: skip
    ratio = lambda x: "" if x is None else f"{x:.1f}x" if x >= 0.95 else f"{x:.2g}x"  # noqa: E731
    cells = [
        [
            r.solver + (f" ({r.notes})" if r.notes else ""),
            r.robot,
            str(r.batch),
            pct(r.success_strict),
            pct(r.success_loose),
            pct(r.in_limits),
            f"{sci(r.pos_median)} / {sci(r.pos_p99)}",
            f"{sci(r.ori_median)} / {sci(r.ori_p99)}",
            f"{r.solves_per_s:,.0f}",
            ratio(r.ratio_f64),
            ratio(r.ratio_f32),
        ]
        for r in rows
    ]
    return markdown_table(header, cells, text_columns=2)


def latency_cells(r: Latency) -> list[str]:
    """One row of the latency table."""
    far = r.unreachable_median_ms
    return [r.solver, r.robot, str(r.targets), f"{r.median_ms:.2f}", f"{r.p99_ms:.2f}", pct(r.success_strict),
            f"{far:.2f}", f"{far / r.median_ms:.1f}x"]  # fmt: skip


def latency_markdown(rows: list[Latency]) -> str:
    header = [
        "solver", "robot", "targets", "median [ms]", "p99 [ms]", "success 1e-4 m / 1e-3 rad",
        "unreachable median [ms]", "unreachable / reachable",
    ]  # fmt: skip
    cells = [latency_cells(r) for r in rows]
    return markdown_table(header, cells, text_columns=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 targets only (unless --batch)")
    parser.add_argument("--batch", type=int, action="append", help="batch size (repeatable); default 1000 and 10000")
    parser.add_argument(
        "--robot", "--robots", dest="robot", action="extend", nargs="+", choices=ROBOTS, help="robots; default all"
    )
    parser.add_argument(
        "--repeats", type=int, default=0, help="timed runs per solver (default max(3, 1000 // batch), 1 at 10k)"
    )
    parser.add_argument("--clik-subset", type=int, default=200, help="targets solved by the CLIK loop")
    parser.add_argument("--clik-restart", type=int, default=CLIK_RESTART, help="CLIK iterations per random restart")
    parser.add_argument("--pk-max-batch", type=int, default=10_000, help="cap on the targets given to pk")
    parser.add_argument("--no-pk", action="store_true", help="skip pytorch-kinematics")
    parser.add_argument("--no-clik", action="store_true", help="skip the Pinocchio CLIK loop")
    parser.add_argument("--no-rtb", action="store_true", help="skip roboticstoolbox-python's ik_LM")
    parser.add_argument("--no-tracik", action="store_true", help="skip TRAC-IK (pytracik)")
    parser.add_argument("--rtb-ilimit", type=int, default=RTB_SETTINGS["ilimit"], help="rtb iterations per search")
    parser.add_argument("--rtb-slimit", type=int, default=RTB_SETTINGS["slimit"], help="rtb searches per target")
    parser.add_argument(
        "--latency", type=int, default=0, metavar="N", help="also time N targets one per call per solver (batch 1)"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads for every solver (default: torch's)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the results as JSON")
    args = parser.parse_args(argv)
    if (
        any(b < 1 for b in args.batch or [])
        or args.clik_subset < 1
        or args.clik_restart < 1
        or args.repeats < 0
        or args.threads < 0
        or args.rtb_ilimit < 1
        or args.rtb_slimit < 1
        or args.latency < 0
    ):
        parser.error(
            "batch sizes, --clik-subset, --clik-restart, --rtb-ilimit and --rtb-slimit must be positive, "
            "--repeats, --threads and --latency >= 0"
        )
    if args.threads:
        torch.set_num_threads(args.threads)
    batches = args.batch or ([200] if args.quick else [1000, 10_000])
    robots = args.robot or ROBOTS
    warnings.filterwarnings("ignore")
    logging.getLogger("pytorch_kinematics").setLevel(logging.ERROR)

    start = time.perf_counter()
    rows: list[Row] = []
    for name in robots:
        for batch in batches:
            rows.extend(bench_robot(name, batch, args, max(batches)))
    latency = [row for name in robots for row in bench_latency(name, args.latency, args)] if args.latency else []
    table = markdown(rows)
    print(table)
    if latency:
        print(f"\nBatch-1 latency ({args.latency} targets, one per call):\n")
        print(latency_markdown(latency))
    total = time.perf_counter() - start
    print(
        f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, total {total:.0f} s",
        file=sys.stderr,
    )
    if args.json:
        meta = {
            "torch": torch.__version__,
            "pinocchio": pin.__version__,
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "seed": SEED,
            "strict": STRICT,
            "loose": LOOSE,
            "ik_layer_settings": {"max_iterations": MAX_ITERATIONS, "num_seeds": 4},
            "pk_settings": PK_SETTINGS,
            "clik_settings": {**CLIK_SETTINGS, "budget": MAX_ITERATIONS, "restart_every": args.clik_restart},
            "rtb_settings": cli_rtb_settings(args),
            "tracik_settings": TRACIK_SETTINGS,
            "versions": package_versions(),
            "total_seconds": total,
        }
        result = {"meta": meta, "rows": [asdict(r) for r in rows], "table": table}
        if latency:
            result["latency"] = [asdict(r) for r in latency]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
