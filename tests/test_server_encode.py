"""Stage encode alone: tensors -> response models, gradients only on the rows that asked."""

from __future__ import annotations

import json
import math

import torch

import ik_layer
from ik_layer import IKResult
from ik_layer.server.encode import ik_response, poses, robot_info, solutions
from ik_layer.server.predict import Prediction
from ik_layer.server.schemas import IKResponse, RobotInfo


def test_solutions_carry_every_row_its_status_and_the_gradient_if_asked() -> None:
    result = IKResult(
        q=torch.tensor([[0.5, -1.0], [2.0, 0.25], [0.0, 0.0]], dtype=torch.float64),
        success=torch.tensor([True, False, True]),
        position_error=torch.tensor([1e-5, 0.5, 0.0], dtype=torch.float64),
        orientation_error=torch.tensor([2e-4, 1.0, 0.0], dtype=torch.float64),
        iterations=torch.tensor([3, 40, 0]),
    )
    status = ["solved", "exhausted", "solved"]
    out = solutions(Prediction(result=result, status=status, gradient=None))
    assert [s.q for s in out] == [[0.5, -1.0], [2.0, 0.25], [0.0, 0.0]]
    assert [s.success for s in out] == [True, False, True]
    assert [s.position_error for s in out] == [1e-5, 0.5, 0.0]
    assert [s.orientation_error for s in out] == [2e-4, 1.0, 0.0]
    assert [s.iterations for s in out] == [3, 40, 0]
    assert [s.status for s in out] == status
    assert json.loads(ik_response("r", Prediction(result, status, None))) == {
        "robot": "r",
        "solutions": [
            IKResponse(robot="r", solutions=out).model_dump(exclude_none=True)["solutions"][i] for i in (0, 1, 2)
        ],
    }
    assert all("gradient" not in s for s in json.loads(ik_response("r", Prediction(result, status, None)))["solutions"])
    gradient = torch.arange(36, dtype=torch.float64).reshape(3, 2, 6)
    body = json.loads(ik_response("r", Prediction(result, status, gradient)))
    assert [s["gradient"] for s in body["solutions"]] == gradient.tolist()


def test_poses_split_position_and_quaternion() -> None:
    half = math.sqrt(0.5)
    out = poses(torch.tensor([[1.0, 2.0, 3.0, 0.0, 0.0, half, half], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]))
    assert [p.position for p in out] == [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]
    assert out[0].orientation == torch.tensor([0.0, 0.0, half, half]).tolist()
    assert out[1].orientation == [0.0, 0.0, 0.0, 1.0]


def test_robot_info_describes_the_robot() -> None:
    robot = ik_layer.load_robot("planar3")
    assert robot_info(robot) == RobotInfo(
        name="planar3",
        dof=3,
        joint_names=list(robot.joint_names),
        lower=robot.lower.tolist(),
        upper=robot.upper.tolist(),
        ee_frame=robot.ee_frame,
    )
    assert robot_info(robot).dof == len(robot_info(robot).joint_names) == len(robot_info(robot).lower)
