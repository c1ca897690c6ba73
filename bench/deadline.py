"""``solve(..., timeout=)`` at any batch: how long after its timeout a solve returns, and what it has solved by then.

For each robot, batch size and timeout: ``--calls`` solves of new reachable targets (``fk`` of random configurations,
float64) with ``timeout``, once warm (a first solve at the size builds or grows the robot's engine, which happens
before the clock starts and is not counted); the median wall time of the call (checking the targets included), its
ratio to the timeout, the rows answering SOLVED and DEADLINE, and every SOLVED answer re-checked with Pinocchio
(``bench/ik_vs_peers.py``'s ``verify``; the exit status is 1 if one fails). The same targets without a timeout give
the time a whole solve takes, for scale.

    python bench/deadline.py --threads 1                                  # panda, 1k / 20k / 100k, 10 / 50 / 200 ms
    python bench/deadline.py --robots ur5e --batch 20000 --timeout 0.05 --calls 3
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from common import apply_threads_and_describe, benchmark_parser, markdown_table
from ik_vs_peers import succeeded, verify

import ik_layer


def one_size(
    name: str, robot: ik_layer.Robot, n: int, timeouts: list[float], calls: int, seed: int
) -> tuple[list[list[str]], int]:
    """Table rows of ``n`` targets under each timeout, and the count of SOLVED answers Pinocchio refutes."""
    generator = torch.Generator().manual_seed(seed)
    target = robot.fk(robot.random_q((n,), generator=generator))
    ik_layer.solve(robot, target, generator=generator)  # builds or grows the engine to n slots
    start = time.perf_counter()
    ik_layer.solve(robot, target, generator=generator)
    whole = time.perf_counter() - start
    rows, refuted = [], 0
    for timeout in timeouts:
        ik_layer.solve(robot, target, timeout=timeout, generator=generator)  # the pacer's estimates, warm
        seconds, solved, late = [], [], []
        for _ in range(calls):
            target = robot.fk(robot.random_q((n,), generator=generator))
            start = time.perf_counter()
            result = ik_layer.solve(robot, target, timeout=timeout, generator=generator)
            seconds.append(time.perf_counter() - start)
            assert result.status is not None
            solved.append(int((result.status == ik_layer.SOLVED).sum()))
            late.append(int((result.status == ik_layer.DEADLINE).sum()))
            rows_solved = result.success.nonzero().squeeze(-1)
            pos, ori, inside = verify(robot, result.q[rows_solved], target[rows_solved].numpy())
            options = ik_layer.SolveOptions()
            ok = succeeded(pos, ori, (options.position_tolerance, options.orientation_tolerance)) & inside
            refuted += int((~ok).sum())
        median = statistics.median(seconds)
        rows.append(
            [
                name, f"{n:,}", f"{timeout * 1e3:g}", f"{median * 1e3:.1f}", f"{median / timeout:.2f}",
                f"{statistics.median(solved):,.0f}", f"{statistics.median(late):,.0f}", f"{whole * 1e3:.0f}",
            ]
        )  # fmt: skip
    return rows, refuted


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=["panda"])
    parser.add_argument("--batch", type=int, action="append", help="batch sizes (default 1,000, 20,000, 100,000)")
    parser.add_argument("--timeout", type=float, action="append", help="timeouts [s] (default 0.01, 0.05, 0.2)")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per size and timeout (median)")
    args = parser.parse_args(argv)
    print(apply_threads_and_describe(args.threads))
    header = ["robot", "targets", "timeout [ms]", "returned [ms]", "x timeout", "solved", "deadline", "whole [ms]"]
    rows, refuted = [], 0
    for name in args.robots:
        robot = ik_layer.load_robot(name)
        for n in args.batch or [1_000, 20_000, 100_000]:
            more, wrong = one_size(name, robot, n, args.timeout or [0.01, 0.05, 0.2], args.calls, seed=n)
            rows += more
            refuted += wrong
    print(markdown_table(header, rows, text_columns=1))
    print(f"SOLVED answers Pinocchio refutes: {refuted}")
    return 1 if refuted else 0


if __name__ == "__main__":
    sys.exit(main())
