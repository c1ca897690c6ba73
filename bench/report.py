"""Benchmark report with plots: ik-layer against pytorch-kinematics and Pinocchio CLIK.

Writes ``OUT/REPORT.md`` and PNG plots: success rate vs iteration budget, solves/s
vs batch size (log-log, CPU, plus CUDA when available), histograms of position and
orientation errors, and, given ``--server-json`` (from ``bench/server_load.py``),
server throughput and p99 latency vs concurrent clients with batching on and off.

Every solution is checked with the same FK and pose error (``robot.fk``,
``ik_layer.lie.pose_error``), not with a solver's own flag. Targets are FK of
random configurations inside the joint limits (reachable), fixed seed.

Usage::

    python bench/report.py [--quick] [--out bench/out] [--robot panda] [--server-json F] [--publish]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
import torch  # noqa: E402
from torch import Tensor  # noqa: E402

from ik_layer import Robot, load_robot, solve  # noqa: E402
from ik_layer.lie import pose_error  # noqa: E402
from robots import REGISTRY  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PUBLISH_DIR = ROOT / "docs" / "img"
TOL = (1e-4, 1e-3)  # success: position [m], orientation [rad]
SEED = 20240611
ERROR_FLOOR = 1e-16  # errors of exactly 0 are drawn here on log axes

# A solver: (robot, targets (N, 4, 4), iteration budget, seeds per target, generator) -> q (N, dof).
Solver = Callable[[Robot, Tensor, int, int, torch.Generator], Tensor]


@dataclass(frozen=True)
class Sizes:
    """How much to measure."""

    targets: int  # targets per success-rate point
    budgets: tuple[int, ...]  # iteration budgets
    batch_sizes: tuple[int, ...]  # throughput batch sizes
    clik_targets: int  # targets timed for the per-target Pinocchio loop
    min_seconds: float  # minimum timed duration per throughput point
    min_calls: int = 3  # minimum timed calls per throughput point
    seeds: int = 4
    throughput_budget: int = 100


QUICK = Sizes(
    targets=24, budgets=(3, 10, 30), batch_sizes=(1, 16, 128), clik_targets=8, min_seconds=0.0, min_calls=1,
    throughput_budget=30,
)
FULL = Sizes(
    targets=400,
    budgets=(2, 5, 10, 20, 50, 100, 200),
    batch_sizes=(1, 4, 16, 64, 256, 1024, 4096),
    clik_targets=64,
    min_seconds=0.5,
)


# --------------------------------------------------------------------------- solvers


def solve_ik_layer(robot: Robot, targets: Tensor, budget: int, seeds: int, generator: torch.Generator) -> Tensor:
    """ik-layer's batched LM solver."""
    return solve(robot, targets, num_seeds=seeds, max_iterations=budget, generator=generator,
                 position_tolerance=TOL[0], orientation_tolerance=TOL[1]).q


