"""Goal: one arm solves as fast in a 101-joint model as in a 12-joint one (solves/s ratio >= 0.8x).

example-robot-data's TIAGo dual (101 joints: casters, wheels, suspension, torso, two 7-joint arms, two
five-finger hands, head), its left arm up to ``arm_left_tool_link``, built two ways:

* ``101-joint model``: ``ik_layer.load_robot(urdf, ee_frame=...)``; by default the joints between the base
  and the frame move (the torso lift and the 7 arm joints) and the 93 others are locked at 0.
* ``12-joint model``: the same URDF reduced by ``pin.buildReducedModel`` to the torso lift, the left arm, the
  head and the two wheels (the other joints folded in at 0), then ``ik_layer.Robot(reduced, ee_frame=...)``,
  which locks the head and wheels the same way.

Both must move the same joints (names and limits) and give the same FK. Targets are the FK of configurations
drawn uniformly inside the limits (fixed seed); both robots solve the same targets with ``ik_layer.solve`` and
its default options, in the same process, alternately. Every answer is checked with Pinocchio FK of the
101-joint model at the configuration ``robot.to_full_pinocchio_q`` gives (mapped by joint name for the reduced
model): a success must be within 1e-4 m and 1e-3 rad, inside the joint limits, with every locked joint exactly
at its value. solves/s = targets / wall time of one ``solve`` call (median of ``--repeats`` calls, after a
warm-up). The script exits non-zero when a success is not confirmed; the ratio is printed beside its goal.

    python bench/active_joints.py              # batch 1000, 5 repeats, 1 torch thread
    python bench/active_joints.py --quick      # batch 200, 3 repeats
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
import torch
from common import apply_threads_and_describe, markdown_table

import ik_layer
from ik_layer.testing import example_robot_data_dir

URDF = Path("tiago_description", "robots", "tiago_dual.urdf")  # under example-robot-data's robots/
EE_FRAME = "arm_left_tool_link"
ARM = ["torso_lift_joint", *(f"arm_left_{i}_joint" for i in range(1, 8))]
KEPT = [*ARM, "head_1_joint", "head_2_joint", "wheel_left_joint", "wheel_right_joint"]  # the 12-joint model
GOAL = 0.8  # solves/s in the 101-joint model over the 12-joint one
TOLERANCE = (1e-4, 1e-3)  # [m], [rad]: the solver's defaults
SEED = 20240611


@dataclass
class Case:
    """One robot for the same arm, and how its configurations map into the full model."""

    label: str
    robot: ik_layer.Robot
    index: np.ndarray  # positions in the full model's configuration of ``robot.full_model``'s entries


@dataclass
class Row:
    """Measurements of one case; errors from Pinocchio on the full model."""

    label: str
    moving: int
    batch: int
    success: float  # successes the check confirms, over all targets
    unconfirmed: int  # successes the check refutes
    pos_max: float  # [m] over successes
    ori_max: float  # [rad] over successes
    solves_per_s: float


def full_q_index(full: pin.Model, part: pin.Model) -> np.ndarray:
    """Positions in ``full``'s configuration of the entries of ``part``'s (a reduction of ``full``), by joint name."""
    index: list[int] = []
    for j in range(1, part.njoints):
        joint = full.joints[full.getJointId(part.names[j])]
        index += range(joint.idx_q, joint.idx_q + joint.nq)
    return np.array(index, dtype=np.int64)


def build_cases(urdf: Path) -> tuple[pin.Model, list[Case]]:
    """The full Pinocchio model and the arm as a robot on it and on its 12-joint reduction."""
    full = ik_layer.load_robot(urdf, ee_frame=EE_FRAME)
    model = full.full_model
    lock = [j for j in range(1, model.njoints) if model.names[j] not in KEPT]
    reduced_model = pin.buildReducedModel(model, lock, pin.neutral(model))
    reduced = ik_layer.Robot(reduced_model, ee_frame=EE_FRAME, name="tiago_dual (12 joints)")
    if full.joint_names != ARM or reduced.joint_names != ARM:
        sys.exit(f"moving joints differ: {full.joint_names} (101 joints), {reduced.joint_names} (12 joints)")
    if not (torch.equal(full.lower, reduced.lower) and torch.equal(full.upper, reduced.upper)):
        sys.exit("the two robots' joint limits differ")
    cases = [
        Case(f"{model.njoints - 1}-joint model", full, full_q_index(model, model)),
        Case(f"{reduced_model.njoints - 1}-joint model", reduced, full_q_index(model, reduced_model)),
    ]
    return model, cases


def check(
    model: pin.Model, case: Case, result: ik_layer.IKResult, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pinocchio position [m] and orientation [rad] errors (n,) of the answers on the full model, and whether
    each is inside the limits with every joint that does not move exactly at its value."""
    robot = case.robot
    neutral = pin.neutral(model)
    q_full = np.tile(neutral, (len(targets), 1))
    q_full[:, case.index] = robot.to_full_pinocchio_q(result.q).detach().double().numpy()
    moving = np.zeros(model.nq, dtype=bool)
    for name in robot.joint_names:
        joint = model.joints[model.getJointId(name)]
        moving[joint.idx_q : joint.idx_q + joint.nq] = True
    held = (q_full[:, ~moving] == neutral[~moving]).all(axis=1)
    q = result.q.detach().double()
    in_limits = ((q >= robot.lower) & (q <= robot.upper)).all(-1).numpy()
    data, frame = model.createData(), model.getFrameId(EE_FRAME)
    pos, ori = np.empty(len(targets)), np.empty(len(targets))
    for i, (qi, target) in enumerate(zip(q_full, targets, strict=True)):
        pin.framesForwardKinematics(model, data, qi)
        placement = data.oMf[frame]
        pos[i] = np.linalg.norm(target[:3, 3] - placement.translation)
        ori[i] = np.linalg.norm(pin.log3(target[:3, :3] @ placement.rotation.T))
    return pos, ori, held & in_limits


