"""``ik_layer.model.host``: the numpy pose checks and conversions agree with the torch ones of
``ik_layer.model.lie``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ik_layer import IKLayerError, NonFiniteError, ShapeError
from ik_layer.model import host
from ik_layer.model.lie import as_transform, matrix_to_pose, pose_to_matrix, so3_exp


def random_transforms(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.eye(4, dtype=torch.float64).repeat(n, 1, 1)
    t[:, :3, :3] = so3_exp(torch.randn(n, 3, generator=g, dtype=torch.float64) * 2)
    t[:, :3, 3] = torch.randn(n, 3, generator=g, dtype=torch.float64)
    return t


def test_matrix_to_pose_equals_the_torch_one_near_every_pivot():
    t = random_transforms(200, seed=0)
    half_turns = torch.eye(4, dtype=torch.float64).repeat(4, 1, 1)
    half_turns[1:, :3, :3] = so3_exp(torch.eye(3, dtype=torch.float64) * torch.pi)  # x, y and z pivots
    t = torch.cat((t, half_turns))
    np.testing.assert_allclose(host.matrix_to_pose(t.numpy()), matrix_to_pose(t).numpy(), rtol=0, atol=1e-12)


def test_pose_to_matrix_equals_the_torch_one_and_inverts_matrix_to_pose():
    g = torch.Generator().manual_seed(1)
    poses = torch.randn(5, 3, 7, generator=g, dtype=torch.float64) * 3  # any non-zero quaternion, normalised
    np.testing.assert_allclose(host.pose_to_matrix(poses.numpy()), pose_to_matrix(poses).numpy(), rtol=0, atol=1e-12)
    t = random_transforms(50, seed=2).numpy()
    np.testing.assert_allclose(host.pose_to_matrix(host.matrix_to_pose(t)), t, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (np.zeros((2, 6)), ShapeError, r"shape \(\.\.\., 7\) or \(\.\.\., 4, 4\)"),
        (np.array([0.0, 0, 0, 0, 0, 0, 0]), IKLayerError, "norm 0; a quaternion"),
        (np.array([0.0, 0, 0, 0, 0, 0, 5]), IKLayerError, "norm 5; a quaternion"),
        (np.array([0.0, 0, np.nan, 0, 0, 0, 1]), NonFiniteError, "NaN"),
        (np.diag([1.0, 1.0, -1.0, 1.0]), IKLayerError, "determinant"),
        (np.diag([1.0, 1.0, 1.0, 2.0]), IKLayerError, "bottom rows"),
        (np.diag([1.0, 1.0, 1.001, 1.0]), IKLayerError, "orthonormal"),
    ],
)
def test_as_checked_refuses_what_as_transform_refuses(value, error, message):
    with pytest.raises(error, match=message):
        host.as_checked(value, "target")
    with pytest.raises(error, match=message):
        as_transform(torch.from_numpy(value), "target")


def test_as_checked_keeps_valid_inputs_and_check_rigid_takes_tensors():
    t = random_transforms(3, seed=3)
    assert host.as_checked(t.numpy(), "t") is not None and host.as_checked(
        np.array([1.0, 2, 3, 0, 0, 0, 1.005]), "p"
    ).shape == (7,)
    host.check_rigid(t, "t")  # tensors too (as_transform's path for large or GPU inputs)
    t[1, 0, 0] += 1e-3
    with pytest.raises(IKLayerError, match="orthonormal"):
        host.check_rigid(t, "t")
    host.check_rigid(t.float()[:1], "t")  # float32: tolerance 1e-3
    moved = random_transforms(2, seed=4)
    moved[1, 3, 2] = 2e-6
    before = moved.clone()
    with pytest.raises(IKLayerError, match="bottom rows"):
        host.check_rigid(moved, "t")
    host.check_rigid(moved.float(), "t")
    assert torch.equal(moved, before)  # the checks change copies only


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_check_rigid_takes_one_transform_as_it_takes_a_stack(dtype):
    """One transform is accepted in plain floats (:func:`host.is_one_rigid`, which also wants finite entries); a
    stack of two goes through the arrays' checks: they agree on transforms perturbed about the tolerance (entries,
    bottom row, a reflection, NaN and infinities)."""
    rng = np.random.default_rng(5)
    tol = 1e-6 if dtype == np.float64 else 1e-3
    base = random_transforms(200, seed=6).numpy()
    kinds = 0
    for k, t in enumerate(base):
        t = t.copy()
        row, col = rng.integers(0, 4, 2)
        t[row, col] += rng.choice([0.0, 0.3, 0.6, 1.2, 3.0]) * tol * rng.choice([-1, 1])
        if k % 17 == 0:
            t[:3, 0] *= -1  # a reflection
        if k % 23 == 0:
            t[row, col] = rng.choice([np.nan, np.inf, -np.inf])
        t = t.astype(dtype)

        def refusal(x):
            try:
                with np.errstate(invalid="ignore", over="ignore"):  # (the arrays' sums of NaN)
                    host.check_rigid(x, "t")
            except IKLayerError as err:
                return str(err)
            return None

        one, stacked = refusal(t), refusal(np.stack((t, t)))
        assert one == stacked, (k, t)
        assert host.is_one_rigid(t) == (one is None and bool(np.isfinite(t).all())), (k, t)
        kinds += one is None
    assert 0 < kinds < len(base)  # both outcomes occur


def test_one_pose_takes_the_arrays_arithmetic_in_plain_floats():
    """One float64 pose converts in plain floats, a stack of two in arrays: the same matrices, bit for bit, at every
    scale (huge and tiny quaternions too); :func:`host.is_one_unit_pose` accepts only what ``as_transform`` takes."""
    rng = np.random.default_rng(7)
    accepted = 0
    for k in range(2000):
        pose = rng.standard_normal(7) * 10.0 ** rng.integers(-150, 150)
        if k % 2:
            pose[3:] = pose[3:] / np.linalg.norm(pose[3:]) * (1 + rng.uniform(-0.012, 0.012))  # about the tolerance
        one, both = _converted(pose), _converted(np.stack((pose, pose)))
        assert one == both if isinstance(one, str) else np.array_equal(one, both[0]), (k, pose)
        if host.is_one_unit_pose(pose):
            accepted += 1
            as_transform(torch.from_numpy(np.stack((pose, pose))))  # the arrays' checks take it
    assert 0 < accepted < 1000 and sum(isinstance(_converted(p), str) for p in (np.zeros(7), np.ones(7) * 1e-300)) == 2
    for bad in (np.nan, np.inf):
        pose = np.array([0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 1.0])
        pose[rng.integers(0, 7)] = bad
        assert not host.is_one_unit_pose(pose)


def _converted(pose):
    """``host.pose_to_matrix(pose)``, or the message of its refusal."""
    try:
        return host.pose_to_matrix(pose)
    except IKLayerError as err:
        return str(err)