def solve_pytorch_kinematics(robot: Robot, targets: Tensor, budget: int, seeds: int, generator: torch.Generator) -> Tensor:
    """pytorch-kinematics' ``PseudoInverseIK`` (default step settings), ``seeds`` retries, best retry kept.

    Its joint-limit refinement iterations (default 10, run after the main loop) count
    against the budget: up to half of it, so every solver gets the same number of steps.
    """
    import pytorch_kinematics as pk

    chain = pk.build_serial_chain_from_urdf(REGISTRY[robot.name].urdf.read_text(), robot.ee_frame)
    chain = chain.to(dtype=robot.dtype, device=str(robot.device))
    order = [chain.get_joint_parameter_names().index(name) for name in robot.joint_names]
    limits = torch.stack((robot.lower, robot.upper), dim=-1)[torch.argsort(torch.tensor(order))]
    refinement = min(10, budget // 2)
    ik = pk.PseudoInverseIK(
        chain, max_iterations=budget - refinement, num_limit_refinement_iterations=refinement,
        joint_limits=limits, early_stopping_any_converged=True, pos_tolerance=TOL[0], rot_tolerance=TOL[1],
        retry_configs=robot.random_q((seeds,), generator=generator)[:, torch.argsort(torch.tensor(order))],
    )
    candidates = ik.solve(pk.Transform3d(matrix=targets)).solutions[..., order]  # (N, seeds, dof)
    return _best_candidate(robot, targets, candidates)


def solve_pinocchio_clik(robot: Robot, targets: Tensor, budget: int, seeds: int, generator: torch.Generator) -> Tensor:
    """The classic Pinocchio CLIK loop, one target and one seed at a time (damped Gauss-Newton on log6).

    Each seed gets the full budget; the next seed starts only if the previous one failed.
    """
    model, data = robot.model, robot.model.createData()
    frame = model.getFrameId(robot.ee_frame)
    lower, upper = robot.lower.cpu().numpy(), robot.upper.cpu().numpy()
    starts = robot.random_q((len(targets), seeds), generator=generator).cpu().numpy()
    out = np.empty((len(targets), robot.dof))
    for i, target in enumerate(targets.detach().cpu().double().numpy()):
        desired = pin.SE3(target[:3, :3], target[:3, 3])
        for q in starts[i]:
            q, ok = _clik(model, data, frame, desired, q, budget, lower, upper)
            if ok:
                break
        out[i] = q
    return torch.as_tensor(out, dtype=robot.dtype, device=robot.device)


def _clik(model: pin.Model, data: pin.Data, frame: int, desired: pin.SE3, q: np.ndarray, budget: int,
          lower: np.ndarray, upper: np.ndarray, damping: float = 1e-6) -> tuple[np.ndarray, bool]:
    """Up to ``budget`` CLIK steps from ``q``; returns the last q and whether it met the tolerances."""
    for _ in range(budget):
        pin.framesForwardKinematics(model, data, q)
        current = data.oMf[frame]
        if np.linalg.norm(desired.translation - current.translation) <= TOL[0] and \
                np.linalg.norm(pin.log3(desired.rotation @ current.rotation.T)) <= TOL[1]:
            return q, True
        error = current.actInv(desired)
        jac = pin.Jlog6(error.inverse()) @ pin.computeFrameJacobian(model, data, q, frame, pin.LOCAL)
        step = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(6), pin.log6(error).vector)
        q = np.clip(pin.integrate(model, q, step), lower, upper)
    return q, False


def _best_candidate(robot: Robot, targets: Tensor, candidates: Tensor) -> Tensor:
    """Per target, the candidate (N, S, dof) with the smallest error in units of the tolerances."""
    pos, ori = errors(robot, targets[:, None], candidates)
    best = torch.maximum(pos / TOL[0], ori / TOL[1]).argmin(dim=1)
    return candidates[torch.arange(len(candidates)), best]


def available_solvers() -> dict[str, Solver]:
    """ik-layer and Pinocchio CLIK, plus pytorch-kinematics when it is installed."""
    solvers: dict[str, Solver] = {"ik-layer": solve_ik_layer}
    try:
        import pytorch_kinematics  # noqa: F401
    except ImportError:
        print("pytorch-kinematics is not installed: left out (pip install pytorch-kinematics)", file=sys.stderr)
    else:
        solvers["pytorch-kinematics"] = solve_pytorch_kinematics
    solvers["pinocchio-clik"] = solve_pinocchio_clik
    return solvers


# --------------------------------------------------------------------------- measurements


def errors(robot: Robot, targets: Tensor, q: Tensor) -> tuple[Tensor, Tensor]:
    """Position [m] and orientation [rad] error norms of ``q`` (..., dof) against ``targets`` (..., 4, 4)."""
    e = pose_error(targets, robot.fk(q.to(robot.dtype)))
    return e[..., :3].norm(dim=-1), e[..., 3:].norm(dim=-1)


def reachable_targets(robot: Robot, n: int, seed: int) -> Tensor:
    """FK (n, 4, 4) of ``n`` random configurations inside the limits."""
    return robot.fk(robot.random_q((n,), generator=torch.Generator(robot.device).manual_seed(seed)))


@dataclass(frozen=True)
class Accuracy:
    """Success rate per budget and the errors at the largest budget, per solver."""

    budgets: tuple[int, ...]
    success: dict[str, list[float]]
    position: dict[str, np.ndarray]
    orientation: dict[str, np.ndarray]


