"""Collision-aware IK (ik_layer.collision.cost, ik_layer.solve(obstacles=..., self_collision=1)): distances against
coal on the same spheres, the term's gradient against finite differences, and solves (on the engine and on the
reference path) whose every collision-free success coal confirms, on the spheres and on the published geometry they
cover; colliding answers never solved."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import Box, Capsule, IKLayerError, Sphere
from ik_layer.collision.cost import CollisionCost
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.testing import example_robot_data_dir

coal = pytest.importorskip("coal", reason="coal ships with Pinocchio (pip install pin)")

F64 = torch.float64
ERD = example_robot_data_dir()
TABLE = Box([0.6, 0.0, -0.09, 0, 0, 0, 1], [0.8, 1.0, 0.1])  # its top 4 cm below the base: clear of panda_link0
SCENE = [TABLE, Sphere([0.35, 0.3, 0.45], 0.1), Capsule([0.5, -0.4, 0.1], [0.5, -0.4, 0.7], 0.05)]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def coal_obstacles(obstacles: list[ik_layer.Sphere | ik_layer.Box | ik_layer.Capsule]) -> list[tuple[object, object]]:
    """The obstacles as coal shapes and placements, a batched shape giving one each."""
    placed = []
    for shape in obstacles:
        if isinstance(shape, Sphere):
            centres, radii = torch.broadcast_tensors(shape.center, shape.radius[..., None])
            for centre, radius in zip(centres.reshape(-1, 3), radii[..., 0].reshape(-1), strict=True):
                placed.append((coal.Sphere(float(radius)), coal.Transform3s(np.eye(3), centre.numpy())))
        elif isinstance(shape, Box):
            pose = shape.pose.numpy()
            placed.append((coal.Box(*shape.size.tolist()), coal.Transform3s(pose[:3, :3], pose[:3, 3])))
        else:
            a, b = shape.a.numpy(), shape.b.numpy()
            axis = (b - a) / np.linalg.norm(b - a)
            rotation = pin.Quaternion.FromTwoVectors(np.array([0.0, 0, 1]), axis).matrix()
            capsule = coal.Capsule(float(shape.radius), float(np.linalg.norm(b - a)))
            placed.append((capsule, coal.Transform3s(rotation, (a + b) / 2)))
    return placed


def coal_distance(shape_a: object, at_a: object, shape_b: object, at_b: object) -> float:
    request, result = coal.DistanceRequest(), coal.DistanceResult()
    request.enable_signed_distance = True
    coal.distance(shape_a, at_a, shape_b, at_b, request, result)
    return float(result.min_distance)


def coal_min_distance(robot: ik_layer.Robot, q: torch.Tensor, obstacles: list, self_collision: bool) -> float:
    """coal's least distance between the robot's spheres at ``q`` (nq,) (placed by Pinocchio) and the obstacles,
    and between the spheres of each self-collision pair if asked."""
    spheres = robot.collision
    assert spheres is not None
    model, data = robot.model, robot.model.createData()
    pin.framesForwardKinematics(model, data, robot.to_pinocchio_q(q).numpy())
    balls = []
    for k, link in enumerate(spheres.sphere_links):
        centre = data.oMf[model.getFrameId(link)].act(spheres.centers[k].numpy())
        balls.append((coal.Sphere(float(spheres.radii[k])), coal.Transform3s(np.eye(3), centre)))
    least = np.inf
    for ball in balls:
        for obstacle in coal_obstacles(obstacles):
            least = min(least, coal_distance(*ball, *obstacle))
    if self_collision:
        for i, j in spheres.pairs.tolist():
            least = min(least, coal_distance(*balls[i], *balls[j]))
    return least


def test_distances_match_coal() -> None:
    robot = ik_layer.load_robot("panda")
    cost = CollisionCost.of(robot, SCENE, SolveOptions(self_collision=1))
    assert cost is not None
    q = robot.random_q(12, generator=gen(1))
    ours = cost.min_distance(robot, q)
    expected = torch.tensor([coal_min_distance(robot, q[b], SCENE, True) for b in range(q.shape[0])], dtype=F64)
    torch.testing.assert_close(ours, expected, atol=1e-9, rtol=0)
    assert bool((ours < 0).any()) and bool((ours > 0).any())  # both cases compared


def test_batched_obstacles_count_each_shape() -> None:
    robot = ik_layer.load_robot("panda")
    centres = torch.tensor([[0.4, 0.0, 0.3], [0.0, 0.4, 0.6], [-0.3, 0.2, 0.2]], dtype=F64)
    batched = CollisionCost.of(robot, [Sphere(centres, 0.05)], SolveOptions())
    single = [CollisionCost.of(robot, [Sphere(c, 0.05)], SolveOptions()) for c in centres]
    q = robot.random_q(16, generator=gen(2))
    assert batched is not None and all(s is not None for s in single)
    least = torch.stack([s.min_distance(robot, q) for s in single if s is not None]).amin(0)
    torch.testing.assert_close(batched.min_distance(robot, q), least, atol=0, rtol=0)


@pytest.mark.parametrize("self_collision", [0, 1])
def test_cost_gradient_matches_finite_differences(self_collision: int) -> None:
    robot = ik_layer.load_robot("panda")
    options = SolveOptions(self_collision=self_collision, collision_margin=0.01, collision_activation=0.1)
    cost = CollisionCost.of(robot, SCENE, options)
    assert cost is not None
    q = robot.random_q(32, generator=gen(3))
    value, gradient, _ = cost.cost_and_gradient(robot, q)
    assert bool((value > 0).sum() >= 8)  # enough configurations near something
    step = 1e-6
    for axis in range(robot.dof):
        dq = torch.zeros(q.shape[0], robot.dof, dtype=F64)
        dq[:, axis] = step
        ahead = cost.cost_and_gradient(robot, robot.integrate(q, dq))[0]
        behind = cost.cost_and_gradient(robot, robot.integrate(q, -dq))[0]
        torch.testing.assert_close(gradient[:, axis], (ahead - behind) / (2 * step), atol=1e-7, rtol=1e-5)


def targets_with_free_answers(
    robot: ik_layer.Robot, obstacles: list, n: int, seed: int, self_collision: bool, margin: float = 0.0
) -> torch.Tensor:
    """Poses of ``n`` random configurations that are collision-free (each target has a collision-free answer)."""
    cost = CollisionCost.of(robot, obstacles, SolveOptions(self_collision=int(self_collision)))
    assert cost is not None
    q = robot.random_q(8 * n, generator=gen(seed))
    free = q[cost.min_distance(robot, q) >= margin + 0.005][:n]
    assert free.shape[0] == n
    return robot.fk(free)


PATHS = pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])


@PATHS
@pytest.mark.parametrize("self_collision", [0, 1])
def test_every_success_is_collision_free_by_coal(self_collision: int, reference: bool) -> None:
    robot = ik_layer.load_robot("panda")
    target = targets_with_free_answers(robot, SCENE, 48, 4, bool(self_collision))
    result = ik_layer.solve(
        robot, target, obstacles=SCENE, self_collision=self_collision, generator=gen(5), reference=reference
    )
    assert result.min_distance is not None
    assert float(result.success.float().mean()) >= 0.95
    for b in range(target.shape[0]):
        least = coal_min_distance(robot, result.q[b], SCENE, bool(self_collision))
        assert abs(least - float(result.min_distance[b])) < 1e-9
        if result.success[b]:
            assert least >= 0, b
    check = ik_layer.solve(robot, target, reference=True, generator=gen(6))  # the plain answers collide at times
    cost = CollisionCost.of(robot, SCENE, SolveOptions(self_collision=self_collision))
    assert cost is not None and bool((cost.min_distance(robot, check.q) < 0).any())
    assert bool(((result.q >= robot.lower) & (result.q <= robot.upper)).all())
    pose_ok = (result.position_error <= 1e-4) & (result.orientation_error <= 1e-3)
    assert bool((pose_ok | ~result.success).all())


@PATHS
def test_the_margin_is_kept(reference: bool) -> None:
    robot = ik_layer.load_robot("panda")
    target = targets_with_free_answers(robot, SCENE, 24, 7, False, margin=0.03)
    result = ik_layer.solve(
        robot, target, obstacles=SCENE, collision_margin=0.03, generator=gen(8), reference=reference
    )
    assert result.min_distance is not None and float(result.success.float().mean()) >= 0.9
    assert bool((result.min_distance[result.success] >= 0.03).all())


@PATHS
def test_a_target_reached_only_in_collision_fails_with_the_best_configuration(reference: bool) -> None:
    robot = ik_layer.load_robot("panda")
    q = robot.random_q(6, generator=gen(9))
    target = robot.fk(q)
    wall = Sphere(target[:, :3, 3], 0.05)  # a ball around each flange: reaching it means touching the ball
    result = ik_layer.solve(robot, target, obstacles=[wall], max_iterations=60, generator=gen(10), reference=reference)
    assert not bool(result.success.any())
    assert result.min_distance is not None
    for b in range(target.shape[0]):  # the best found: at the pose in collision, or short of the pose
        at_pose = float(result.position_error[b]) <= 1e-4 and float(result.orientation_error[b]) <= 1e-3
        assert float(result.min_distance[b]) < 0 or not at_pose
        assert abs(coal_min_distance(robot, result.q[b], [wall], False) - float(result.min_distance[b])) < 1e-9


@pytest.mark.skipif(ERD is None, reason="example-robot-data not installed")
@PATHS
def test_collision_free_answers_are_free_of_the_published_geometry(reference: bool) -> None:
    """The spheres cover the panda's published collision primitives, so coal finds the primitives themselves clear
    of the obstacles at every success."""
    assert ERD is not None
    urdf = ERD / "panda_description/urdf/panda_collision.urdf"
    robot = ik_layer.load_robot(urdf, "panda_hand_tcp")
    target = targets_with_free_answers(robot, SCENE, 24, 11, False)
    result = ik_layer.solve(robot, target, obstacles=SCENE, generator=gen(12), reference=reference)
    assert float(result.success.float().mean()) >= 0.9
    model = robot.full_model
    geometry = pin.buildGeomFromUrdf(model, str(urdf), pin.COLLISION)
    data, geometry_data = model.createData(), geometry.createData()
    obstacles = coal_obstacles(SCENE)
    for b in torch.nonzero(result.success).flatten().tolist():
        pin.updateGeometryPlacements(
            model, data, geometry, geometry_data, robot.to_full_pinocchio_q(result.q[b]).numpy()
        )
        for k, obj in enumerate(geometry.geometryObjects):
            placement = geometry_data.oMg[k]
            at = coal.Transform3s(placement.rotation, placement.translation)
            for shape, where in obstacles:
                assert coal_distance(obj.geometry, at, shape, where) >= 0, (b, obj.name)


def test_bad_collision_input_is_refused() -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q(2, generator=gen(13)))
    bare = ik_layer.load_robot("ur5e", collision=None)
    with pytest.raises(IKLayerError, match="has no collision spheres"):
        ik_layer.solve(bare, bare.fk(bare.random_q(1, generator=gen(14))), obstacles=[TABLE])
    with pytest.raises(IKLayerError, match="has no collision spheres"):
        ik_layer.solve(bare, bare.fk(bare.random_q(1, generator=gen(14))), self_collision=1)
    with pytest.raises(IKLayerError, match=r"obstacles\[1\] must be an ik_layer.Sphere"):
        ik_layer.solve(robot, target, obstacles=[TABLE, "box"])
    with pytest.raises(IKLayerError, match="obstacles must be a list"):
        ik_layer.solve(robot, target, obstacles="box")
    with pytest.raises(IKLayerError, match="more than 1024"):
        ik_layer.solve(robot, target, obstacles=[Sphere(torch.zeros(1025, 3), 0.1)])
    with pytest.raises(IKLayerError, match="self_collision must be an integer in"):
        ik_layer.solve(robot, target, self_collision=2)
    with pytest.raises(IKLayerError, match="collision_activation must be a number in"):
        ik_layer.solve(robot, target, obstacles=[TABLE], collision_activation=0.0)
    with pytest.raises(IKLayerError, match="has no collision spheres"):
        Problem.prepare(bare, bare.fk(bare.random_q(1, generator=gen(14))), SolveOptions(self_collision=1))
    with pytest.raises(ik_layer.ShapeError, match="do not broadcast"):
        Sphere(torch.zeros(3, 3), torch.ones(2))
    with pytest.raises(IKLayerError, match="radius must be positive"):
        Sphere([0, 0, 0], -0.1)
