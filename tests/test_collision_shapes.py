"""Obstacle shapes (ik_layer.collision.shapes): signed distances against coal (hpp-fcl, shipped with Pinocchio) on
the same geometry, separated and penetrating; their gradients against finite differences; bad input refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ik_layer import Box, Capsule, IKLayerError, Sphere
from ik_layer.model.lie import matrix_to_pose, quaternion_to_matrix

coal = pytest.importorskip("coal", reason="coal ships with Pinocchio (pip install pin)")

F64 = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_rotations(n: int, g: torch.Generator) -> torch.Tensor:
    quaternion = torch.randn(n, 4, generator=g, dtype=F64)
    return quaternion_to_matrix(quaternion / quaternion.norm(dim=-1, keepdim=True))


def coal_distance(shape: object, placement: np.ndarray, radius: float, point: np.ndarray) -> float:
    """coal's signed distance between ``shape`` at ``placement`` (4x4) and a ball of ``radius`` at ``point``."""
    request = coal.DistanceRequest()
    request.enable_signed_distance = True
    result = coal.DistanceResult()
    ball = coal.Transform3s(np.eye(3), point)
    at = coal.Transform3s(placement[:3, :3], placement[:3, 3])
    coal.distance(shape, at, coal.Sphere(radius), ball, request, result)
    return float(result.min_distance)


def probe_points(n: int, g: torch.Generator, spread: float) -> torch.Tensor:
    return (torch.rand(n, 3, generator=g, dtype=F64) * 2 - 1) * spread


def test_sphere_distances_match_coal() -> None:
    g = gen(1)
    centers, radii = probe_points(64, g, 0.5), 0.05 + 0.3 * torch.rand(64, generator=g, dtype=F64)
    points, ball = probe_points(64, g, 0.5), 0.02
    ours = Sphere(centers, radii).signed_distance(points) - ball
    for k in range(64):
        placement = np.eye(4)
        placement[:3, 3] = centers[k].numpy()
        expected = coal_distance(coal.Sphere(float(radii[k])), placement, ball, points[k].numpy())
        assert math.isclose(float(ours[k]), expected, abs_tol=1e-9), k
    assert bool((ours < 0).any()) and bool((ours > 0).any())  # both cases compared


def test_box_distances_match_coal() -> None:
    g = gen(2)
    n, ball = 128, 0.02
    pose = torch.eye(4, dtype=F64).repeat(n, 1, 1)
    pose[:, :3, :3] = random_rotations(n, g)
    pose[:, :3, 3] = probe_points(n, g, 0.3)
    size = 0.05 + 0.5 * torch.rand(n, 3, generator=g, dtype=F64)
    points = probe_points(n, g, 0.6)
    ours = Box(pose, size).signed_distance(points) - ball
    for k in range(n):
        expected = coal_distance(coal.Box(*size[k].tolist()), pose[k].numpy(), ball, points[k].numpy())
        # coal's penetration depth for a box comes from EPA: within its tolerance
        assert math.isclose(float(ours[k]), expected, abs_tol=1e-6), (k, float(ours[k]), expected)
    assert bool((ours < 0).any()) and bool((ours > 0).any())
    # a pose given as a 7-vector is the same box
    torch.testing.assert_close(Box(matrix_to_pose(pose), size).signed_distance(points) - ball, ours)


def test_capsule_distances_match_coal() -> None:
    g = gen(3)
    n, ball = 128, 0.02
    a, b = probe_points(n, g, 0.3), probe_points(n, g, 0.3)
    radius = 0.03 + 0.2 * torch.rand(n, generator=g, dtype=F64)
    points = probe_points(n, g, 0.6)
    ours = Capsule(a, b, radius).signed_distance(points) - ball
    for k in range(n):
        axis = (b[k] - a[k]).numpy()
        length = float(np.linalg.norm(axis))
        z = axis / length
        x = np.cross(z, [1.0, 0.0, 0.0] if abs(z[0]) < 0.9 else [0.0, 1.0, 0.0])
        x /= np.linalg.norm(x)
        placement = np.eye(4)
        placement[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)  # coal's capsule lies along its z axis
        placement[:3, 3] = ((a[k] + b[k]) / 2).numpy()
        expected = coal_distance(
            coal.Capsule(float(radius[k]), length), placement, ball, points[k].numpy()
        )  # full length
        assert math.isclose(float(ours[k]), expected, abs_tol=1e-6), (k, float(ours[k]), expected)
    assert bool((ours < 0).any()) and bool((ours > 0).any())


@pytest.mark.parametrize("kind", ["sphere", "box", "capsule"])
def test_gradients_match_finite_differences(kind: str) -> None:
    """The distance's gradient in the points and in the shape's parameters (what the implicit layer will take)."""
    g = gen(4)
    points = probe_points(16, g, 0.6).requires_grad_()
    radius = (0.1 + 0.1 * torch.rand(16, generator=g, dtype=F64)).requires_grad_()

    def shape(r: torch.Tensor) -> Sphere | Box | Capsule:
        if kind == "sphere":
            return Sphere(torch.zeros(3, dtype=F64), r)
        if kind == "box":
            return Box(torch.eye(4, dtype=F64), torch.stack([r, 2 * r, 3 * r], -1))
        return Capsule(torch.tensor([0.0, 0, -0.1], dtype=F64), torch.tensor([0.0, 0, 0.1], dtype=F64), r)

    assert torch.autograd.gradcheck(lambda p, r: shape(r).signed_distance(p), (points, radius))


def test_bad_shapes_are_refused_naming_the_argument() -> None:
    with pytest.raises(IKLayerError, match="radius must be positive"):
        Sphere([0, 0, 0], -0.1)
    with pytest.raises(IKLayerError, match="center must be finite"):
        Sphere([0, float("nan"), 0], 0.1)
    with pytest.raises(IKLayerError, match=r"center must have shape \(\.\.\., 3\)"):
        Sphere([0, 0], 0.1)
    with pytest.raises(IKLayerError, match="size must be positive"):
        Box(torch.eye(4), [0.1, 0.0, 0.1])
    with pytest.raises(IKLayerError, match="pose"):
        Box(2 * torch.eye(4), [0.1, 0.1, 0.1])  # not rigid
    with pytest.raises(IKLayerError, match="radius must be finite"):
        Capsule([0, 0, 0], [0, 0, 1], float("inf"))
    with pytest.raises(IKLayerError, match="a must be numbers"):
        Capsule("here", [0, 0, 1], 0.1)