def measure_accuracy(robot: Robot, solvers: dict[str, Solver], sizes: Sizes) -> Accuracy:
    """Success rate of every solver at every iteration budget on the same targets."""
    targets = reachable_targets(robot, sizes.targets, SEED)
    success: dict[str, list[float]] = {name: [] for name in solvers}
    position, orientation = {}, {}
    for budget in sizes.budgets:
        for name, solver in solvers.items():
            q = solver(robot, targets, budget, sizes.seeds, torch.Generator(robot.device).manual_seed(SEED + 1))
            pos, ori = errors(robot, targets, q)
            success[name].append(float(((pos <= TOL[0]) & (ori <= TOL[1])).double().mean()))
            position[name], orientation[name] = pos.cpu().numpy(), ori.cpu().numpy()
        print(f"budget {budget}: " + ", ".join(f"{k} {v[-1]:.1%}" for k, v in success.items()), file=sys.stderr)
    return Accuracy(sizes.budgets, success, position, orientation)


def measure_throughput(robot: Robot, solvers: dict[str, Solver], sizes: Sizes) -> dict[str, list[float]]:
    """Solves/s per batch size for each solver (CPU), plus ik-layer on CUDA when there is one.

    Pinocchio CLIK loops over targets, so its rate is measured once on ``clik_targets`` targets.
    """
    rates: dict[str, list[float]] = {}
    for name, solver in solvers.items():
        if name == "pinocchio-clik":
            rate = _rate(robot, solver, sizes.clik_targets, sizes)
            rates[name] = [rate] * len(sizes.batch_sizes)
        else:
            rates[name] = [_rate(robot, solver, b, sizes) for b in sizes.batch_sizes]
        print(f"throughput {name}: " + ", ".join(f"{r:.0f}" for r in rates[name]) + " solves/s", file=sys.stderr)
    if torch.cuda.is_available():
        gpu = load_robot(robot.name, robot.ee_frame, dtype=robot.dtype, device="cuda")
        rates["ik-layer (cuda)"] = [_rate(gpu, solve_ik_layer, b, sizes) for b in sizes.batch_sizes]
    return rates


def _rate(robot: Robot, solver: Solver, batch: int, sizes: Sizes) -> float:
    """Solves/s of ``solver`` on batches of ``batch`` targets: the fastest of at least ``min_calls`` calls.

    Calls repeat (on fresh targets) until ``min_seconds`` have passed; the fastest call
    is reported, as ``timeit`` advises, since slower ones measure other load on the machine.
    """
    generator = torch.Generator(robot.device).manual_seed(SEED)
    solver(robot, reachable_targets(robot, batch, SEED), sizes.throughput_budget, sizes.seeds, generator)  # warm-up
    times: list[float] = []
    while len(times) < sizes.min_calls or sum(times) < sizes.min_seconds:
        targets = reachable_targets(robot, batch, SEED + len(times) + 1)
        start = time.perf_counter()
        solver(robot, targets, sizes.throughput_budget, sizes.seeds, generator)
        if robot.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return batch / min(times)


def load_server_runs(path: Path) -> list[dict[str, float]]:
    """Rows of ``bench/server_load.py --json``: ``clients``, ``batching``, ``throughput_rps``, ``p99_ms``.

    Accepts a list of such objects or an object holding it under ``results``.
    """
    data = json.loads(path.read_text())
    runs = data["results"] if isinstance(data, dict) else data
    needed = ("clients", "batching", "throughput_rps", "p99_ms")
    for run in runs:
        missing = [k for k in needed if k not in run]
        if missing:
            raise ValueError(f"{path}: a run lacks {', '.join(missing)}; each needs {', '.join(needed)}")
    return sorted(runs, key=lambda r: (bool(r["batching"]), r["clients"]))


# --------------------------------------------------------------------------- plots


def _figure(width: float = 5.0) -> tuple[plt.Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(width, 3.4), dpi=100)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_success(acc: Accuracy, robot: str, path: Path) -> Path:
    """Success rate vs iteration budget, one line per solver."""
    fig, ax = _figure()
    for name, rates in acc.success.items():
        ax.plot(acc.budgets, [100 * r for r in rates], marker="o", label=name)
    ax.set(xscale="log", xlabel="iteration budget", ylabel="success [%]", ylim=(0, 101),
           title=f"{robot}: success at {TOL[0]:g} m / {TOL[1]:g} rad")
    ax.set_xticks(acc.budgets, [str(b) for b in acc.budgets])
    ax.legend()
    return _save(fig, path)


