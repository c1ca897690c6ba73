"""Robots beyond one serial chain on the engine and on the eager reference path: success, iterations, solves/s.

example-robot-data's models, each with several end-effector frames:

* ``talos hands``: both grippers of the humanoid on a fixed base (torso and arms move, 16 joints);
* ``talos whole body``: both soles and both grippers on a floating base (legs, torso, arms: 6 + 28 dof);
* ``solo12 feet``: the quadruped's four feet, position-only, on a floating base (6 + 12 dof).

Targets are the FK of configurations drawn uniformly inside the joint limits, a floating base anywhere in a
1 m box in any orientation (fixed seed). Both paths solve the same targets with ``ik_layer.solve`` and its
default options (``reference=True`` for the eager path), in the same process. Every success is checked with
Pinocchio: ``framesForwardKinematics`` of the robot's full model (free-flyer included) at
``robot.to_full_pinocchio_q(q)``, every frame within 1e-4 m and 1e-3 rad over its weighted axes. solves/s =
targets / wall time of one ``solve`` call (median of ``--repeats`` calls after a warm-up, which also compiles
the engine's kernel). Exits non-zero when a success is not confirmed.

    python bench/robot_models.py              # 500 targets, 3 repeats, 1 torch thread
    python bench/robot_models.py --quick      # 100 targets, 1 repeat
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
from ik_layer.model.lie import so3_log
from ik_layer.testing import example_robot_data_dir, random_configurations

TALOS = Path("talos_data", "robots", "talos_reduced.urdf")
SOLO = Path("solo_description", "robots", "solo12.urdf")
HANDS = ["gripper_left_base_link", "gripper_right_base_link"]
TOLERANCE = (1e-4, 1e-3)  # [m], [rad]: the solver's defaults
SEED = 20261203


@dataclass(frozen=True)
class Case:
    """A robot, its error weights (one row per frame) and how it is named in the table."""

    label: str
    robot: ik_layer.Robot
    weights: torch.Tensor


def cases(robots: Path) -> list[Case]:
    """The robots of the module docstring, loaded from example-robot-data's ``robots`` folder."""
    talos, solo = robots / TALOS, robots / SOLO
    body = ["left_sole_link", "right_sole_link", *HANDS]
    feet = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    full, position = torch.ones(6, dtype=torch.float64), torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64)
    return [
        Case("talos hands", ik_layer.load_robot(talos, ee_frames=HANDS), full.expand(2, 6)),
        Case("talos whole body", ik_layer.load_robot(talos, ee_frames=body, floating_base=True), full.expand(4, 6)),
        Case("solo12 feet", ik_layer.load_robot(solo, ee_frames=feet, floating_base=True), position.expand(4, 6)),
    ]


def confirmed(case: Case, target: torch.Tensor, result: ik_layer.IKResult) -> tuple[np.ndarray, int]:
    """Per target, whether Pinocchio confirms the answer (successes only), and how many successes it refutes."""
    robot = case.robot
    model, data = robot.full_model, robot.full_model.createData()
    frames = [model.getFrameId(name) for name in robot.ee_frames]
    full_q = robot.to_full_pinocchio_q(result.q).numpy()
    poses = np.empty((len(full_q), len(frames), 4, 4))
    for i, qi in enumerate(full_q):
        pin.framesForwardKinematics(model, data, qi)
        poses[i] = [data.oMf[f].homogeneous for f in frames]
    reached = torch.from_numpy(poses)
    weighted = case.weights > 0
    position = ((reached[..., :3, 3] - target[..., :3, 3]) * weighted[:, :3]).norm(dim=-1).amax(-1)
    turn = so3_log(target[..., :3, :3] @ reached[..., :3, :3].transpose(-1, -2))
    rotation = (turn * weighted[:, 3:]).norm(dim=-1).amax(-1)
    good = (position <= TOLERANCE[0]) & (rotation <= TOLERANCE[1])
    success = result.success
    return (success & good).numpy(), int((success & ~good).sum())


def measure(case: Case, target: torch.Tensor, reference: bool, repeats: int) -> tuple[ik_layer.IKResult, float]:
    """The answer of one solve and the median wall time [s] of ``repeats`` more (after a warm-up)."""

    def run() -> ik_layer.IKResult:
        g = torch.Generator().manual_seed(SEED + 1)
        return ik_layer.solve(case.robot, target, weights=case.weights, generator=g, reference=reference)

    result = run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=500, help="targets per robot (default 500)")
    parser.add_argument("--repeats", type=int, default=3, help="timed solves per path (default 3)")
    parser.add_argument("--quick", action="store_true", help="100 targets, 1 repeat")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    batch, repeats = (100, 1) if args.quick else (args.batch, args.repeats)
    machine = apply_threads_and_describe(args.threads)
    robots = example_robot_data_dir()
    if robots is None:
        print("example-robot-data is not installed: pip install example-robot-data", file=sys.stderr)
        return 2
    rows, refuted = [], 0
    for case in cases(robots):
        target = case.robot.fk(random_configurations(case.robot, batch, torch.Generator().manual_seed(SEED)))
        per_path = {}
        for reference in (False, True):
            result, seconds = measure(case, target, reference, repeats)
            good, wrong = confirmed(case, target, result)
            refuted += wrong
            iterations = result.iterations.double()
            per_path[reference] = batch / seconds
            rows.append([
                case.label, f"{case.robot.dof}", "reference" if reference else "engine", f"{batch}",
                f"{100 * good.mean():.2f} %", f"{wrong}", f"{float(iterations.median()):.0f}",
                f"{float(iterations.quantile(0.99)):.0f}", f"{batch / seconds:,.0f}",
                f"{per_path[reference] / per_path[False]:.2f}x",
            ])  # fmt: skip
        print(f"{case.label}: engine {per_path[False] / per_path[True]:.1f}x the reference path", flush=True)
    header = [
        "robot", "dof", "path", "targets", "success (Pinocchio-confirmed)", "refuted", "iterations median",
        "iterations p99", "solves/s", "vs engine",
    ]  # fmt: skip
    print(f"\n{machine}\n\n{markdown_table(header, rows, text_columns=3)}")
    if refuted:
        print(f"{refuted} successes not confirmed by Pinocchio", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
