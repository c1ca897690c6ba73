"""Retargeting a motion onto a humanoid: Talos' feet and hands follow a reference motion, within its velocity limits.

A synthetic reference motion (every joint swinging smoothly about a standing pose, at up to half its velocity limit;
``ik_layer.trajectory.synthetic.motion_around``) gives the poses of Talos' soles and grippers at 100 Hz: the targets,
as a motion-capture clip's retargeted end-effector poses would be. ``ik_layer.solve_trajectory`` solves the clip on
a floating base, each frame from the previous one, every joint step within ``v_max * dt`` of the URDF's
``<limit velocity>`` and inside the joint limits, the stance as posture. Every answer is checked with Pinocchio's own
FK in float64, and a loss on the hands' joints is differentiated back to the targets of every frame through
``ik_layer.ik_trajectory`` (a short piece of the clip). Exits 1 on a failed check.

Run: ``python examples/retarget_talos.py`` (needs ``pip install example-robot-data``); ``--view`` then plays the
result in the browser viewer (the ``view`` extra), the pelvis held still (the viewer draws fixed-base robots).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pinocchio as pin
import torch

import ik_layer
from ik_layer.testing import example_robot_data_dir
from ik_layer.trajectory.problem import joint_difference
from ik_layer.trajectory.synthetic import motion_around

FRAMES = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]
DT = 0.01  # [s] a 100 Hz clip


def stance(robot: ik_layer.Robot) -> torch.Tensor:
    """Talos standing with bent knees (straight legs are singular) and its arms off their limits."""
    q = robot.neutral_q()
    for side, sign in (("left", 1), ("right", -1)):
        for joint, angle in (("leg_%s_3_joint", -0.4), ("leg_%s_4_joint", 0.8), ("leg_%s_5_joint", -0.4),
                             ("arm_%s_2_joint", 0.2 * sign), ("arm_%s_4_joint", -0.6)):  # fmt: skip
            q[7 + robot.joint_names.index(joint % side)] = angle
    return q


def confirmed(robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor) -> np.ndarray:
    """(T,) whether Pinocchio (float64) puts all four frames of ``q`` (T, nq) within 0.1 mm and 1 mrad of
    ``target`` (T, 4, 4, 4)."""
    model, data = robot.model, robot.model.createData()
    ok = np.empty(q.shape[0], dtype=bool)
    for t, qt in enumerate(robot.to_pinocchio_q(q).numpy()):
        pin.framesForwardKinematics(model, data, qt)
        errors = []
        for f, name in enumerate(FRAMES):
            reached, goal = data.oMf[model.getFrameId(name)], target[t, f].numpy()
            errors.append((np.linalg.norm(reached.translation - goal[:3, 3]) <= 1e-4)
                          and np.linalg.norm(pin.log3(goal[:3, :3] @ reached.rotation.T)) <= 1e-3)  # fmt: skip
        ok[t] = all(errors)
    return ok


def play(urdf: str, joint_names: list[str], q: torch.Tensor) -> None:
    """Play the clip's joints (T, joints) in the browser viewer until interrupted."""
    from ik_layer.viewer import Viewer  # the view extra

    arm = ik_layer.load_robot(urdf, "gripper_left_base_link", active_joints=joint_names)
    viewer = Viewer(arm, urdf=urdf, port=0)
    print(f"playing at {viewer.url} (Ctrl-C to stop)")
    try:
        while True:
            for joints in q:
                viewer.set_q(joints)
                time.sleep(DT)
    except KeyboardInterrupt:
        viewer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000, help="frames of the clip (100 Hz)")
    parser.add_argument("--view", action="store_true", help="play the result in the browser viewer")
    args = parser.parse_args()
    torch.set_num_threads(1)
    robots = example_robot_data_dir()
    if robots is None:
        sys.exit("this example needs example-robot-data: pip install example-robot-data")
    urdf = str(robots / "talos_data/robots/talos_reduced.urdf")
    robot = ik_layer.load_robot(urdf, ee_frames=FRAMES, floating_base=True)
    standing = stance(robot)
    reference = motion_around(robot, standing, 1, args.frames, DT, generator=torch.Generator().manual_seed(0))[0]
    target = robot.fk(reference)  # (T, 4, 4, 4): soles and grippers of the reference motion

    began = time.perf_counter()
    result = ik_layer.solve_trajectory(robot, target, dt=DT, warm_start=standing, posture=standing)
    seconds = time.perf_counter() - began
    ok = confirmed(robot, result.q, target)
    limit = ik_layer.velocity_limits(robot) * DT
    steps = joint_difference(robot, result.q, torch.cat((standing[None], result.q[:-1]))).abs()
    within = bool((steps <= limit).all())
    print(f"{robot}\n{args.frames} frames ({args.frames * DT:.0f} s at 100 Hz) in {seconds:.2f} s "
          f"({args.frames * DT / seconds:.0f}x real time); {ok.mean():.2%} confirmed by Pinocchio; largest step "
          f"{float(result.velocity_ratio.max()):.2f} of v_max dt; {int(result.bounded.sum())} frames solved in "
          "their velocity box")  # fmt: skip

    # Gradients over a piece of the clip: how should the hand targets move to keep the elbows nearer the stance?
    piece = ik_layer.matrix_to_pose(target[:20]).requires_grad_(True)
    q = ik_layer.ik_trajectory(robot, piece, dt=DT, warm_start=standing, posture=standing).q
    elbows = [7 + robot.joint_names.index(f"arm_{side}_4_joint") for side in ("left", "right")]
    ((q[:, elbows] - standing[elbows]) ** 2).sum().backward()
    print(f"d loss / d hand targets over 20 frames: {piece.grad[:, 2:].norm():.3g} "
          f"(first frame {piece.grad[0, 2:].norm():.3g}, last {piece.grad[-1, 2:].norm():.3g})")  # fmt: skip
    if args.view:
        play(urdf, robot.joint_names, result.q[:, 7:])
    good = ok.mean() >= 0.995 and within and bool((result.success.numpy() <= ok).all())
    return 0 if good and bool(torch.isfinite(piece.grad).all()) else 1


if __name__ == "__main__":
    sys.exit(main())
