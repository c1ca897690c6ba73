"""Trajectories (issue 43): velocity violations and accuracy against per-frame IK, talos retargeting, gradients.

Every answer is re-checked with Pinocchio in float64 (its own FK of the robot's model at each frame). Peers run in
the same process on the same clips: per-frame ``ik_layer.solve`` warm-started at the previous frame's answer, the
usual way to solve a sequence. Exits 1 if a solve_trajectory step exceeds ``v_max * dt`` or a reported success is
not confirmed by Pinocchio.

Run: ``python bench/trajectory.py --threads 1`` (``--quick``: fewer and shorter clips).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import apply_threads_and_describe, benchmark_parser, markdown_table

import ik_layer
from ik_layer.testing import example_robot_data_dir
from ik_layer.trajectory.problem import joint_difference, velocity_limits
from ik_layer.trajectory.synthetic import joint_paths, motion_around

DT = 0.01  # 100 Hz clips
TALOS_FRAMES = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]


def confirmed(
    robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor, tolerances: tuple[float, float]
) -> np.ndarray:
    """(...) whether Pinocchio (float64) puts every end-effector frame of ``q`` (..., nq) within the tolerances of
    ``target`` (..., [F,] 4, 4)."""
    model, data = robot.model, robot.model.createData()
    names = robot.ee_frames or [robot.ee_frame]
    flat = robot.to_pinocchio_q(q).double().numpy().reshape(-1, model.nq)
    goal = target.double().numpy().reshape(flat.shape[0], len(names), 4, 4)
    ok = np.empty(flat.shape[0], dtype=bool)
    for i, qi in enumerate(flat):
        pin.framesForwardKinematics(model, data, qi)
        worst_p = worst_r = 0.0
        for f, name in enumerate(names):
            reached = data.oMf[model.getFrameId(name)]
            worst_p = max(worst_p, float(np.linalg.norm(reached.translation - goal[i, f, :3, 3])))
            worst_r = max(worst_r, float(np.linalg.norm(pin.log3(goal[i, f, :3, :3] @ reached.rotation.T))))
        ok[i] = worst_p <= tolerances[0] and worst_r <= tolerances[1]
    return ok.reshape(q.shape[:-1])


def violations(robot: ik_layer.Robot, q: torch.Tensor, start: torch.Tensor, limit: torch.Tensor) -> int:
    """Frames of ``q`` (clips, T, nq) with a joint step over ``limit * DT`` (from ``start`` (clips, nq))."""
    previous = torch.cat((start[:, None], q[:, :-1]), 1)
    return int((joint_difference(robot, q, previous).abs() > limit * DT).any(-1).sum())


def per_frame(robot: ik_layer.Robot, target: torch.Tensor, start: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Per-frame ``solve`` warm-started at the previous answer: q (clips, T, nq) and the seconds it took."""
    began, q, answers = time.perf_counter(), start, []
    for t in range(target.shape[1]):
        q = ik_layer.solve(robot, target[:, t], warm_start=q).q
        answers.append(q)
    return torch.stack(answers, 1), time.perf_counter() - began


def arm_rows(name: str, clips: int, frames: int, seed: int, failures: list[str]) -> list[list[str]]:
    """ur5e / panda: clips at 0.8 v_max through singular regions, trajectory vs per-frame solve."""
    robot = ik_layer.load_robot(name)
    path = joint_paths(robot, clips, frames, DT, speed=0.8, generator=torch.Generator().manual_seed(seed))
    target, start, limit = robot.fk(path), path[:, 0], velocity_limits(robot)
    tolerances = (1e-4, 1e-3)
    rows = []
    peer, seconds = per_frame(robot, target, start)
    ok = confirmed(robot, peer, target, tolerances)
    rows.append([name, "per-frame solve, warm-started", f"{ok.mean():.2%}", str(violations(robot, peer, start, limit)),
                 f"{clips * frames / seconds:,.0f}"])  # fmt: skip
    for acceleration in (0.0, 10.0):
        began = time.perf_counter()
        result = ik_layer.solve_trajectory(robot, target, dt=DT, warm_start=start, acceleration=acceleration)
        seconds = time.perf_counter() - began
        ok = confirmed(robot, result.q, target, tolerances)
        if (result.success.numpy() & ~ok).any():
            failures.append(f"{name}: a success not confirmed by Pinocchio")
        bad = violations(robot, result.q, start, limit)
        if bad:
            failures.append(f"{name}: {bad} frames over v_max * dt")
        rows.append([name, f"solve_trajectory, acceleration={acceleration:g}", f"{ok.mean():.2%}", str(bad),
                     f"{clips * frames / seconds:,.0f}"])  # fmt: skip
    return rows


def talos_stance(robot: ik_layer.Robot) -> torch.Tensor:
    """Talos standing with bent knees and its arms off their limits."""
    q = robot.neutral_q()
    for side, sign in (("left", 1), ("right", -1)):
        for joint, angle in (("leg_%s_3_joint", -0.4), ("leg_%s_4_joint", 0.8), ("leg_%s_5_joint", -0.4),
                             ("arm_%s_2_joint", 0.2 * sign), ("arm_%s_4_joint", -0.6)):  # fmt: skip
            q[7 + robot.joint_names.index(joint % side)] = angle
    return q


