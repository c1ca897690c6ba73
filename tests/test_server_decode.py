"""Stage decode alone: requests -> CPU tensors in the robot's dtype, options over the server defaults, robot checks
(frames, weights, configurations of nq values)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, SolveOptions
from ik_layer.model.lie import matrix_to_pose
from ik_layer.server.decode import IKJob, fk_configurations, frame_keys, frames_of, ik_job, parse
from ik_layer.server.errors import error_response
from ik_layer.server.exceptions import FieldError, TooManyRows
from ik_layer.server.schemas import FKRequest, IKRequest
from ik_layer.server.settings import Settings

SETTINGS = Settings(robots=["planar3"], max_targets=2, num_seeds=3, max_iterations=50)


@pytest.fixture(scope="module")
def planar3() -> ik_layer.Robot:
    return ik_layer.load_robot("planar3", dtype=torch.float32)


def ik_request(**fields: object) -> IKRequest:
    targets = [
        {"position": [0.5, 0.25, 0.0], "orientation": [0.0, 0.0, 0.0, 1.005]},
        {"position": [0.1, -0.2, 0.0], "orientation": [0.0, 0.0, 0.71, 0.71]},  # to two decimals: norm 1.0041
    ]
    return IKRequest.model_validate({"targets": targets, **fields})


def test_ik_job_holds_the_targets_with_normalised_quaternions(planar3: ik_layer.Robot) -> None:
    job = ik_job(planar3, ik_request(), SETTINGS)
    half = math.sqrt(0.5)
    expected = torch.tensor([[0.5, 0.25, 0.0, 0.0, 0.0, 0.0, 1.0], [0.1, -0.2, 0.0, 0.0, 0.0, half, half]])
    torch.testing.assert_close(torch.from_numpy(job.targets), expected)
    assert job.targets.dtype == np.float32
    assert job.rows == 2 and job.warm_start is None and job.gradient is False


def test_ik_job_options_are_the_server_defaults_with_the_request_changes(planar3: ik_layer.Robot) -> None:
    assert ik_job(planar3, ik_request(), SETTINGS).options == SolveOptions(num_seeds=3, max_iterations=50)
    job = ik_job(planar3, ik_request(max_iterations=0, position_tolerance=1, check_every=2), SETTINGS)
    assert job.options == SolveOptions(num_seeds=3, max_iterations=0, position_tolerance=1.0, check_every=2)
    assert hash(job.options) == hash(SolveOptions(num_seeds=3, max_iterations=0, position_tolerance=1.0, check_every=2))


def test_ik_job_warm_starts_and_gradient_flag(planar3: ik_layer.Robot) -> None:
    job = ik_job(planar3, ik_request(warm_start=[[0.1, 0.2, 0.3], [-0.1, 0.0, 1.5]], return_gradient=True), SETTINGS)
    assert job.warm_start is not None and job.gradient is True
    torch.testing.assert_close(job.warm_start, torch.tensor([[0.1, 0.2, 0.3], [-0.1, 0.0, 1.5]]))


def test_warm_start_rows_must_have_one_value_per_joint(planar3: ik_layer.Robot) -> None:
    with pytest.raises(FieldError, match=r"warm_start\[1\] has 2 values but planar3 has 3 joints") as caught:
        ik_job(planar3, ik_request(warm_start=[[0.1, 0.2, 0.3], [0.0, 0.0]]), SETTINGS)
    assert caught.value.loc == ("body", "warm_start", 1)


def test_too_many_targets_or_configurations(planar3: ik_layer.Robot) -> None:
    request = IKRequest.model_validate({"targets": ik_request().model_dump()["targets"] * 2})
    with pytest.raises(TooManyRows, match="targets has 4 entries; this server takes at most 2"):
        ik_job(planar3, request, SETTINGS)
    with pytest.raises(TooManyRows, match="q has 3 entries"):
        fk_configurations(planar3, FKRequest(q=[[0.0, 0.0, 0.0]] * 3), SETTINGS)


def test_fk_configurations(planar3: ik_layer.Robot) -> None:
    q = fk_configurations(planar3, FKRequest(q=[[0.0, 0.5, -1.0], [1.0, 2.0, 3.0]]), SETTINGS)
    torch.testing.assert_close(q, torch.tensor([[0.0, 0.5, -1.0], [1.0, 2.0, 3.0]]))
    assert q.dtype == torch.float32
    with pytest.raises(FieldError) as caught:
        fk_configurations(planar3, FKRequest(q=[[0.0, 0.5, -1.0], [1.0]]), SETTINGS)
    assert caught.value.loc == ("body", "q", 1)


# --------------------------------------------------------------------------- several end-effector frames, floating base

SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
SOLO_SETTINGS = Settings(robots=["planar3"], max_targets=4)


@pytest.fixture(scope="module")
def solo(erd_urdf) -> ik_layer.Robot:
    """solo12's four feet on a floating base: q = [base pose (7), 12 joints], targets (n, 4, 7)."""
    return ik_layer.load_robot(erd_urdf(SOLO), ee_frames=FEET, floating_base=True)


