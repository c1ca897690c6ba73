"""Stage encode alone: tensors -> response models, gradients only on the rows that asked."""

from __future__ import annotations

import json
import math

import torch

import ik_layer
from ik_layer.server.encode import ik_response, poses, robot_info, solutions
from ik_layer.server.predict import Prediction
from ik_layer.server.schemas import IKResponse, RobotInfo


def assert_is_the_model_json(body: bytes) -> None:
    """``body`` is what the response model (the API's schema) dumps of itself, field for field and in order."""
    model = IKResponse.model_validate_json(body)
    assert list(json.loads(body)) == ["robot", "solutions"]
    assert json.loads(body) == json.loads(model.model_dump_json(exclude_none=True))
    for got, want in zip(json.loads(body)["solutions"], model.model_dump(exclude_none=True)["solutions"], strict=True):
        for solution, expected in zip(*((got, want) if isinstance(got, list) else ([got], [want])), strict=True):
            assert list(solution) == list(expected)  # the model's field order


def test_solutions_carry_every_row_its_status_and_the_gradient_if_asked() -> None:
    status = ["solved", "exhausted", "solved"]
    rows = {
        "q": [[0.5, -1.0], [2.0, 0.25], [0.0, 0.0]],
        "success": [True, False, True],
        "position_error": [1e-5, 0.5, 0.0],
        "orientation_error": [2e-4, 1.0, 0.0],
        "iterations": [3, 40, 0],
        "status": status,
    }
    out = solutions(Prediction(**rows))
    assert [s["q"] for s in out] == [[0.5, -1.0], [2.0, 0.25], [0.0, 0.0]]
    assert [s["success"] for s in out] == [True, False, True]
    assert [s["position_error"] for s in out] == [1e-5, 0.5, 0.0]
    assert [s["orientation_error"] for s in out] == [2e-4, 1.0, 0.0]
    assert [s["iterations"] for s in out] == [3, 40, 0]
    assert [s["status"] for s in out] == status
    body = ik_response("r", Prediction(**rows))
    assert json.loads(body) == {"robot": "r", "solutions": out}
    assert_is_the_model_json(body)
    assert all("gradient" not in s for s in json.loads(body)["solutions"])
    gradient = torch.arange(36, dtype=torch.float64).reshape(3, 2, 6)
    body = ik_response("r", Prediction(**rows, gradient=gradient))
    assert [s["gradient"] for s in json.loads(body)["solutions"]] == gradient.tolist()
    assert_is_the_model_json(body)


def test_poses_split_position_and_quaternion() -> None:
    half = math.sqrt(0.5)
    out = poses(torch.tensor([[1.0, 2.0, 3.0, 0.0, 0.0, half, half], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]))
    assert [p.position for p in out] == [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]
    assert out[0].orientation == torch.tensor([0.0, 0.0, half, half]).tolist()
    assert out[1].orientation == [0.0, 0.0, 0.0, 1.0]


def test_robot_info_describes_the_robot() -> None:
    robot = ik_layer.load_robot("planar3", collision=None)
    assert robot_info(robot, None) == RobotInfo(
        name="planar3",
        nq=3,
        dof=3,
        joint_names=list(robot.joint_names),
        lower=robot.lower.tolist(),
        upper=robot.upper.tolist(),
        ee_frame=robot.ee_frame,
        ee_frames=[robot.ee_frame],
        floating_base=False,
        collision=None,
        collision_spheres=0,
    )
    info = robot_info(robot, None)
    assert info.dof == len(info.joint_names) == len(info.lower)
    spheres = robot_info(ik_layer.load_robot("panda"), "auto")
    assert spheres.collision == "auto" and spheres.collision_spheres > 0


# --------------------------------------------------------------------------- several end-effector frames

TALOS = "talos_data/robots/talos_reduced.urdf"
SOLES = ["left_sole_link", "right_sole_link"]


