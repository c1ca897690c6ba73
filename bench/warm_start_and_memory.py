"""Two of the engine's goals: iterations from a warm start 5 mm from the answer, and peak memory at a large batch.

For each robot, random configurations inside the limits give the targets; each warm start is its answer moved
along a random joint direction until the end effector is 5 mm away (first order, then measured). Every answer is
checked with the robot's FK at the solver tolerances. Then one batch of ``--batch`` targets (default 100k, panda)
is solved and the process's peak resident memory reported.

    python bench/warm_start_and_memory.py --threads 1
    python bench/warm_start_and_memory.py --quick   # 200 targets, batch 10k
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Sequence

import torch
from common import apply_threads_and_describe, benchmark_parser, markdown_table

import ik_layer
from ik_layer.model.lie import pose_error

OFFSET = 0.005  # [m] of end-effector travel between a warm start and its answer


def warm_starts(robot: ik_layer.Robot, q: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Configurations whose end effector lies about :data:`OFFSET` from that of ``q``, along random joint steps."""
    step = torch.randn(q.shape, generator=generator, dtype=q.dtype)
    _, jacobian = robot.fk_jacobian(q)
    travel = (jacobian[:, :3] @ step[..., None]).squeeze(-1).norm(dim=-1, keepdim=True)
    return robot.wrap(q + step * (OFFSET / travel))


def warm_row(name: str, targets: int) -> list[str]:
    """One table row: warm-start distance, iterations (median, p99, max) and verified success for ``name``."""
    robot = ik_layer.load_robot(name)
    generator = torch.Generator().manual_seed(0)
    q = robot.random_q((targets,), generator=generator)
    target = robot.fk(q)
    warm = warm_starts(robot, q, generator)
    result = ik_layer.solve(robot, target, warm_start=warm, generator=torch.Generator().manual_seed(1))
    options = ik_layer.SolveOptions()
    error = pose_error(target, robot.fk(result.q))
    verified = (error[:, :3].norm(dim=-1) <= options.position_tolerance) & (
        error[:, 3:].norm(dim=-1) <= options.orientation_tolerance
    )
    if bool((result.success & ~verified).any()):
        sys.exit(f"{name}: a success the FK check does not confirm")
    distance = (robot.fk(warm)[:, :3, 3] - target[:, :3, 3]).norm(dim=-1)
    iterations = result.iterations.double()
    return [
        name,
        f"{1e3 * float(distance.median()):.1f}",
        f"{float(iterations.median()):.0f} / {float(iterations.quantile(0.99)):.0f} / {int(iterations.max())}",
        f"{100 * float(verified.double().mean()):.2f} %",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--robots", nargs="+", default=["panda", "ur5e", "iiwa14"])
    parser.add_argument("--targets", type=int, help="warm-started targets per robot (default 2000; quick: 200)")
    parser.add_argument("--batch", type=int, help="targets of the memory run, panda (default 100k; quick: 10k)")
    parser.add_argument("--quick", action="store_true", help="fewer targets, a smaller batch")
    args = parser.parse_args(argv)
    args.targets = args.targets or (200 if args.quick else 2000)
    args.batch = args.batch or (10_000 if args.quick else 100_000)
    print(apply_threads_and_describe(args.threads))
    rows = [warm_row(name, args.targets) for name in args.robots]
    header = ["robot", "warm start [mm, median]", "iterations median / p99 / max", "success (FK-verified)"]
    print(markdown_table(header, rows))
    robot = ik_layer.load_robot("panda")
    q = robot.random_q((args.batch,), generator=torch.Generator().manual_seed(2))
    result = ik_layer.solve(robot, robot.fk(q), generator=torch.Generator().manual_seed(3))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    success = 100 * float(result.success.double().mean())
    print(f"panda batch {args.batch}: success {success:.2f} %, peak RSS {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