def solve(robot: ik_layer.Robot, targets: torch.Tensor) -> tuple[ik_layer.IKResult, float]:
    """``ik_layer.solve`` with its default options (seeded); the result and the wall time [s]."""
    generator = torch.Generator().manual_seed(SEED + 1)
    start = time.perf_counter()
    result = ik_layer.solve(robot, targets, generator=generator)
    return result, time.perf_counter() - start


def bench(model: pin.Model, cases: list[Case], batch: int, repeats: int) -> list[Row]:
    """Solve the same targets with every case ``repeats`` times, alternately; check the last answers."""
    first = cases[0].robot
    q_true = first.random_q((batch,), generator=torch.Generator().manual_seed(SEED))
    targets = first.fk(q_true)
    for case in cases[1:]:
        if not torch.allclose(case.robot.fk(q_true), targets, rtol=0, atol=1e-12):
            sys.exit(f"{case.label}: FK differs from the {cases[0].label}'s")
    for case in cases:
        solve(case.robot, targets[:64])  # warm-up
    seconds: dict[str, list[float]] = {case.label: [] for case in cases}
    results: dict[str, ik_layer.IKResult] = {}
    for _ in range(repeats):
        for case in cases:
            results[case.label], took = solve(case.robot, targets)
            seconds[case.label].append(took)
    rows = []
    for case in cases:
        result = results[case.label]
        pos, ori, held = check(model, case, result, targets.numpy())
        success = result.success.numpy()
        confirmed = (pos <= TOLERANCE[0]) & (ori <= TOLERANCE[1]) & held
        rows.append(
            Row(
                label=case.label,
                moving=case.robot.dof,
                batch=batch,
                success=float((success & confirmed).mean()),
                unconfirmed=int((success & ~confirmed).sum()),
                pos_max=float(pos[success].max(initial=0.0)),
                ori_max=float(ori[success].max(initial=0.0)),
                solves_per_s=batch / statistics.median(seconds[case.label]),
            )
        )
    return rows


def markdown(rows: list[Row]) -> str:
    """The results as a Markdown table, each row's solves/s also as a ratio to the last row's."""
    header = [
        "arm in", "moving joints", "batch", "success (Pinocchio-confirmed)", "unconfirmed",
        "max pos err [m]", "max ori err [rad]", "solves/s", "vs 12-joint",
    ]  # fmt: skip
    reference = rows[-1].solves_per_s
    cells = [
        [
            r.label,
            str(r.moving),
            str(r.batch),
            f"{100 * r.success:.2f} %",
            str(r.unconfirmed),
            f"{r.pos_max:.1e}",
            f"{r.ori_max:.1e}",
            f"{r.solves_per_s:,.0f}",
            f"{r.solves_per_s / reference:.2f}x",
        ]
        for r in rows
    ]
    return markdown_table(header, cells)


def default_urdf() -> Path | None:
    """example-robot-data's TIAGo dual URDF, or None when the package is not installed."""
    root = example_robot_data_dir()
    return None if root is None else root / URDF


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="batch 200 and 3 repeats (unless given)")
    parser.add_argument("--batch", type=int, help="targets per solve (default 1000; quick: 200)")
    parser.add_argument("--repeats", type=int, help="timed solves per robot, median reported (default 5; quick: 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--urdf", type=Path, default=default_urdf(), help="tiago_dual.urdf (example-robot-data's)")
    args = parser.parse_args(argv)
    batch = args.batch or (200 if args.quick else 1000)
    repeats = args.repeats or (3 if args.quick else 5)
    if batch < 1 or repeats < 1 or args.threads < 1:
        parser.error("--batch, --repeats and --threads must be positive")
    if args.urdf is None or not args.urdf.is_file():
        parser.error(f"no TIAGo dual URDF at {args.urdf} (pip install example-robot-data, or pass --urdf)")
    print(apply_threads_and_describe(args.threads))
    model, cases = build_cases(args.urdf)
    print(f"{EE_FRAME} of {args.urdf.name}: moving joints {', '.join(cases[0].robot.joint_names)}")
    rows = bench(model, cases, batch, repeats)
    print(markdown(rows))
    ratio = rows[0].solves_per_s / rows[1].solves_per_s
    verdict = "met" if ratio >= GOAL else "NOT met"
    print(f"\n{rows[0].label} / {rows[1].label}: {ratio:.2f}x solves/s (goal >= {GOAL}x: {verdict})")
    unconfirmed = sum(r.unconfirmed for r in rows)
    if unconfirmed:
        print(f"{unconfirmed} successes not confirmed by Pinocchio", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
