"""Benchmark report with plots: ik-layer against pytorch-kinematics, Pinocchio CLIK, rtb and TRAC-IK.

Writes ``OUT/REPORT.md`` and PNG plots: success rate vs iteration budget, solves/s
vs batch size (log-log, CPU, plus CUDA when available), histograms of position and
orientation errors, and, given ``--server-json`` (from ``bench/server_load.py``),
server throughput and p99 latency vs concurrent clients with batching on and off.

The solvers, their settings, the targets and the check are those of ``bench/ik_vs_peers.py``
(imported from it, with an iteration budget): ik-layer with its defaults (4 seeds),
pytorch-kinematics ``PseudoInverseIK`` with the best settings found there (20 retries,
early stopping when any retry converged, LM damping 0.1, joint limits; its limit-refinement
iterations counted in the budget), Pinocchio's CLIK loop with random restarts every 20
iterations, and, when installed, roboticstoolbox-python's C++ ``ik_LM`` (searches of 20 iterations
within the budget) and TRAC-IK (``pytracik``, 5 ms per target, no iteration budget), both one
target per call. Every solution is checked in float64 with Pinocchio, not with a solver's own
flag. Targets are FK of random configurations inside the joint limits (reachable), fixed seed.

Usage::

    python bench/report.py [--quick] [--out bench/out] [--robot panda] [--server-json F] [--publish]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import ik_vs_peers as peers
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import Tensor

from ik_layer import Robot, load_robot
from ik_layer.robots import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
PUBLISH_DIR = ROOT / "docs" / "img"
TOL = peers.STRICT  # success: position [m], orientation [rad]
SEED = peers.SEED
ERROR_FLOOR = 1e-16  # errors of exactly 0 are drawn here on log axes

# A solver: (robot, targets (N, 4, 4), iteration budget) -> q (N, dof).
Solver = Callable[[Robot, Tensor, int], Tensor]


@dataclass(frozen=True)
class Sizes:
    """How much to measure."""

    targets: int  # targets per success-rate point
    budgets: tuple[int, ...]  # iteration budgets
    batch_sizes: tuple[int, ...]  # throughput batch sizes
    clik_targets: int  # targets timed for the per-target Pinocchio loop
    min_seconds: float  # minimum timed duration per throughput point
    min_calls: int = 3  # minimum timed calls per throughput point
    min_targets: int = 1  # minimum targets solved per throughput point (so batch 1 is a median over many)
    throughput_budget: int = 100


QUICK = Sizes(
    targets=24,
    budgets=(3, 10, 30),
    batch_sizes=(1, 16, 128),
    clik_targets=8,
    min_seconds=0.0,
    min_calls=1,
    throughput_budget=30,
)
FULL = Sizes(
    targets=400,
    budgets=(2, 5, 10, 20, 50, 100, 200),
    batch_sizes=(1, 4, 16, 64, 256, 1024, 4096),
    clik_targets=64,
    min_seconds=0.5,
    min_targets=200,
)


# --------------------------------------------------------------------------- solvers


def solve_ik_layer(robot: Robot, targets: Tensor, budget: int) -> Tensor:
    """ik-layer's batched LM solver (``ik_vs_peers.solve_ik_layer``)."""
    return peers.solve_ik_layer(robot, targets, budget).q


def solve_pytorch_kinematics(robot: Robot, targets: Tensor, budget: int) -> Tensor:
    """pytorch-kinematics' ``PseudoInverseIK`` (``ik_vs_peers.solve_pk``), refinement counted in the budget."""
    return peers.solve_pk(robot, targets, peers.pk_settings(budget))[0].to(robot.dtype)


def solve_pinocchio_clik(robot: Robot, targets: Tensor, budget: int) -> Tensor:
    """Pinocchio's CLIK loop (``ik_vs_peers.solve_clik``), one target at a time, restarts within the budget."""
    return peers.solve_clik(robot, targets.detach().cpu().double().numpy(), budget)[0].to(robot.dtype)


def solve_rtb(robot: Robot, targets: Tensor, budget: int) -> Tensor:
    """roboticstoolbox-python's C++ ``ik_LM`` (``ik_vs_peers.solve_rtb``), one target at a time, searches of <= 20."""
    q = peers.solve_rtb(robot, targets.detach().cpu().double().numpy(), peers.rtb_settings(budget))[0]
    return q.to(robot.dtype)