def feet_targets(robot: ik_layer.Robot, n: int, seed: int = 0) -> tuple[torch.Tensor, list[dict[str, object]]]:
    """``n`` random configurations and their feet as JSON targets, each an object frame -> pose."""
    q = robot.random_q((n,), generator=torch.Generator().manual_seed(seed))
    poses = matrix_to_pose(robot.fk(q)).tolist()
    return q, [{f: {"position": p[k][:3], "orientation": p[k][3:]} for k, f in enumerate(FEET)} for p in poses]


def decode(robot: ik_layer.Robot, body: dict[str, object]) -> IKJob:
    """``body`` as the route decodes it: JSON bytes -> model -> job."""
    return ik_job(robot, parse(IKRequest, json.dumps(body).encode()), SOLO_SETTINGS)


def test_multi_frame_targets_are_n_f_7_in_the_robots_frame_order(solo: ik_layer.Robot) -> None:
    q, targets = feet_targets(solo, 3)
    shuffled = [dict(reversed(list(t.items()))) for t in targets]  # JSON key order does not matter
    shuffled[0]["HR_FOOT"] = {**shuffled[0]["HR_FOOT"], "orientation": [0.0, 0.0, 0.0, 0.995]}  # normalised
    job = decode(solo, {"targets": shuffled, "warm_start": q.tolist()})
    want = matrix_to_pose(solo.fk(q))
    want[0, 3, 3:] = torch.tensor([0.0, 0.0, 0.0, 1.0])
    for row in want:  # every quaternion is normalised, in Python floats
        for pose in row:
            pose[3:] /= math.sqrt(sum(x * x for x in pose[3:].tolist()))
    assert job.targets.shape == (3, 4, 7) and job.rows == 3 and job.frames == 4
    torch.testing.assert_close(torch.from_numpy(job.targets), want, rtol=0, atol=0)
    assert job.warm_start is not None and job.warm_start.shape == (3, solo.nq) == (3, 19)
    torch.testing.assert_close(job.warm_start, q, rtol=0, atol=0)
    assert job.weights is None


def test_weights_for_every_frame_or_per_frame_with_ones_for_the_rest(solo: ik_layer.Robot) -> None:
    _, targets = feet_targets(solo, 1)
    job = decode(solo, {"targets": targets, "weights": [1, 1, 1, 0, 0, 0]})
    assert job.weights is not None
    torch.testing.assert_close(job.weights, torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64))
    job = decode(solo, {"targets": targets, "weights": {"HL_FOOT": [1, 1, 1, 0, 0, 0], "FR_FOOT": [2, 2, 2, 1, 1, 1]}})
    want = torch.ones(4, 6, dtype=torch.float64)
    want[2, 3:] = 0
    want[1, :3] = 2
    assert job.weights is not None
    torch.testing.assert_close(job.weights, want, rtol=0, atol=0)


def test_a_one_frame_robot_takes_a_pose_or_an_object_with_its_frame(planar3: ik_layer.Robot) -> None:
    pose = {"position": [0.5, 0.25, 0.0], "orientation": [0.0, 0.0, 0.0, 1.0]}
    body = {"targets": [pose, {"tip": pose}], "weights": {"tip": [1, 1, 1, 0, 0, 1]}}
    job = ik_job(planar3, parse(IKRequest, json.dumps(body).encode()), SETTINGS)
    assert job.targets.shape == (2, 7) and np.array_equal(job.targets[0], job.targets[1])
    assert job.weights is not None and job.weights.tolist() == [1, 1, 1, 0, 0, 1]
    assert frame_keys(planar3) is None and frames_of(planar3) == ("tip",)


def test_frame_keys_are_the_ee_frames_of_robots_with_several(solo: ik_layer.Robot, erd_urdf) -> None:
    assert frame_keys(solo) == tuple(FEET) and frames_of(solo) == tuple(FEET)
    listed = ik_layer.load_robot(erd_urdf(SOLO), ee_frames=["FL_FOOT"])  # one frame, however loaded: plain poses
    assert frame_keys(listed) is None and frames_of(listed) == ("FL_FOOT",)
    pose = {"position": [0.1, 0.1, -0.2], "orientation": [0.0, 0.0, 0.0, 1.0]}
    job = ik_job(listed, IKRequest.model_validate({"targets": [pose]}), SOLO_SETTINGS)
    assert job.targets.shape == (1, 1, 7)  # the library's (n, F, 7) for a robot loaded with ee_frames