def talos_rows(clips: int, frames: int, failures: list[str]) -> tuple[list[list[str]], str]:
    """Talos retargeting: one clip and ``clips`` clips at once, frames/s and real-time factor, per-frame peer."""
    urdf = example_robot_data_dir() / "talos_data/robots/talos_reduced.urdf"
    robot = ik_layer.load_robot(urdf, ee_frames=TALOS_FRAMES, floating_base=True)
    stance = talos_stance(robot)
    motion = motion_around(robot, stance, clips, frames, DT, generator=torch.Generator().manual_seed(7))
    target, limit, tolerances = robot.fk(motion), velocity_limits(robot), (1e-4, 1e-3)
    starts = stance.expand(clips, -1)
    ik_layer.solve_trajectory(robot, target[:1, :10], dt=DT, warm_start=stance)  # kernels compiled, engine built
    rows, rates = [], {}
    for batch in (1, clips):
        began = time.perf_counter()
        result = ik_layer.solve_trajectory(robot, target[:batch], dt=DT, warm_start=starts[:batch], posture=stance)
        seconds = time.perf_counter() - began
        ok = confirmed(robot, result.q, target[:batch], tolerances)
        if (result.success.numpy() & ~ok).any():
            failures.append("talos: a success not confirmed by Pinocchio")
        bad = violations(robot, result.q, starts[:batch], limit)
        if bad:
            failures.append(f"talos: {bad} frames over v_max * dt")
        rates[batch] = batch * frames / seconds
        rows.append(["talos", f"solve_trajectory, {batch} clip{'s' if batch > 1 else ''}", f"{ok.mean():.2%}", str(bad),
                     f"{rates[batch]:,.0f} ({rates[batch] * DT:.0f}x real time per clip)" if batch == 1
                     else f"{rates[batch]:,.0f} ({rates[batch] / rates[1]:.1f}x one clip)"])  # fmt: skip
    peer, seconds = per_frame(robot, target[:1], starts[:1])
    ok = confirmed(robot, peer, target[:1], tolerances)
    rows.insert(0, ["talos", "per-frame solve, warm-started, 1 clip", f"{ok.mean():.2%}",
                    str(violations(robot, peer, starts[:1], limit)), f"{frames / seconds:,.0f}"])  # fmt: skip
    return rows, f"talos: {clips} clips of {frames} frames at 100 Hz, 28 joints on a floating base, 4 frames"


def gradient_errors(sequences: int, frames: int) -> list[float]:
    """Relative differences between the backward's and central differences' ``v . dq/dpose d`` (panda)."""
    robot = ik_layer.load_robot("panda")
    errors = []
    for index in range(sequences):
        g = torch.Generator().manual_seed(100 + index)
        path = joint_paths(robot, 1, frames, DT, speed=0.5, generator=g)
        pose = ik_layer.matrix_to_pose(robot.fk(path)).requires_grad_(True)
        result = ik_layer.ik_trajectory(robot, pose, dt=DT, warm_start=path[:, 0], acceleration=float(index % 3))
        v = (
            torch.randn(result.q.shape, generator=g, dtype=torch.float64)
            * (result.success & ~result.bounded)[..., None]
        )
        (result.q * v).sum().backward()
        d = torch.randn(pose.shape, generator=g, dtype=torch.float64)
        eps = 1e-6
        with torch.no_grad():
            moved = [ik_layer.ik_trajectory(robot, pose.detach() + s * eps * d, dt=DT, warm_start=path[:, 0],
                                            acceleration=float(index % 3)).q for s in (1, -1)]  # fmt: skip
        numeric = float(((moved[0] - moved[1]) * v).sum() / (2 * eps))
        errors.append(abs(float((pose.grad * d).sum()) - numeric) / abs(numeric))
    return errors


def main() -> int:
    parser = benchmark_parser(__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter clips")
    args = parser.parse_args()
    print(apply_threads_and_describe(args.threads))
    failures: list[str] = []
    arm_clips, arm_frames = (4, 200) if args.quick else (32, 500)
    rows = arm_rows("ur5e", arm_clips, arm_frames, 1, failures) + arm_rows("panda", arm_clips, arm_frames, 2, failures)
    print(f"\nur5e / panda: {arm_clips} clips of {arm_frames} frames at 100 Hz, joint paths at 0.8 v_max (through "
          "singular configurations); within tolerance = confirmed by Pinocchio")  # fmt: skip
    header = ["robot", "method", "frames within tolerance", "frames over v_max dt", "frames/s"]
    talos, caption = talos_rows(4 if args.quick else 64, 200 if args.quick else 1000, failures)
    print(markdown_table(header, rows, text_columns=2))
    print(f"\n{caption}")
    print(markdown_table(header, talos, text_columns=2))
    errors = gradient_errors(5 if args.quick else 20, 8)
    print(f"\ngradients, panda, {len(errors)} sequences of 8 frames: relative difference to central differences "
          f"median {statistics.median(errors):.1e}, largest {max(errors):.1e}")  # fmt: skip
    for failure in failures:
        print("FAILED:", failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
