"""Stage 4, encode: tensors -> response models (solutions, poses, robot descriptions)."""

from __future__ import annotations

from torch import Tensor

from ik_layer import Robot
from ik_layer.server.predict import Prediction
from ik_layer.server.schemas import IKSolution, Pose, RobotInfo

__all__ = ["poses", "robot_info", "solutions"]


def solutions(prediction: Prediction) -> list[IKSolution]:
    """One solution per row of ``prediction``; ``gradient`` only on the rows that asked for it."""
    result = prediction.result
    q, success = result.q.tolist(), result.success.tolist()
    pos, ori, iters = result.position_error.tolist(), result.orientation_error.tolist(), result.iterations.tolist()
    gradients = iter(prediction.gradient.tolist())
    return [
        IKSolution.model_construct(
            q=q[i],
            success=success[i],
            position_error=pos[i],
            orientation_error=ori[i],
            iterations=iters[i],
            gradient=next(gradients) if asked else None,
        )
        for i, asked in enumerate(prediction.asked.tolist())
    ]


def poses(pose_rows: Tensor) -> list[Pose]:
    """:class:`Pose` models of (n, 7) poses ``[x, y, z, qx, qy, qz, qw]``."""
    return [Pose.model_construct(position=p[:3], orientation=p[3:]) for p in pose_rows.tolist()]


def robot_info(robot: Robot) -> RobotInfo:
    """The public description of a robot."""
    return RobotInfo(
        name=robot.name,
        dof=robot.dof,
        joint_names=list(robot.joint_names),
        lower=robot.lower.tolist(),
        upper=robot.upper.tolist(),
        ee_frame=robot.ee_frame,
    )