def bad_feet(solo_targets: list[dict[str, object]]) -> list[tuple[str, dict[str, object], tuple, str]]:
    """(case, body, loc, message fragment): each refused with a 422 naming the field (and the frames)."""
    target = solo_targets[0]
    pose = target["FL_FOOT"]
    fewer = {k: v for k, v in target.items() if k != "HR_FOOT"}
    warm = [0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0] + [0.0] * 12
    return [
        ("missing frame", {"targets": [target, fewer]}, ("body", "targets", 1), "no pose for 'HR_FOOT'"),
        ("unknown frame", {"targets": [{**target, "nose": pose}]}, ("body", "targets", 0), "unknown frame(s) 'nose'"),
        (
            "unknown and missing",
            {"targets": [{**fewer, "HR_F00T": pose}]},
            ("body", "targets", 0),
            "unknown frame(s) 'HR_F00T' and no pose for 'HR_FOOT'",
        ),
        ("a plain pose", {"targets": [pose]}, ("body", "targets", 0), "one pose but solo has 4 end-effector frames"),
        ("empty object", {"targets": [{}]}, ("body", "targets", 0), "no pose for 'FL_FOOT', 'FR_FOOT'"),
        (
            "zero quaternion of a frame",
            {"targets": [{**target, "FR_FOOT": {"position": [0, 0, 0], "orientation": [0, 0, 0, 0]}}]},
            ("body", "targets", 0, "FR_FOOT", "orientation"),
            "norm 0",
        ),
        (
            "short position of a frame",
            {"targets": [{**target, "FR_FOOT": {"position": [0, 0], "orientation": [0, 0, 0, 1]}}]},
            ("body", "targets", 0, "FR_FOOT", "position"),
            "at least 3",
        ),
        (
            "far from a unit quaternion",
            {"targets": [{**target, "FR_FOOT": {"position": [0, 0, 0], "orientation": [0, 0, 0, 1.02]}}]},
            ("body", "targets", 0, "FR_FOOT", "orientation"),
            "orientation has norm 1.02; a quaternion (x, y, z, w) must have norm 1 to within 0.01",
        ),
        (
            "a frame that is not a pose",
            {"targets": [{**target, "FR_FOOT": "FR"}]},
            ("body", "targets", 0, "FR_FOOT"),
            "object",
        ),
        (
            "a frame of 6 numbers",
            {"targets": [{**target, "FR_FOOT": [0, 0, 0, 0, 0, 1]}]},
            ("body", "targets", 0, "FR_FOOT"),
            "at least 7",
        ),
        (
            "a 7-vector of a frame with a zero quaternion",
            {"targets": [{**target, "FR_FOOT": [0, 0, 0, 0, 0, 0, 0]}]},
            ("body", "targets", 0, "FR_FOOT"),
            "the quaternion (entries 3:7) has norm 0",
        ),
        (
            "a 4x4 of a frame that is not rigid",
            {"targets": [{**target, "FR_FOOT": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1.1, 0], [0, 0, 0, 1]]}]},
            ("body", "targets", 0, "FR_FOOT"),
            "transform rotation blocks must be orthonormal with determinant +1",
        ),
        (
            "a mirror 4x4",
            {"targets": [{**target, "FR_FOOT": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, -1, 0], [0, 0, 0, 1]]}]},
            ("body", "targets", 0, "FR_FOOT"),
            "determinant +1",
        ),
        (
            "a 4x4 with a bad bottom row",
            {"targets": [{**target, "FR_FOOT": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]}]},
            ("body", "targets", 0, "FR_FOOT"),
            "bottom rows must be [0, 0, 0, 1]",
        ),
        (
            "a 3x4 of a frame",
            {"targets": [{**target, "FR_FOOT": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]}]},
            ("body", "targets", 0, "FR_FOOT"),
            "at least 4",
        ),
        (
            "posture of dof values",
            {"targets": [target], "posture": warm[1:]},
            ("body", "posture"),
            "posture has 18 values but solo has 19 values (7 base + 12 joints)",
        ),
        (
            "one posture row of a wrong length",
            {"targets": [target, target], "posture": [warm, warm[1:]]},
            ("body", "posture", 1),
            "posture[1] has 18 values",
        ),
        (
            "postures for fewer targets",
            {"targets": [target, target], "posture": [warm]},
            ("body",),
            "posture has 1 rows but there are 2 targets",
        ),
        (
            "posture with a zero base quaternion",
            {"targets": [target], "posture": warm[:3] + [0.0] * 4 + warm[7:]},
            ("body", "posture"),
            "zero base quaternion",
        ),
        ("posture as text", {"targets": [target], "posture": "standing"}, ("body", "posture"), "valid array"),
        (
            "weights of an unknown frame",
            {"targets": [target], "weights": {"nose": [1] * 6}},
            ("body", "weights"),
            "nose",
        ),
        ("5 weights", {"targets": [target], "weights": [1, 1, 1, 0, 0]}, ("body", "weights"), "at least 6"),
        (
            "5 weights of a frame",
            {"targets": [target], "weights": {"FL_FOOT": [1, 1, 1, 0, 0]}},
            ("body", "weights", "FL_FOOT"),
            "at least 6",
        ),
        (
            "negative weight",
            {"targets": [target], "weights": [1, 1, 1, 0, 0, -1]},
            ("body", "weights", 5),
            "greater than or equal to 0",
        ),
        (
            "all-zero weights of a frame",
            {"targets": [target], "weights": {"HL_FOOT": [0] * 6}},
            ("body", "weights", "HL_FOOT"),
            "at least one non-zero",
        ),
        ("weights as text", {"targets": [target], "weights": "position"}, ("body", "weights"), "valid array"),
        ("NaN weight", {"targets": [target], "weights": [1, 1, "NaN", 0, 0, 0]}, ("body", "weights", 2), "number"),
        (
            "warm start of dof values",
            {"targets": [target], "warm_start": [warm[1:]]},
            ("body", "warm_start", 0),
            "has 18 values but solo has 19 values (7 base + 12 joints)",
        ),
        (
            "warm start with a zero base quaternion",
            {"targets": [target], "warm_start": [warm[:3] + [0.0] * 4 + warm[7:]]},
            ("body", "warm_start", 0),
            "zero base quaternion",
        ),
        ("too many targets", {"targets": [target] * 5}, None, "targets has 5 entries"),
    ]


