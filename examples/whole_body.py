"""Whole-body IK of a humanoid on a floating base: feet where they stand, hands reaching, a nominal posture.

Talos (example-robot-data) with four end-effector frames (both soles, both grippers) under a free-flyer.
From a standing configuration, each hand target moves by up to 20 cm; the soles keep their poses. The
engine solves every target with the stance as posture (its joints pulled towards it in the null space),
every answer is checked with Pinocchio's own free-flyer model, and the gradient of a loss on the joints
flows back to the hand targets through the implicit layer (``ik_layer.ik``). Exits 1 on a failed check.

Run: ``python examples/whole_body.py`` (needs ``pip install example-robot-data``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import torch

import ik_layer
from ik_layer.testing import example_robot_data_dir

FRAMES = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]
TARGETS = 200


def talos_urdf() -> Path:
    """Talos' URDF from example-robot-data."""
    robots = example_robot_data_dir()
    if robots is None:
        sys.exit("this example needs example-robot-data: pip install example-robot-data")
    return robots / "talos_data/robots/talos_reduced.urdf"


def pinocchio_poses(urdf: Path, robot: ik_layer.Robot, q: torch.Tensor) -> np.ndarray:
    """Poses (n, F, 4, 4) of the frames from Pinocchio's free-flyer model, the joints ``robot`` locks at 0."""
    full = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
    lock = [j for j in range(2, full.njoints) if full.names[j] not in robot.joint_names]
    model = pin.buildReducedModel(full, lock, pin.neutral(full))
    data = model.createData()
    cols = [model.joints[model.getJointId(name)].idx_q for name in robot.joint_names]
    poses = np.empty((q.shape[0], len(FRAMES), 4, 4))
    for i, qi in enumerate(q.numpy()):
        q_pin = np.empty(model.nq)
        q_pin[:7], q_pin[cols] = qi[:7], qi[7:]
        pin.framesForwardKinematics(model, data, q_pin)
        poses[i] = [data.oMf[model.getFrameId(name)].homogeneous for name in FRAMES]
    return poses


def main() -> int:
    torch.set_num_threads(1)  # small tensors: more threads only wait for each other (and for other processes)
    urdf = talos_urdf()
    robot = ik_layer.load_robot(urdf, ee_frames=FRAMES, floating_base=True)
    g = torch.Generator().manual_seed(0)
    stance = robot.neutral_q()
    target = robot.fk(stance).expand(TARGETS, -1, -1, -1).clone()
    target[:, 2:, :3, 3] += 0.2 * (torch.rand(TARGETS, 2, 3, generator=g, dtype=torch.float64) - 0.5)
    result = ik_layer.solve(robot, target, posture=stance, generator=g)

    reached = torch.from_numpy(pinocchio_poses(urdf, robot, result.q))
    ok = result.success
    position = (reached[..., :3, 3] - target[..., :3, 3]).norm(dim=-1).amax(-1)
    rotation = ik_layer.model.lie.so3_log(target[..., :3, :3] @ reached[..., :3, :3].transpose(-1, -2)).norm(dim=-1)
    confirmed = ok & (position <= 1e-4) & (rotation.amax(-1) <= 1e-3)
    moved = (result.q[:, 7:] - stance[7:]).norm(dim=-1)
    print(f"{robot}\n{int(ok.sum())}/{TARGETS} solved, {int(confirmed.sum())} confirmed by Pinocchio; median "
          f"{float(result.iterations.double().median()):.0f} iterations; joints moved from the stance by "
          f"{float(moved.median()):.3f} rad (median)")  # fmt: skip

    # Gradients through the implicit layer: how the hand targets should move to bring the elbows home.
    hands = target[:8].clone().requires_grad_(True)
    q = ik_layer.ik(robot, hands, posture=stance, generator=g)
    loss = ((q[:, 7:] - stance[7:]) ** 2).sum()
    loss.backward()
    print(f"d loss / d hand targets: {hands.grad[:, 2:, :3, 3].norm():.3g} (soles: {hands.grad[:, :2].norm():.3g})")
    return 0 if bool(confirmed.double().mean() >= 0.99) and torch.isfinite(hands.grad).all() else 1


if __name__ == "__main__":
    sys.exit(main())
