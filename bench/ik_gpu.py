"""GPU benchmark: batched FK + Jacobian and IK throughput of ik-layer on one device, verified in float64.

For one robot (default panda) at each batch size (default 1k, 10k, 100k, 1M, as far as memory and
the time budget allow):

* ``fk_jacobian``: ``robot.fk_jacobian(q)`` for random configurations in the solver's dtype;
  configurations/s, median of a few timed calls.
* ``ik``: ``ik_layer.solve`` (its defaults: 4 seeds per target, 200 iterations, 1e-4 m / 1e-3 rad)
  on reachable targets (``fk`` of random configurations computed in float64, then cast to the
  solver's dtype); solves/s over one timed call after a warm-up. Success is the solver's own flag
  and, independently, the float64 FK of the returned configurations checked against the float64
  targets at the same tolerances ("verified"). With ``--path scheduled`` the same targets go through the
  engine's scheduler instead (``Engine.submit`` and ``Engine.run``: blocks of iterations, a stalled target's next
  seed beside it), where ``solve`` on an idle engine runs the whole problem in one launch, each target's seeds in
  turn: which of the two suits a GPU at each batch size.

The device is synchronised around every timed region. A batch that does not fit in memory
(``OutOfMemoryError``) or whose estimated time would overrun ``--budget-s`` is reported as skipped.

    python bench/ik_gpu.py                                   # cuda, float32, 1k..1M
    python bench/ik_gpu.py --device cpu --batch 100 --batch 1000   # smoke test on the CPU
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import torch
from common import markdown_table

from ik_layer import Engine, IKResult, Problem, load_robot, solve
from ik_layer.engine import TensorStore
from ik_layer.model.lie import pose_error

DEFAULT_BATCHES = (1_000, 10_000, 100_000, 1_000_000)
_OOM = (
    (torch.cuda.OutOfMemoryError, torch.OutOfMemoryError)
    if hasattr(torch, "OutOfMemoryError")
    else (torch.cuda.OutOfMemoryError,)
)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> tuple[float, object]:
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def free_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def bench_fk(robot, batches: Sequence[int], device: torch.device, budget_s: float) -> list[dict]:
    rows: list[dict] = []
    gen = torch.Generator(device=device).manual_seed(0)
    deadline = time.monotonic() + budget_s
    for n in batches:
        row = {"bench": "fk_jacobian", "batch": n}
        try:
            q = robot.random_q((n,), generator=gen)
            robot.fk_jacobian(q[: min(n, 1000)])  # warm-up (kernels, allocator)
            times = []
            while len(times) < 5 and (not times or time.monotonic() + times[-1] < deadline):
                times.append(timed(lambda: robot.fk_jacobian(q), device)[0])
            row.update(seconds=statistics.median(times), rate=n / statistics.median(times))
        except _OOM:
            row.update(skipped="out of memory")
        rows.append(row)
        print_row(row)
        del row
        free_memory(device)
        if time.monotonic() > deadline:
            break
    return rows


def verify(robot64, q: torch.Tensor, target64: torch.Tensor, tol: tuple[float, float], chunk: int = 100_000):
    """Success of ``q`` re-checked with float64 FK against the float64 targets."""
    ok = []
    for start in range(0, q.shape[0], chunk):
        err = pose_error(target64[start : start + chunk], robot64.fk(q[start : start + chunk].double()))
        ok.append((err[:, :3].norm(dim=-1) <= tol[0]) & (err[:, 3:].norm(dim=-1) <= tol[1]))
    return torch.cat(ok)


def bench_ik(robot, robot64, batches: Sequence[int], device: torch.device, budget_s: float, args) -> list[dict]:
    rows: list[dict] = []
    tol = (args.position_tolerance, args.orientation_tolerance)
    options = {
        "num_seeds": args.num_seeds,
        "max_iterations": args.max_iterations,
        "position_tolerance": tol[0],
        "orientation_tolerance": tol[1],
    }
    gen64 = torch.Generator(device=device).manual_seed(1)
    deadline = time.monotonic() + budget_s
    last: tuple[int, float] | None = None
    warm = False
    for n in batches:
        row: dict = {"bench": "ik", "batch": n}
        remaining = deadline - time.monotonic()
        if last is not None and last[1] * n / last[0] > remaining:
            row.update(skipped=f"estimated {last[1] * n / last[0]:.0f} s > {remaining:.0f} s left of --budget-s")
            rows.append(row)
            print_row(row)
            continue
        try:
            target64 = robot64.fk(robot64.random_q((n,), generator=gen64))
            target = target64.to(robot.dtype)
            if not warm:  # compile kernels / fill the allocator once, on a small batch
                solve(robot, target[: min(n, 1000)], generator=torch.Generator(device=device).manual_seed(2), **options)
                warm = True
            gen = torch.Generator(device=device).manual_seed(3)
            engine = engine_for(robot, n * args.num_seeds, args.jacobian)
            if args.path == "scheduled":
                run = partial(scheduled, engine, target, 3, options)
            else:
                run = partial(solve, robot, target, generator=gen, engine=engine, **options)
            seconds, result = timed(run, device)
            verified = verify(robot64, result.q, target64, tol)
            row.update(
                seconds=seconds,
                rate=n / seconds,
                success=result.success.double().mean().item(),
                verified=verified.double().mean().item(),
                mean_iterations=result.iterations.double().mean().item(),
            )
            if device.type == "cuda":
                row["peak_mem_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
            last = (n, seconds)
            del result, verified
        except _OOM:
            row.update(skipped="out of memory")
        rows.append(row)
        print_row(row)
        free_memory(device)
    return rows


def scheduled(engine: Engine, target: torch.Tensor, seed: int, options: dict) -> IKResult:
    """``target`` solved through ``engine``'s scheduler (checked as ``solve`` checks it; the same options)."""
    problem = Problem.prepare(engine.robot, target, **options)
    request = engine.submit(problem, seed)
    engine.run(request)
    return request.result(problem.batch)