def test_bad_multi_frame_bodies_are_422_naming_the_field(solo: ik_layer.Robot) -> None:
    _, targets = feet_targets(solo, 1)
    for case, body, loc, fragment in bad_feet(targets):
        with pytest.raises(IKLayerError) as caught:
            decode(solo, body)
        response = error_response(caught.value, ["solo"], 1)
        answer = json.loads(response.body)
        if loc is None:
            assert response.status_code == 413 and fragment in answer["detail"], case
            continue
        assert response.status_code == 422, case
        assert [tuple(e["loc"]) for e in answer["detail"]] == [loc], (case, answer)
        assert fragment in answer["detail"][0]["msg"], (case, answer)


def test_fk_configurations_have_nq_values_and_a_non_zero_base_quaternion(solo: ik_layer.Robot) -> None:
    q = solo.random_q((2,), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(fk_configurations(solo, FKRequest(q=q.tolist()), SOLO_SETTINGS), q, rtol=0, atol=0)
    with pytest.raises(FieldError, match=r"q\[1\] has 12 values but solo has 19 values") as caught:
        fk_configurations(solo, FKRequest(q=[q[0].tolist(), q[1, 7:].tolist()]), SOLO_SETTINGS)
    assert caught.value.loc == ("body", "q", 1)
    zero = q.clone()
    zero[0, 3:7] = 0
    with pytest.raises(FieldError, match=r"q\[0\] has a zero base quaternion") as caught:
        fk_configurations(solo, FKRequest(q=zero.tolist()), SOLO_SETTINGS)
    assert caught.value.loc == ("body", "q", 0)


def test_a_target_is_a_pose_object_a_7_vector_or_a_4x4_matrix_alike(solo: ik_layer.Robot) -> None:
    q, objects = feet_targets(solo, 2, seed=3)
    poses = matrix_to_pose(solo.fk(q))  # (2, 4, 7)
    vectors = [dict(zip(FEET, row, strict=True)) for row in poses.tolist()]
    matrices = [dict(zip(FEET, row, strict=True)) for row in solo.fk(q).tolist()]
    mixed = [{**vectors[0], "FL_FOOT": objects[0]["FL_FOOT"], "HR_FOOT": matrices[0]["HR_FOOT"]}, matrices[1]]
    for targets in (objects, vectors, matrices, mixed):
        job = decode(solo, {"targets": targets})
        assert job.targets.shape == (2, 4, 7)  # a 4x4 goes by its quaternion:
        torch.testing.assert_close(torch.from_numpy(job.targets), poses, rtol=0, atol=1e-15)


def test_posture_is_one_configuration_for_every_target_or_one_per_target(solo: ik_layer.Robot) -> None:
    q, targets = feet_targets(solo, 3, seed=4)
    job = decode(solo, {"targets": targets, "posture": q[0].tolist()})
    assert job.posture is not None and job.posture.shape == (3, 19)
    torch.testing.assert_close(job.posture, q[0].expand(3, 19), rtol=0, atol=0)
    job = decode(solo, {"targets": targets, "posture": q.tolist()})
    assert job.posture is not None
    torch.testing.assert_close(job.posture, q, rtol=0, atol=0)
    assert decode(solo, {"targets": targets}).posture is None