def plot_throughput(rates: dict[str, list[float]], batch_sizes: Sequence[int], robot: str, budget: int, path: Path) -> Path:
    """Solves/s vs batch size, log-log."""
    fig, ax = _figure()
    for name, values in rates.items():
        ax.plot(batch_sizes, values, marker="o", linestyle="--" if name == "pinocchio-clik" else "-", label=name)
    ax.set(xscale="log", yscale="log", xlabel="batch size [targets]", ylabel="solves / s",
           title=f"{robot}: throughput (budget {budget})")
    ax.legend()
    return _save(fig, path)


def plot_errors(acc: Accuracy, robot: str, path: Path) -> Path:
    """Histograms of position and orientation errors at the largest budget, log x."""
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.2), dpi=100)
    for ax, values, unit, tol in ((axes[0], acc.position, "m", TOL[0]), (axes[1], acc.orientation, "rad", TOL[1])):
        clipped = {k: np.maximum(v, ERROR_FLOOR) for k, v in values.items()}
        low = min(float(v.min()) for v in clipped.values())
        high = max(float(v.max()) for v in clipped.values())
        bins = np.logspace(np.log10(low), np.log10(max(high, low * 10)), 40)
        for name, v in clipped.items():
            ax.hist(v, bins=bins, histtype="step", linewidth=1.5, label=name)
        ax.axvline(tol, color="k", linestyle=":", linewidth=1)
        ax.set(xscale="log", xlabel=f"error [{unit}]", ylabel="targets")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle(f"{robot}: final errors (budget {acc.budgets[-1]}; dotted: tolerance)")
    return _save(fig, path)