def engine_for(robot, slots: int, jacobian: str) -> Engine:
    """A tensor-store engine (the CUDA default) of ``slots`` slots (at most the library's pool) whose kernel takes
    the ``jacobian`` ("lazy": the tensor store's, or "eager": the host store's; see ``lm_block_kernel``)."""
    default = TensorStore.lazy_jacobian
    TensorStore.lazy_jacobian = jacobian == "lazy"
    try:
        return Engine(robot, capacity=min(max(slots, 1), 1 << 16), block=32, store="tensor")
    finally:
        TensorStore.lazy_jacobian = default


def print_row(row: dict) -> None:
    if "skipped" in row:
        print(f"  {row['bench']:<12} batch {row['batch']:>9,}: skipped ({row['skipped']})", flush=True)
        return
    line = f"  {row['bench']:<12} batch {row['batch']:>9,}: {row['rate']:>14,.0f} /s  ({row['seconds'] * 1e3:9.2f} ms)"
    if "success" in row:
        line += f"  success {100 * row['success']:6.2f} %  verified f64 {100 * row['verified']:6.2f} %"
        line += f"  iters {row['mean_iterations']:.1f}"
    print(line, flush=True)


def markdown(rows: list[dict], header: str) -> str:
    cells = []
    for r in rows:
        if "skipped" in r:
            cells.append([r["bench"], f"{r['batch']:,}", f"skipped: {r['skipped']}", "", "", ""])
            continue
        succ = f"{100 * r['success']:.2f} %" if "success" in r else ""
        ver = f"{100 * r['verified']:.2f} %" if "verified" in r else ""
        cells.append([r["bench"], f"{r['batch']:,}", f"{r['rate']:,.0f}", f"{r['seconds'] * 1e3:.2f}", succ, ver])
    columns = ["bench", "batch", "per second", "time [ms]", "success", "verified (f64 FK)"]
    return header + "\n\n" + markdown_table(columns, cells)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="solver dtype")
    parser.add_argument("--robot", default="panda")
    parser.add_argument("--batch", type=int, action="append", help="batch size (repeatable); default 1k..1M")
    parser.add_argument("--num-seeds", type=int, default=4)
    parser.add_argument("--max-iterations", type=int, default=200)
    parser.add_argument("--position-tolerance", type=float, default=1e-4)
    parser.add_argument("--orientation-tolerance", type=float, default=1e-3)
    parser.add_argument("--budget-s", type=float, default=150, help="time budget for FK + IK together [s]")
    parser.add_argument("--no-fk", action="store_true", help="skip the FK/Jacobian benchmark")
    parser.add_argument(
        "--jacobian", choices=["lazy", "eager"], default="lazy", help="the LM kernel's Jacobian (default: lazy, the "
        "tensor store's; eager: the host store's), to compare the two on a GPU"
    )  # fmt: skip
    parser.add_argument(
        "--path", choices=["alone", "scheduled"], default="alone", help="alone (default): ik_layer.solve, one launch "
        "on an idle engine; scheduled: Engine.submit and Engine.run, blocks of iterations"
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the rows as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench/ik_gpu.py: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = torch.float32 if args.dtype == "float32" else torch.float64
    batches = sorted(args.batch or DEFAULT_BATCHES)
    robot = load_robot(args.robot, dtype=dtype, device=device)
    robot64 = load_robot(args.robot, dtype=torch.float64, device=device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    header = (
        f"ik-layer {args.robot} on {device} ({name}), {args.dtype}, torch {torch.__version__}, "
        f"{args.num_seeds} seeds, {args.max_iterations} iterations, tol {args.position_tolerance:g} m / "
        f"{args.orientation_tolerance:g} rad, {args.jacobian} Jacobian, {args.path}"
    )
    print(header, flush=True)
    budget_fk = 0 if args.no_fk else args.budget_s * 0.2
    start = time.monotonic()
    rows = [] if args.no_fk else bench_fk(robot, batches, device, budget_fk)
    rows += bench_ik(robot, robot64, batches, device, args.budget_s - (time.monotonic() - start), args)
    print()
    print(markdown(rows, header))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"header": header, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
