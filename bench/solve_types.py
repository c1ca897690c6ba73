"""TRAC-IK's solve types against ik-layer's objectives, and a UR5e's branches.

Per robot (panda, ur5e), float64, CPU, the same targets (the FK of uniform configurations) and the same seeds
(uniform configurations) for both:

- ``Distance``: TRAC-IK's Distance solve type (the answer nearest its seed found within its timeout) against
  ``ik_layer.solve(..., objective="closest", warm_start=seed)``: how often ours lies at least as near the seed
  (joint distance, full-turn angles modulo a turn, to within :data:`TIE`), over the targets both solved; on the
  UR5e also how often each lies at the nearest closed-form branch (the true answer, :mod:`ur_analytic`);
- ``Manip1``: TRAC-IK's Manip1 against ``objective="manipulability"``: how often ours is at least as manipulable
  (``sqrt(det(J J^T))``, to within 1e-9);
- time per target: ours is one batched ``solve`` over all targets, TRAC-IK's the sum of its calls, each target in
  turn (its solve types search for their whole timeout).

Every answer counted solved is checked with Pinocchio's FK (1e-4 m, 1e-3 rad). Then ``num_solutions=8`` on the
UR5e against its closed-form IK (:mod:`ur_analytic`): per target, whether every branch (up to 8) is found, over all
targets and over the generic ones (no branch near a singularity, where branches merge and a tolerance admits a
continuum of answers), and how many of our successes on generic targets no branch explains (none should be).

    python bench/solve_types.py                 # 1000 targets, 1000 for the branches
    python bench/solve_types.py --quick         # 100 targets, 100 for the branches
    python bench/solve_types.py --branches-only # the branches alone
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import pinocchio as pin
import torch
from collision import pose_confirmed
from common import apply_threads_and_describe, benchmark_parser, markdown_table
from ik_vs_peers import tracik_solver
from ur_analytic import ur_branches

import ik_layer
from ik_layer.core.solutions import SEPARATION, _distance, _wrapping

TIMEOUT = 0.005  # TRAC-IK's default timeout [s]
TIE = 1e-3  # [rad] answers this much apart in distance to the seed tie (the orientation tolerance: an answer may lie
# anywhere within its pose tolerances, TRAC-IK's and ours alike nearer the seed than the exact nearest UR5e branch)
MATCH = SEPARATION / 2  # [rad] one of our solutions this near a closed-form branch (wrapped distance) finds it
GENERIC = 0.01  # a generic target: the Jacobian's smallest singular value at least this at every branch


def manipulability(robot: ik_layer.Robot, q: torch.Tensor) -> torch.Tensor:
    jac = robot.fk_jacobian(q)[1]
    return torch.linalg.det(jac @ jac.transpose(-1, -2)).clamp_min(0).sqrt()


def tracik(robot: ik_layer.Robot, targets: torch.Tensor, seeds: torch.Tensor, kind: str) -> tuple[torch.Tensor, float]:
    """TRAC-IK's answers (n, dof) (the seed where it found none) and its seconds per target."""
    import pytracik

    solver = tracik_solver(robot.name, TIMEOUT, 1e-5, kind)
    out = []
    start = time.perf_counter()
    for target, seed in zip(targets.numpy(), seeds.numpy(), strict=True):
        qx, qy, qz, qw = pin.Quaternion(target[:3, :3]).coeffs()
        result = pytracik.ik(solver, seed, *target[:3, 3], qx, qy, qz, qw)
        out.append(result[1:] if result[0] >= 0 else seed)
    seconds = (time.perf_counter() - start) / len(targets)
    return torch.tensor(np.array(out)), seconds


def compare(name: str, n: int) -> list[list[str]]:
    robot = ik_layer.load_robot(name, collision=None)
    generator = torch.Generator().manual_seed(1)
    targets = robot.fk(robot.random_q((n,), generator=generator))
    seeds = robot.random_q((n,), generator=generator)
    rows = []
    for kind, objective in (("Distance", "closest"), ("Manip1", "manipulability")):
        ik_layer.solve(robot, targets[:8], warm_start=seeds[:8], objective=objective)  # warm-up
        start = time.perf_counter()
        ours = ik_layer.solve(robot, targets, warm_start=seeds, objective=objective, generator=generator)
        our_seconds = (time.perf_counter() - start) / n
        theirs, their_seconds = tracik(robot, targets, seeds, kind)
        ok_ours = pose_confirmed(robot, ours.q, targets) & ours.success
        ok_theirs = pose_confirmed(robot, theirs, targets)
        both = ok_ours & ok_theirs
        nearest = "-"
        if objective == "closest":
            wrap = _wrapping(robot)
            ours_away, theirs_away = _distance(ours.q, seeds, wrap), _distance(theirs, seeds, wrap)
            better = ours_away <= theirs_away + TIE
            if name == "ur5e":  # the true nearest answer: the nearest closed-form branch (turns wrapped)
                exact = torch.tensor([nearest_branch(t, s, wrap) for t, s in zip(targets, seeds, strict=True)])
                nearest = f"{share(ours_away <= exact + TIE, ok_ours)}, {share(theirs_away <= exact + TIE, ok_theirs)}"
                print(
                    f"ur5e: answers nearer the seed than the nearest closed-form branch (by > 1e-6 rad, within their "
                    f"pose tolerances): ours {share(ours_away < exact - 1e-6, ok_ours)}, TRAC-IK's "
                    f"{share(theirs_away < exact - 1e-6, ok_theirs)}"
                )
        else:
            better = manipulability(robot, ours.q) >= manipulability(robot, theirs) - 1e-9
        rows.append([
            name, f"{kind} / {objective}", f"{100 * float(ok_ours.float().mean()):.1f} %",
            f"{100 * float(ok_theirs.float().mean()):.1f} %", share(better, both), nearest,
            f"{our_seconds * 1e3:.3f}", f"{their_seconds * 1e3:.3f}", f"{their_seconds / our_seconds:.0f}x",
        ])  # fmt: skip
    return rows