def plot_server(runs: list[dict[str, float]], path: Path) -> Path:
    """Requests/s and p99 latency vs concurrent clients, batching on and off."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.0, 3.2), dpi=100)
    for batching in (True, False):
        rows = [r for r in runs if bool(r["batching"]) == batching]
        if not rows:
            continue
        label = "batching on" if batching else "batching off"
        clients = [r["clients"] for r in rows]
        left.plot(clients, [r["throughput_rps"] for r in rows], marker="o", label=label)
        right.plot(clients, [r["p99_ms"] for r in rows], marker="o", label=label)
    left.set(xscale="log", yscale="log", xlabel="concurrent clients", ylabel="requests / s", title="throughput")
    right.set(xscale="log", yscale="log", xlabel="concurrent clients", ylabel="p99 latency [ms]", title="tail latency")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    return _save(fig, path)


# --------------------------------------------------------------------------- report


def _percent_table(acc: Accuracy) -> list[str]:
    lines = ["| solver | " + " | ".join(f"{b} it" for b in acc.budgets) + " |", "|---|" + "---:|" * len(acc.budgets)]
    lines += [f"| {name} | " + " | ".join(f"{100 * r:.1f} %" for r in rates) + " |" for name, rates in acc.success.items()]
    return lines


def _error_table(acc: Accuracy) -> list[str]:
    lines = ["| solver | median pos [m] | p99 pos [m] | median ori [rad] | p99 ori [rad] |", "|---|---:|---:|---:|---:|"]
    for name in acc.position:
        pos, ori = acc.position[name], acc.orientation[name]
        lines.append(f"| {name} | {np.median(pos):.1e} | {np.quantile(pos, 0.99):.1e} "
                     f"| {np.median(ori):.1e} | {np.quantile(ori, 0.99):.1e} |")
    return lines


def _throughput_table(rates: dict[str, list[float]], batch_sizes: Sequence[int]) -> list[str]:
    lines = ["| solver | " + " | ".join(f"batch {b}" for b in batch_sizes) + " |", "|---|" + "---:|" * len(batch_sizes)]
    lines += [f"| {name} | " + " | ".join(f"{v:,.0f}" for v in values) + " |" for name, values in rates.items()]
    return lines


def _server_table(runs: list[dict[str, float]]) -> list[str]:
    lines = ["| clients | batching | requests/s | p99 [ms] |", "|---:|---|---:|---:|"]
    lines += [f"| {r['clients']} | {'on' if r['batching'] else 'off'} | {r['throughput_rps']:,.0f} | {r['p99_ms']:.1f} |"
              for r in runs]
    return lines


def write_report(out: Path, command: str, robot: str, sizes: Sizes, acc: Accuracy, rates: dict[str, list[float]],
                 figures: dict[str, Path], server_runs: list[dict[str, float]] | None) -> Path:
    """Write ``out/REPORT.md``: tables beside the plots and the command that made them."""
    image = lambda key: f"![{key}]({figures[key].name})"  # noqa: E731
    text = [
        "# ik-layer benchmark report", "",
        f"Regenerate: `{command}`", "",
        f"Robot `{robot}`, CPU threads: {torch.get_num_threads()}, torch {torch.__version__}, float64. "
        f"Targets: FK of random configurations inside the limits (seed {SEED}); {sizes.seeds} seeds per target; "
        f"success = position error <= {TOL[0]:g} m and orientation error <= {TOL[1]:g} rad, "
        "checked with the same FK for every solver. pytorch-kinematics: `PseudoInverseIK` with its default step "
        "settings, its joint-limit refinement iterations counted in the budget. Pinocchio CLIK: damped "
        "Gauss-Newton on log6, one target and seed at a time. Timings are noisy on shared machines.", "",
        f"## Success rate vs iteration budget ({sizes.targets} targets)", "",
        *_percent_table(acc), "", image("success"), "",
        f"## Final errors (budget {acc.budgets[-1]})", "",
        *_error_table(acc), "", image("errors"), "",
        f"## Throughput vs batch size (budget {sizes.throughput_budget}, solves/s, failures included)", "",
        f"Fastest of at least {sizes.min_calls} calls on fresh targets per point.", "",
        *_throughput_table(rates, sizes.batch_sizes), "",
        f"Pinocchio CLIK solves one target at a time; its rate is measured on {sizes.clik_targets} targets "
        "and drawn flat.", "", image("throughput"), "",
    ]
    if server_runs is not None:
        text += ["## Server: throughput and p99 latency vs concurrent clients", "", *_server_table(server_runs), "",
                 image("server"), ""]
    path = out / "REPORT.md"
    path.write_text("\n".join(text))
    return path


def build_parser() -> argparse.ArgumentParser:
    """Options of the report script."""
    parser = argparse.ArgumentParser(prog="bench/report.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (under a minute)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out", help="output directory")
    parser.add_argument("--robot", default="panda", choices=sorted(REGISTRY), help="built-in robot (default panda)")
    parser.add_argument("--server-json", type=Path, help="results of bench/server_load.py to plot")
    parser.add_argument("--publish", action="store_true", help=f"also copy the plots to {PUBLISH_DIR}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, plot and write the report; returns the exit code."""
    args = build_parser().parse_args(argv)
    sizes = QUICK if args.quick else FULL
    server_runs = load_server_runs(args.server_json) if args.server_json else None
    args.out.mkdir(parents=True, exist_ok=True)
    robot = load_robot(args.robot)
    solvers = available_solvers()
    acc = measure_accuracy(robot, solvers, sizes)
    rates = measure_throughput(robot, solvers, sizes)
    figures = {
        "success": plot_success(acc, args.robot, args.out / "success_vs_iterations.png"),
        "errors": plot_errors(acc, args.robot, args.out / "error_histograms.png"),
        "throughput": plot_throughput(rates, sizes.batch_sizes, args.robot, sizes.throughput_budget,
                                      args.out / "throughput_vs_batch.png"),
    }
    if server_runs is not None:
        figures["server"] = plot_server(server_runs, args.out / "server_load.png")
    command = "python bench/report.py " + " ".join(sys.argv[1:] if argv is None else argv)
    report = write_report(args.out, command.strip(), args.robot, sizes, acc, rates, figures, server_runs)
    if args.publish:
        PUBLISH_DIR.mkdir(parents=True, exist_ok=True)
        for figure in figures.values():
            shutil.copy(figure, PUBLISH_DIR / figure.name)
    print(f"wrote {report} and {len(figures)} plots", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
