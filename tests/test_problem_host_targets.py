"""Host targets: :meth:`Problem.of_host_targets` takes the server's poses as a numpy array, one pose checked and
made a transform in plain floats, and must give what the same poses as a tensor give (values, checks and refusals); the
engine's :meth:`~ik_layer.engine.Engine.solve_arrays` must answer what :meth:`~ik_layer.engine.Engine.solve` does."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, Problem, ShapeError
from ik_layer.engine import Engine
from ik_layer.model.lie import matrix_to_pose


@pytest.fixture(scope="module", params=[torch.float64, torch.float32], ids=["float64", "float32"])
def robot(request: pytest.FixtureRequest) -> ik_layer.Robot:
    return ik_layer.load_robot("ur5e").to(request.param)


def host_poses(robot: ik_layer.Robot, n: int, seed: int = 0) -> np.ndarray:
    q = robot.random_q((n,), generator=torch.Generator().manual_seed(seed))
    return matrix_to_pose(robot.fk(q)).numpy()


def assert_same_problem(robot: ik_layer.Robot, host: Problem[torch.Tensor | np.ndarray], want: Problem) -> None:
    """``host`` holds ``want``'s values, bit for bit, as does the tensor problem made of it."""
    got = host.on_device(robot)
    assert got.batch == want.batch == host.batch and got.rows == want.rows == host.rows
    assert isinstance(got.target, torch.Tensor) and isinstance(got.weights, torch.Tensor)
    assert got.target.dtype == want.target.dtype and got.target.shape == want.target.shape
    assert torch.equal(got.target, want.target)  # bit for bit
    assert torch.equal(got.weights, want.weights) and got.weights.dtype == want.weights.dtype


@pytest.mark.parametrize("shape", [(7,), (1, 7), (1, 1, 7), (3, 7), (2, 2, 7)])
def test_host_poses_give_the_problem_of_the_same_tensor(robot, shape):
    poses = host_poses(robot, math.prod(shape[:-1]), seed=len(shape)).reshape(shape)
    got = Problem.of_host_targets(robot, poses)
    assert_same_problem(robot, got, Problem.of_targets(robot, torch.from_numpy(poses.copy())))
    weights = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 2.0], dtype=robot.dtype)
    got = Problem.of_host_targets(robot, poses, weights)
    assert_same_problem(robot, got, Problem.of_targets(robot, torch.from_numpy(poses.copy()), weights))


def test_one_host_pose_stays_a_host_array_and_more_become_tensors(robot):
    one = Problem.of_host_targets(robot, host_poses(robot, 1))
    assert isinstance(one.target, np.ndarray) and isinstance(one.weights, np.ndarray)
    assert one.target.shape == (1, 4, 4) and one.weights.shape == (1, 6)
    weighted = Problem.of_host_targets(robot, host_poses(robot, 1), torch.ones(6, dtype=robot.dtype))
    assert isinstance(weighted.target, np.ndarray) and isinstance(weighted.weights, torch.Tensor)
    assert weighted.on_device(robot).target.device == robot.device
    several = Problem.of_host_targets(robot, host_poses(robot, 3))
    assert isinstance(several.target, torch.Tensor) and several.on_device(robot) is several
    with pytest.raises(ShapeError, match=r"target must be a torch\.Tensor"):  # the library takes tensors
        Problem.prepare(robot, host_poses(robot, 1))


def test_a_host_pose_is_normalised_as_a_tensor_one_is(robot):
    pose = host_poses(robot, 1)
    pose[0, 3:] *= 1 + 1e-7  # within the quaternion norm tolerance: normalised
    got, want = Problem.of_host_targets(robot, pose), Problem.of_targets(robot, torch.from_numpy(pose.copy()))
    assert_same_problem(robot, got, want)
    rotation = got.on_device(robot).target[0, :3, :3].double()
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(3, dtype=torch.float64), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.__setitem__((0, slice(3, 7)), 0.0),  # zero quaternion
        lambda p: p.__setitem__((0, 0), np.nan),
        lambda p: p.__setitem__((0, 2), np.inf),
        lambda p: p.__setitem__((0, 6), 3.0),  # far from a unit quaternion
        lambda p: p.__setitem__((0, 0), 2e6),  # beyond MAX_TARGET_DISTANCE
    ],
    ids=["zero-quaternion", "nan", "inf", "not-unit", "far"],
)
def test_a_bad_host_pose_is_refused_as_the_same_tensor(robot, change):
    pose = host_poses(robot, 1)
    change(pose)
    with pytest.raises(IKLayerError) as want:
        Problem.of_targets(robot, torch.from_numpy(pose.copy()))
    with pytest.raises(IKLayerError) as got:
        Problem.of_host_targets(robot, pose)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
    assert "target" in str(got.value)


def test_host_poses_of_another_dtype_or_shape_are_refused_naming_target(robot):
    pose = host_poses(robot, 1)
    other = np.float32 if robot.dtype == torch.float64 else np.float64
    for bad in (pose.astype(other), pose[:, :6]):
        with pytest.raises(IKLayerError, match="target"):
            Problem.of_host_targets(robot, bad)


@pytest.mark.parametrize("store", ["host", "tensor"])
@pytest.mark.parametrize("rows", [1, 5])
def test_solve_arrays_answers_the_values_of_solve(robot, rows, store):
    host = Problem.of_host_targets(robot, host_poses(robot, rows, seed=7))
    assert isinstance(host.target, np.ndarray) == (rows == 1)
    arrays = Engine(robot, capacity=8, block=8, store=store).solve_arrays(host, seed=3)
    tensors = Engine(robot, capacity=8, block=8, store=store).solve(host.on_device(robot), seed=3)
    assert isinstance(arrays.q, np.ndarray) == (store == "host")  # the host store's answers, as it holds them
    for name in ("q", "success", "position_error", "orientation_error", "iterations", "status"):
        got, want = torch.as_tensor(getattr(arrays, name)), getattr(tensors, name)
        assert isinstance(want, torch.Tensor) and got.dtype == want.dtype
        assert torch.equal(got, want), name
    assert bool(tensors.success.all())
