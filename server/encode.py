"""Stage 4, encode: tensors -> response models (solutions, poses, robot descriptions)."""

from __future__ import annotations

import math

from torch import Tensor

from ik_layer import Robot
from ik_layer.server.predict import Prediction
from ik_layer.server.schemas import IKResponse, IKSolution, Pose, RobotInfo

__all__ = ["ik_response", "poses", "robot_info", "solutions"]


def solutions(prediction: Prediction) -> list[IKSolution]:
    """One solution per row of ``prediction``, with its gradient if the request asked for it."""
    result = prediction.result
    q, success = result.q.tolist(), result.success.tolist()
    pos, ori, iters = result.position_error.tolist(), result.orientation_error.tolist(), result.iterations.tolist()
    gradients = [None] * len(q) if prediction.gradient is None else prediction.gradient.tolist()
    return [
        IKSolution.model_construct(
            q=q[i],
            success=success[i],
            position_error=pos[i],
            orientation_error=ori[i],
            iterations=iters[i],
            status=prediction.status[i],
            gradient=gradients[i],
        )
        for i in range(len(q))
    ]


def ik_response(robot: str, prediction: Prediction) -> bytes:
    """The JSON body answering an IK request of ``robot`` (``gradient`` left out unless asked)."""
    response = IKResponse.model_construct(robot=robot, solutions=solutions(prediction))
    return response.model_dump_json(exclude_none=True).encode()


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
        locked=_locked(robot),
    )


def _locked(robot: Robot) -> dict[str, float]:
    """The one-coordinate joints of the full model that are not the robot's, at the values they are held at."""
    model = robot.full_model
    full_q = robot.to_full_pinocchio_q(robot.lower.new_zeros(robot.dof)).tolist()
    held: dict[str, float] = {}
    for joint, name in zip(model.joints[1:], model.names[1:], strict=True):
        if name in robot.joint_names:
            continue
        if joint.nq == 1:
            held[name] = full_q[joint.idx_q]
        elif joint.nq == 2 and joint.nv == 1:  # continuous: (cos, sin)
            held[name] = math.atan2(full_q[joint.idx_q + 1], full_q[joint.idx_q])
    return held