def test_a_floating_base_robot_lists_its_frames_nq_and_joints_without_the_base(erd_urdf) -> None:
    robot = ik_layer.load_robot(erd_urdf(TALOS), ee_frames=SOLES, floating_base=True, locked={"torso_1_joint": 0.25})
    info = robot_info(robot, "auto")
    assert (info.nq, info.dof, info.floating_base) == (7 + 12, 6 + 12, True)  # the legs move
    assert info.ee_frames == SOLES and info.ee_frame == SOLES[0]
    assert info.joint_names == robot.joint_names and len(info.lower) == len(info.upper) == 12
    assert "root_joint" not in info.locked and not set(info.locked) & set(info.joint_names)
    assert info.locked["torso_1_joint"] == 0.25 and info.locked["arm_left_4_joint"] == 0.0
    assert len(info.locked) == 32 - 12  # every other joint of talos_reduced, at its value


def test_mimic_joints_are_not_listed_as_locked(tmp_path, tiny_urdf) -> None:
    mimic = tiny_urdf.read_text().replace(
        '<joint name="j_neg" type="revolute">', '<joint name="j_neg" type="revolute"><mimic joint="j_cont"/>', 1
    )
    (tmp_path / "mimic.urdf").write_text(mimic)
    robot = ik_layer.load_robot(tmp_path / "mimic.urdf", "tool")
    assert "j_neg" in robot.mimic
    assert set(robot_info(robot, "auto").locked) == {"j_side"}  # off the chain; j_neg follows j_cont


def test_poses_and_gradients_of_several_frames_are_keyed_by_frame() -> None:
    rows = torch.arange(2 * 3 * 7, dtype=torch.float64).reshape(2, 3, 7)
    out = poses(rows, ["a", "b", "c"])
    assert [list(p) for p in out] == [["a", "b", "c"]] * 2
    assert out[1]["b"].position == [28.0, 29.0, 30.0] and out[1]["b"].orientation == [31.0, 32.0, 33.0, 34.0]
    rows = {"q": [[0.0] * 4] * 2, "success": [True] * 2, "position_error": [0.0] * 2, "orientation_error": [0.0] * 2}
    rows |= {"iterations": [0] * 2, "status": ["solved"] * 2}
    gradient = torch.randn(2, 3, 2, 6, dtype=torch.float64)  # (n, dof, F, 6), as ik_layer.target_gradient
    body = json.loads(ik_response("r", Prediction(**rows, gradient=gradient), ["left", "right"]))
    for i, solution in enumerate(body["solutions"]):
        assert list(solution["gradient"]) == ["left", "right"] and len(solution["q"]) == 4
        assert solution["gradient"]["left"] == gradient[i, :, 0].tolist()
        assert solution["gradient"]["right"] == gradient[i, :, 1].tolist()
    one = json.loads(ik_response("r", Prediction(**rows, gradient=gradient[:, :, :1]), None))  # F = 1
    assert [s["gradient"] for s in one["solutions"]] == gradient[:, :, 0].tolist()


def test_distances_pairs_goals_and_lists_of_solutions_are_the_model_json() -> None:
    rows = {"q": [[0.1, 0.2]] * 3, "success": [True, False, True], "position_error": [0.0, 0.5, 1e-9]}
    rows |= {"orientation_error": [0.0, 1.0, 2e-7], "iterations": [1, 2, 3]}
    rows |= {"status": ["solved", "exhausted", "solved"]}
    extra = {"min_distance": [0.25, math.inf, -0.01], "closest_pair": [[0, 2], [-1, -1], [1, -1]], "goal": [0, 2, 1]}
    links = ["upper", "lower"]
    body = ik_response("r", Prediction(**rows, **extra), sphere_links=links)
    assert_is_the_model_json(body)
    first, far, overlapping = json.loads(body)["solutions"]
    assert first["min_distance"] == 0.25 and first["closest"] == {"link": "upper", "sphere": 0, "obstacle": 2}
    assert "min_distance" not in far and "closest" not in far  # +inf: no pair measured (JSON has no infinity)
    assert overlapping["closest"] == {"link": "lower", "sphere": 1, "other_link": "upper", "other_sphere": 0}
    assert [s["goal"] for s in (first, far, overlapping)] == [0, 2, 1]
    listed = ik_response("r", Prediction(**rows, per_target=3))
    assert_is_the_model_json(listed)
    assert json.loads(listed)["solutions"] == [solutions(Prediction(**rows))]