def share(hits: torch.Tensor, among: torch.Tensor) -> str:
    """The percentage of ``among`` that ``hits``."""
    return f"{100 * float(hits[among].float().mean()):.1f} %"


def nearest_branch(target: torch.Tensor, seed: torch.Tensor, wrap: torch.Tensor) -> float:
    """The joint distance from ``seed`` to the nearest closed-form UR5e branch of ``target`` (inf: none)."""
    exact = torch.from_numpy(ur_branches(target.numpy()))
    return float(_distance(exact, seed, wrap).min()) if len(exact) else math.inf


def branches(n: int) -> list[str]:
    """ur5e: per target, whether ``num_solutions=8`` finds every branch of the closed-form IK (each within
    :data:`MATCH` of one of ours), over all targets, the generic ones (every branch at least :data:`GENERIC` from a
    singularity: the smallest singular value of its Jacobian) and those with eight; our successes no branch
    explains, on generic targets."""
    robot = ik_layer.load_robot("ur5e", collision=None)
    generator = torch.Generator().manual_seed(2)
    targets = robot.fk(robot.random_q((n,), generator=generator))
    start = time.perf_counter()
    result = ik_layer.solve(robot, targets, num_solutions=8, generator=generator)
    seconds = (time.perf_counter() - start) / n
    confirmed = pose_confirmed(robot, result.q.reshape(-1, 6), targets.repeat_interleave(8, 0)).reshape(n, 8)
    wrap = _wrapping(robot)
    found, generic, eight, unexplained = [], [], [], 0
    for row in range(n):
        exact = torch.from_numpy(ur_branches(targets[row].numpy()))
        ours = result.q[row][result.success[row] & confirmed[row]]
        near = _distance(exact[:, None], ours[None], wrap) < MATCH  # (branches, ours)
        found.append(bool(near.any(1).all()))
        smallest = torch.linalg.svdvals(robot.fk_jacobian(exact)[1]).min() if len(exact) else torch.tensor(0.0)
        generic.append(bool(smallest >= GENERIC))
        eight.append(generic[-1] and len(exact) == 8)
        unexplained += int((~near.any(0)).sum()) if generic[-1] else 0

    def share(among: list[bool]) -> str:
        picked = [f for f, a in zip(found, among, strict=True) if a]
        return f"{100 * sum(picked) / max(len(picked), 1):.1f} % of {len(picked)}"

    return [f"{share([True] * n)}", share(generic), share(eight), f"{unexplained}", f"{seconds * 1e3:.2f}"]


def main() -> int:
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 targets, 100 for the branches")
    parser.add_argument("--branches-only", action="store_true", help="the UR5e's branches alone (no TRAC-IK)")
    args = parser.parse_args()
    n, m = (100, 100) if args.quick else (1000, 1000)
    print(apply_threads_and_describe(args.threads))
    if not args.branches_only:
        rows = compare("panda", n) + compare("ur5e", n)
        print(f"\n{n} targets, the same seeds; TRAC-IK timeout {TIMEOUT * 1e3:g} ms; answers checked with Pinocchio")
        header = ["robot", "TRAC-IK / ours", "ours solved", "TRAC-IK solved", "ours at least as good",
                  "nearest branch: ours, TRAC-IK", "ours ms/target", "TRAC-IK ms/target", "speed-up"]  # fmt: skip
        print(markdown_table(header, rows, text_columns=2))
        print(f"(distances to the seed within {TIE:g} rad tie; nearest branch: within {TIE:g} rad of the closed form)")
    print("\nur5e, num_solutions=8 against the closed-form branches (bench/ur_analytic.py)")
    header = ["every branch found: all targets", "generic targets", "generic with 8", "unexplained", "ms/target"]
    print(markdown_table(header, [branches(m)], text_columns=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