def solve_tracik(robot: Robot, targets: Tensor, budget: int) -> Tensor:
    """TRAC-IK (``ik_vs_peers.solve_tracik``), one target at a time; it has a time limit (5 ms), not a budget."""
    return peers.solve_tracik(robot, targets.detach().cpu().double().numpy())[0].to(robot.dtype)


PER_TARGET = ("pinocchio-clik", "roboticstoolbox", "trac-ik")  # solvers looping over targets in Python


def available_solvers() -> dict[str, Solver]:
    """ik-layer and Pinocchio CLIK, plus pytorch-kinematics, roboticstoolbox-python and TRAC-IK when installed.

    A peer that does not import is left out with a line on stderr (``ik_vs_peers.importable``).
    """
    solvers: dict[str, Solver] = {"ik-layer": solve_ik_layer}
    if peers.importable("pytorch_kinematics"):
        solvers["pytorch-kinematics"] = solve_pytorch_kinematics
    solvers["pinocchio-clik"] = solve_pinocchio_clik
    if peers.importable(peers.RTB_MODULE):
        solvers["roboticstoolbox"] = solve_rtb
    if peers.importable("pytracik"):
        solvers["trac-ik"] = solve_tracik
    return solvers


# --------------------------------------------------------------------------- measurements


def reachable_targets(robot: Robot, n: int, seed: int) -> Tensor:
    """FK (n, 4, 4) of ``n`` random configurations inside the limits (``ik_vs_peers.make_targets``)."""
    return peers.make_targets(robot, n, seed)[1]


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
            q = solver(robot, targets, budget)
            pos, ori, _ = peers.verify(robot, q, targets.detach().cpu().double().numpy())
            success[name].append(float(peers.succeeded(pos, ori, TOL).mean()))
            position[name], orientation[name] = pos, ori
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
    """Solves/s of ``solver`` on batches of ``batch`` targets, from the median call.

    Calls repeat on fresh targets until ``min_calls`` calls, ``min_targets`` targets and
    ``min_seconds`` have passed, so at batch 1 the figure is the median over many targets.
    """
    solver(robot, reachable_targets(robot, batch, SEED), sizes.throughput_budget)  # warm-up
    times: list[float] = []
    while len(times) < sizes.min_calls or len(times) * batch < sizes.min_targets or sum(times) < sizes.min_seconds:
        targets = reachable_targets(robot, batch, SEED + len(times) + 1)
        start = time.perf_counter()
        solver(robot, targets, sizes.throughput_budget)
        if robot.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return batch / statistics.median(times)


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
    ax.set(
        xscale="log",
        xlabel="iteration budget",
        ylabel="success [%]",
        ylim=(0, 101),
        title=f"{robot}: success at {TOL[0]:g} m / {TOL[1]:g} rad",
    )
    ax.set_xticks(acc.budgets, [str(b) for b in acc.budgets])
    ax.legend()
    return _save(fig, path)


def plot_throughput(
    rates: dict[str, list[float]], batch_sizes: Sequence[int], robot: str, budget: int, path: Path
) -> Path:
    """Solves/s vs batch size, log-log."""
    fig, ax = _figure()
    for name, values in rates.items():
        ax.plot(batch_sizes, values, marker="o", linestyle="--" if name in PER_TARGET else "-", label=name)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="batch size [targets]",
        ylabel="solves / s",
        title=f"{robot}: throughput (budget {budget})",
    )
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
    lines += [
        f"| {name} | " + " | ".join(f"{100 * r:.1f} %" for r in rates) + " |" for name, rates in acc.success.items()
    ]
    return lines


