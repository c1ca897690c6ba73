"""Benchmark: batched IK, ik-layer vs pytorch-kinematics and the classic Pinocchio CLIK loop, on the CPU.

The same reachable targets (``robot.fk`` of configurations drawn uniformly inside the joint limits,
fixed seed) for panda and ur5e at each batch size (default 1k and 10k), solved by

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

Every solution is checked in float64 with Pinocchio (``forwardKinematics`` +
``updateFramePlacements`` on ``robot.model``), never with the solvers' own flags: a solution
counts at ``1e-4 m / 1e-3 rad`` if its position error is <= 1e-4 m and its orientation error
(``|log3(R_target R^T)|``) is <= 1e-3 rad. Configurations outside the joint limits are reported in
the ``in limits`` column (pk's are clamped to Pinocchio's limits first: it parses them in float32).

Times are wall clock of one ``solve`` call for the whole batch (median of ``--repeats`` runs for
batches below 10k, after a warm-up on a small batch); ``solves/s`` = targets / time. The
``ik-layer x`` columns are ik-layer's solves/s (f64, f32) divided by that row's.

Run: ``python bench/ik_vs_peers.py`` (a few minutes), ``--quick`` (200 targets, under a minute),
``--batch 1000 --batch 5000``, ``--json results.json``.
"""

from __future__ import annotations

import argparse
import functools
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

import numpy as np
import pinocchio as pin
import torch
from common import markdown_table

import ik_layer
from ik_layer.robots import REGISTRY

ROBOTS = ["panda", "ur5e"]
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


def pk_settings(budget: int | None = None) -> dict:
    """:data:`PK_SETTINGS`, or with a total ``budget`` of iterations: main loop plus joint-limit refinement.

    The refinement gets ``min(10, budget // 2)`` of the budget, so that every solver gets the same
    number of steps (``None``: pk's 50 iterations plus its 10 refinement iterations).
    """
    if budget is None:
        return dict(PK_SETTINGS)
    refinement = min(PK_REFINEMENT, budget // 2)
    return {**PK_SETTINGS, "max_iterations": budget - refinement, "num_limit_refinement_iterations": refinement}


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


def solve_ik_layer(
    robot: ik_layer.Robot, targets: torch.Tensor, budget: int = MAX_ITERATIONS, seed: int = SEED + 1
) -> ik_layer.IKResult:
    """``ik_layer.solve`` with its defaults (4 seeds per target) and an iteration ``budget``."""
    generator = torch.Generator(robot.device).manual_seed(seed)
    return ik_layer.solve(
        robot,
        targets.to(robot.dtype),
        max_iterations=budget,
        generator=generator,
        position_tolerance=STRICT[0],
        orientation_tolerance=STRICT[1],
    )


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


# --------------------------------------------------------------------------- the run


def bench_robot(name: str, batch: int, args: argparse.Namespace, largest: int) -> list[Row]:
    robot = ik_layer.load_robot(name)  # float64: targets and checks
    q_true, targets = make_targets(robot, batch, SEED + batch)
    targets_np = targets.numpy()
    repeats = args.repeats if args.repeats else (3 if batch < 10_000 else 1)
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

    if not args.no_pk:
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

    by_label = {r.solver: r for r in rows}
    for r in rows:
        if not r.solver.startswith("ik-layer"):
            r.ratio_f64 = by_label["ik-layer f64"].solves_per_s / r.solves_per_s
            r.ratio_f32 = by_label["ik-layer f32"].solves_per_s / r.solves_per_s
    return rows


def log(row: Row) -> None:
    print(
        f"  {row.solver:<20} {row.robot:<6} batch {row.batch:>6}: {row.success_strict:7.2%} strict, "
        f"{row.solves_per_s:9.0f} solves/s ({row.seconds:.2f} s for {row.timed})",
        file=sys.stderr,
        flush=True,
    )


def pct(x: float) -> str:
    return f"{100 * x:.2f} %" if x < 1 else "100 %"


def sci(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.1e}"


def markdown(rows: list[Row]) -> str:
    header = [
        "solver", "robot", "batch", "success 1e-4 m / 1e-3 rad", "success 1 mm / 0.01 rad", "in limits",
        "pos err median / p99 [m]", "ori err median / p99 [rad]", "solves/s", "ik-layer f64 x", "ik-layer f32 x",
    ]  # fmt: skip
    ratio = lambda x: "" if x is None else f"{x:.1f}x"  # noqa: E731
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 targets only")
    parser.add_argument("--batch", type=int, action="append", help="batch size (repeatable); default 1000 and 10000")
    parser.add_argument("--robot", action="append", choices=ROBOTS, help="robot (repeatable); default both")
    parser.add_argument("--repeats", type=int, default=0, help="timed runs per solver (default 3, 1 at 10k)")
    parser.add_argument("--clik-subset", type=int, default=200, help="targets solved by the CLIK loop")
    parser.add_argument("--clik-restart", type=int, default=CLIK_RESTART, help="CLIK iterations per random restart")
    parser.add_argument("--pk-max-batch", type=int, default=10_000, help="cap on the targets given to pk")
    parser.add_argument("--no-pk", action="store_true", help="skip pytorch-kinematics")
    parser.add_argument("--no-clik", action="store_true", help="skip the Pinocchio CLIK loop")
    parser.add_argument("--threads", type=int, default=0, help="torch threads for every solver (default: torch's)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the results as JSON")
    args = parser.parse_args(argv)
    if (
        any(b < 1 for b in args.batch or [])
        or args.clik_subset < 1
        or args.clik_restart < 1
        or args.repeats < 0
        or args.threads < 0
    ):
        parser.error("batch sizes, --clik-subset and --clik-restart must be positive, --repeats >= 0")
    if args.threads:
        torch.set_num_threads(args.threads)
    batches = [200] if args.quick else (args.batch or [1000, 10_000])
    robots = args.robot or ROBOTS
    warnings.filterwarnings("ignore")
    logging.getLogger("pytorch_kinematics").setLevel(logging.ERROR)

    start = time.perf_counter()
    rows: list[Row] = []
    for name in robots:
        for batch in batches:
            rows.extend(bench_robot(name, batch, args, max(batches)))
    table = markdown(rows)
    print(table)
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
            "total_seconds": total,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows], "table": table}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
