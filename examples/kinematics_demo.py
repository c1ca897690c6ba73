"""Load every built-in robot and check its batched FK and Jacobian against Pinocchio.

Prints each robot's dof, joints and end-effector frame, and the largest pose and
Jacobian differences to Pinocchio (``forwardKinematics``, ``updateFramePlacements``,
``computeFrameJacobian(..., LOCAL_WORLD_ALIGNED)``) over 100 random configurations
inside the joint limits. Exits with status 1 if any difference exceeds 1e-10.

Run: ``python examples/kinematics_demo.py``
"""

from __future__ import annotations

import sys

import numpy as np
import pinocchio as pin
import torch

import ik_layer

TOLERANCE = 1e-10
N_CONFIGS = 100


def max_differences(robot: ik_layer.Robot, q: torch.Tensor) -> tuple[float, float]:
    """Largest |pose - Pinocchio| and |J - Pinocchio| over the configurations ``q`` (N, dof)."""
    pose, jac = robot.fk_jacobian(q)
    model, data = robot.model, robot.model.createData()
    frame = model.getFrameId(robot.ee_frame)
    dpose = djac = 0.0
    for i, qi in enumerate(robot.to_pinocchio_q(q).numpy()):
        pin.forwardKinematics(model, data, qi)
        pin.updateFramePlacements(model, data)
        ref_jac = pin.computeFrameJacobian(model, data, qi, frame, pin.LOCAL_WORLD_ALIGNED)
        dpose = max(dpose, float(np.abs(pose[i].numpy() - data.oMf[frame].homogeneous).max()))
        djac = max(djac, float(np.abs(jac[i].numpy() - ref_jac).max()))
    return dpose, djac


def main() -> int:
    torch.set_num_threads(1)  # small tensors: more threads only wait for each other (and for other processes)
    generator = torch.Generator().manual_seed(0)
    failed = []
    for name in ik_layer.builtin_robots():
        robot = ik_layer.load_robot(name)
        q = robot.random_q((N_CONFIGS,), generator=generator)
        dpose, djac = max_differences(robot, q)
        ok = dpose <= TOLERANCE and djac <= TOLERANCE
        print(f"{name}: {robot.dof} dof, ee frame {robot.ee_frame!r}")
        print(f"  joints: {', '.join(robot.joint_names)}")
        print(f"  max |FK - Pinocchio| = {dpose:.1e}, max |J - Pinocchio| = {djac:.1e} "
              f"over {N_CONFIGS} configurations: {'ok' if ok else 'FAIL'}")  # fmt: skip
        if not ok:
            failed.append(name)
    if failed:
        print(f"FAILED (tolerance {TOLERANCE:g}): {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(ik_layer.builtin_robots())} robots agree with Pinocchio to {TOLERANCE:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