def _error_table(acc: Accuracy) -> list[str]:
    lines = [
        "| solver | median pos [m] | p99 pos [m] | median ori [rad] | p99 ori [rad] |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in acc.position:
        pos, ori = acc.position[name], acc.orientation[name]
        lines.append(
            f"| {name} | {np.median(pos):.1e} | {np.quantile(pos, 0.99):.1e} "
            f"| {np.median(ori):.1e} | {np.quantile(ori, 0.99):.1e} |"
        )
    return lines


def _throughput_table(rates: dict[str, list[float]], batch_sizes: Sequence[int]) -> list[str]:
    lines = ["| solver | " + " | ".join(f"batch {b}" for b in batch_sizes) + " |", "|---|" + "---:|" * len(batch_sizes)]
    lines += [f"| {name} | " + " | ".join(f"{v:,.0f}" for v in values) + " |" for name, values in rates.items()]
    return lines


def _server_table(runs: list[dict[str, float]]) -> list[str]:
    lines = ["| clients | batching | requests/s | p99 [ms] |", "|---:|---|---:|---:|"]
    lines += [
        f"| {r['clients']} | {'on' if r['batching'] else 'off'} | {r['throughput_rps']:,.0f} | {r['p99_ms']:.1f} |"
        for r in runs
    ]
    return lines


def peer_sentence(solvers: dict[str, object]) -> str:
    """What the report says of the per-target C++ peers among ``solvers`` (empty when neither ran)."""
    text = ""
    if "roboticstoolbox" in solvers:
        rtb = peers.RTB_SETTINGS
        text += (
            f"roboticstoolbox-python: its C++ `ETS.ik_LM` ({rtb['method']} damping, tol {rtb['tol']:g} on "
            "|e|^2/2, joint limits enforced by rejecting searches), one target at a time, searches of "
            f"at most {rtb['ilimit']} iterations filling the budget (10 x 20 for 200). "
        )
    if "trac-ik" in solvers:
        tr = peers.TRACIK_SETTINGS
        text += (
            f"TRAC-IK (pytracik): solve type {tr['solve_type']}, eps {tr['eps']:g}, one target at a time with a "
            f"{1e3 * tr['timeout']:g} ms time limit instead of an iteration budget (flat in the success plot). "
        )
    return text


def write_report(
    out: Path,
    command: str,
    robot: str,
    sizes: Sizes,
    acc: Accuracy,
    rates: dict[str, list[float]],
    figures: dict[str, Path],
    server_runs: list[dict[str, float]] | None,
) -> Path:
    """Write ``out/REPORT.md``: tables beside the plots and the command that made them."""
    image = lambda key: f"![{key}]({figures[key].name})"  # noqa: E731
    pk, clik = peers.PK_SETTINGS, peers.CLIK_SETTINGS
    text = [
        "# ik-layer benchmark report",
        "",
        f"Regenerate: `{command}`",
        "",
        f"Robot `{robot}`, CPU threads: {torch.get_num_threads()}, torch {torch.__version__}, float64. "
        f"Targets: FK of random configurations inside the limits (seed {SEED}); "
        f"success = position error <= {TOL[0]:g} m and orientation error <= {TOL[1]:g} rad, "
        "checked in float64 with Pinocchio for every solver. Solvers and settings are those of "
        "`bench/ik_vs_peers.py`, given each iteration budget: ik-layer with its defaults (4 seeds per target); "
        f"pytorch-kinematics `PseudoInverseIK` with {pk['num_retries']} retries, early stopping when any retry "
        f"converged, LM damping {pk['lm_damping']:g}, joint limits enforced, its joint-limit refinement iterations "
        f"(up to {peers.PK_REFINEMENT}) counted in the budget; Pinocchio CLIK: damped ({clik['damping']:g}) "
        f"Gauss-Newton on log6, step {clik['dt']:g}, one target at a time, random restarts every "
        f"{peers.CLIK_RESTART} iterations within the budget. "
        + peer_sentence(acc.success)
        + "Timings are noisy on shared machines.",
        "",
        f"## Success rate vs iteration budget ({sizes.targets} targets)",
        "",
        *_percent_table(acc),
        "",
        image("success"),
        "",
        f"## Final errors (budget {acc.budgets[-1]})",
        "",
        *_error_table(acc),
        "",
        image("errors"),
        "",
        f"## Throughput vs batch size (budget {sizes.throughput_budget}, solves/s, failures included)",
        "",
        f"Fastest of at least {sizes.min_calls} calls on fresh targets per point.",
        "",
        *_throughput_table(rates, sizes.batch_sizes),
        "",
        f"Pinocchio CLIK solves one target at a time; its rate is measured on {sizes.clik_targets} targets "
        "and drawn flat. roboticstoolbox and TRAC-IK also loop over the targets (dashed), timed per batch size.",
        "",
        image("throughput"),
        "",
    ]
    if server_runs is not None:
        text += [
            "## Server: throughput and p99 latency vs concurrent clients",
            "",
            *_server_table(server_runs),
            "",
            image("server"),
            "",
        ]
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
        "throughput": plot_throughput(
            rates, sizes.batch_sizes, args.robot, sizes.throughput_budget, args.out / "throughput_vs_batch.png"
        ),
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
