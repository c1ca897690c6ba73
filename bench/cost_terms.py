"""What a secondary cost term costs and what it buys: plain vs posture vs centring vs manipulability, same targets.

panda (``panda_link8``), float64, targets the FK of configurations drawn uniformly inside the limits (fixed seed),
solved by ``ik_layer.solve`` with its defaults and, in turn, ``posture`` (the middle of the limits),
``centring=1`` and ``manipulability=0.5``, in the same process, alternately, after a warm-up. Every answer is
checked with Pinocchio FK (a success within 1e-4 m and 1e-3 rad, inside the limits); the script exits non-zero
when a success is not confirmed. solves/s = targets / wall time of one ``solve`` call (median of ``--repeats``).
Beside the rate: the mean squared offset of the joints from the middle of their limits and the mean Yoshikawa
measure ``sqrt(det J J^T)`` of the answers, and the mean iterations (a term's success polishes: more iterations).

    python bench/cost_terms.py              # batch 10000, 3 repeats
    python bench/cost_terms.py --quick      # batch 500, 3 repeats
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import pinocchio as pin
import torch
from common import apply_threads_and_describe, benchmark_parser, markdown_table

import ik_layer


def confirmed(robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor, success: torch.Tensor) -> bool:
    """Whether every reported success reaches its target by Pinocchio's FK, inside the limits."""
    model = robot.model
    data = model.createData()
    frame = model.getFrameId(robot.ee_frame)
    for qi, ti, ok in zip(robot.to_pinocchio_q(q).numpy(), target.numpy(), success.tolist(), strict=True):
        if not ok:
            continue
        pin.framesForwardKinematics(model, data, qi)
        placement = data.oMf[frame]
        position = np.linalg.norm(placement.translation - ti[:3, 3])
        orientation = np.linalg.norm(pin.log3(ti[:3, :3] @ placement.rotation.T))
        if position > 1e-4 or orientation > 1e-3:
            return False
    inside = (q >= robot.lower) & (q <= robot.upper)
    return bool(inside[success].all())


def main() -> int:
    parser = benchmark_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=10_000, help="targets per solve")
    parser.add_argument("--repeats", type=int, default=3, help="timed solves per case")
    parser.add_argument("--quick", action="store_true", help="batch 500")
    args = parser.parse_args()
    machine = apply_threads_and_describe(args.threads)
    batch = 500 if args.quick else args.batch
    robot = ik_layer.load_robot("panda", dtype=torch.float64)
    target = robot.fk(robot.random_q((batch,), generator=torch.Generator().manual_seed(0)))
    middle = (robot.lower + robot.upper) / 2
    cases = {
        "plain": {},
        "posture (middle of the limits)": {"posture": middle},
        "centring=1": {"centring": 1.0},
        "manipulability=0.5": {"manipulability": 0.5},
    }
    for arguments in cases.values():
        ik_layer.solve(robot, target[:64], **arguments)  # kernels compiled or loaded
    times: dict[str, list[float]] = {name: [] for name in cases}
    results: dict[str, ik_layer.IKResult] = {}
    for _ in range(args.repeats):
        for name, arguments in cases.items():
            start = time.perf_counter()
            results[name] = ik_layer.solve(robot, target, generator=torch.Generator().manual_seed(1), **arguments)
            times[name].append(time.perf_counter() - start)
    rows, ok = [], True
    plain_time = statistics.median(times["plain"])
    for name in cases:
        result, elapsed = results[name], statistics.median(times[name])
        ok &= confirmed(robot, result.q, target, result.success)
        offset = float((result.q - middle).square().sum(-1).mean())
        yoshikawa = float(torch.linalg.svdvals(robot.fk_jacobian(result.q)[1]).prod(-1).mean())
        rows.append(
            [
                name,
                f"{float(result.success.double().mean()) * 100:.2f} %",
                f"{batch / elapsed:,.0f}",
                f"{plain_time / elapsed:.2f}x",
                f"{float(result.iterations.double().mean()):.1f}",
                f"{offset:.2f}",
                f"{yoshikawa:.4f}",
            ]
        )
    header = ["case", "success", "solves/s", "rate vs plain", "iterations", "offset^2 from middle", "Yoshikawa"]
    print(markdown_table(header, rows))
    print(f"\npanda, float64, batch {batch}, median of {args.repeats}; {machine}")
    print("every success confirmed with Pinocchio" if ok else "UNCONFIRMED SUCCESS: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
