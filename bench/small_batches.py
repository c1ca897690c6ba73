"""Small batches on a GPU host: where a solve is faster, on the GPU or on the CPU beside it.

The library's ``solve`` runs on the robot's device. A GPU pays fixed costs per solve (launches, a sync per block of
iterations) that a handful of targets cannot amortise, where the CPU engine answers one target in a fraction of a
millisecond. This script measures both sides on the same host and the same targets, to choose where small batches
should go: for each batch size (default 1, 4, 16, 64, 256, 1024), the median wall time of ``ik_layer.solve`` over
``--calls`` calls (new targets each call: ``fk`` of random configurations in float64, cast to the solver's dtype),
on ``--device`` and on the CPU (``torch.set_num_threads(--threads)``), every success re-checked with float64 FK
(the exit status is 1 if one fails). It prints a table and the batch sizes the CPU solved faster.

    python bench/small_batches.py                            # cuda against the CPU, panda, float32
    python bench/small_batches.py --device cpu --batch 1 --batch 16   # smoke test: the CPU against itself
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

import torch
from common import markdown_table
from ik_gpu import sync, timed, verify

from ik_layer import load_robot, solve

DEFAULT_BATCHES = (1, 4, 16, 64, 256, 1024)


def median_solve(robot, targets64: list[torch.Tensor], robot64) -> tuple[float, float, int]:
    """Median seconds of one ``solve`` per batch of ``targets64`` (each cast to the robot's dtype and device, the
    first call a warm-up), the share of targets solved, and how many successes float64 FK did not confirm."""
    seconds, solved, unconfirmed = [], [], 0
    for k, target64 in enumerate(targets64):
        target = target64.to(robot.device, robot.dtype)
        generator = torch.Generator(device=robot.device).manual_seed(k)
        took, result = timed(lambda t=target, g=generator: solve(robot, t, generator=g), robot.device)
        if k:
            seconds.append(took)
        success = result.success.cpu()
        solved.append(success)
        unconfirmed += int((success & ~verify(robot64, result.q.cpu(), target64, (1e-4, 1e-3))).sum())
    return statistics.median(seconds), float(torch.cat(solved).double().mean()), unconfirmed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="the device to compare with the CPU (default cuda)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--robot", default="panda")
    parser.add_argument("--batch", type=int, action="append", help="batch size (repeatable; default 1..1024)")
    parser.add_argument("--calls", type=int, default=21, help="timed calls per batch size and side, after one warm-up")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the CPU side (default 1)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("small_batches.py: torch sees no CUDA device (try --device cpu for a smoke test)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    robot64 = load_robot(args.robot, dtype=torch.float64)
    sides = {"device": load_robot(args.robot, dtype=dtype).to(device), "cpu": load_robot(args.robot, dtype=dtype)}
    generator = torch.Generator().manual_seed(0)
    rows, cpu_wins, unconfirmed = [], [], 0
    for n in args.batch or DEFAULT_BATCHES:
        targets64 = [robot64.fk(robot64.random_q((n,), generator=generator)) for _ in range(args.calls + 1)]
        measured = {side: median_solve(robot, targets64, robot64) for side, robot in sides.items()}
        sync(device)
        (gpu_s, gpu_ok, gpu_bad), (cpu_s, cpu_ok, cpu_bad) = measured["device"], measured["cpu"]
        unconfirmed += gpu_bad + cpu_bad
        if cpu_s < gpu_s:
            cpu_wins.append(n)
        rows.append([
            f"{n:,}", f"{gpu_s * 1e3:.3f}", f"{100 * gpu_ok:.2f} %", f"{cpu_s * 1e3:.3f}", f"{100 * cpu_ok:.2f} %",
            f"{gpu_s / cpu_s:.2f}x",
        ])  # fmt: skip
        print(f"  batch {n:>6,}: {device} {gpu_s * 1e3:8.3f} ms, cpu {cpu_s * 1e3:8.3f} ms", flush=True)
    header = ["batch", f"{device} median [ms]", "solved", "cpu median [ms]", "solved", f"{device} / cpu"]
    print(f"\n{args.robot}, {args.dtype}, median of {args.calls} calls per batch; CPU with {args.threads} thread(s)\n")
    print(markdown_table(header, rows, text_columns=0))
    print(f"\nthe CPU was faster at batch sizes: {', '.join(map(str, cpu_wins)) or 'none'}")
    print(f"successes float64 FK did not confirm: {unconfirmed}")
    return 1 if unconfirmed else 0


if __name__ == "__main__":
    sys.exit(main())
