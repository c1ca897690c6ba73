"""One scene per target (``obstacles=[[...], [...], ...]``): the packed scenes measure what each scene measures
alone; the engine (both stores) and the reference path keep each target clear of its own scene and report its
own least distance and pair; identical scenes answer as one shared scene; bad scene lists get clear errors."""

from __future__ import annotations

import pytest
import torch

import ik_layer
from ik_layer import Box, Capsule, IKLayerError, Sphere
from ik_layer.collision import shapes
from ik_layer.collision.cost import CollisionCost
from ik_layer.core.options import SolveOptions
from ik_layer.testing import solve_on_engine

F64 = torch.float64
TABLE = Box([0.5, 0.0, -0.06, 0, 0, 0, 1], [1.0, 1.2, 0.1])


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def own_scenes(robot: ik_layer.Robot, q: torch.Tensor, seed: int) -> list[list[shapes.Obstacle]]:
    """A scene per configuration of ``q`` (n, nq), free at it: a ball 4-8 cm from one of the arm's spheres, in
    every third scene a capsule too, in every other one the table; a few scenes empty."""
    assert robot.collision is not None
    centres = robot.collision.centres(robot, q, jacobian=False)[0]
    g = gen(seed)
    scenes: list[list[shapes.Obstacle]] = []
    for row in range(q.shape[0]):
        if row % 7 == 6:
            scenes.append([])
            continue
        k = int(torch.randint(2, len(robot.collision), (1,), generator=g))
        direction = torch.nn.functional.normalize(torch.randn(3, generator=g, dtype=F64), dim=0)
        gap = 0.04 + 0.04 * float(torch.rand(1, generator=g))
        centre = centres[row, k] + direction * (robot.collision.radii[k] + 0.05 + gap)
        scene: list[shapes.Obstacle] = [Sphere(centre, 0.05)]
        if row % 3 == 0:
            scene.insert(0, Capsule(centre + 0.3 * direction, centre + 0.5 * direction, 0.02))
        if row % 2 == 0:
            scene.append(TABLE)
        scenes.append(scene)
    return scenes


def free_targets(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, list[list[shapes.Obstacle]]]:
    """``n`` targets reached by configurations free in their own scenes and of self-collision, and the scenes."""
    q = robot.random_q((4 * n,), generator=gen(seed))
    scenes = own_scenes(robot, q, seed + 1)
    keep = [row for row in range(q.shape[0]) if free(robot, scenes[row], q[row])][:n]
    assert len(keep) == n
    return robot.fk(q[keep]), [scenes[row] for row in keep]


def free(robot: ik_layer.Robot, scene: list[shapes.Obstacle], q: torch.Tensor) -> bool:
    """Whether ``q`` keeps the margin from ``scene`` and from the robot's own spheres."""
    cost = CollisionCost.of(robot, scene, SolveOptions(self_collision=1))
    assert cost is not None
    return bool(cost.free(cost.min_distance(robot, q)))


def assert_own_scene(robot: ik_layer.Robot, result: ik_layer.IKResult, scenes: list, self_collision: int) -> None:
    """Every answer's least distance and pair are its own scene's, measured alone; successes are free in it."""
    assert result.min_distance is not None and result.closest_pair is not None
    options = SolveOptions(self_collision=self_collision)
    for row, scene in enumerate(scenes):
        alone = CollisionCost.of(robot, scene, options)
        if alone is None:
            assert bool(torch.isinf(result.min_distance[row]))
            continue
        least, pair = alone.closest(robot, result.q[row])
        torch.testing.assert_close(result.min_distance[row], least, atol=1e-10, rtol=0)
        assert result.closest_pair[row].tolist() == pair.tolist()
        if result.success[row]:
            assert float(least) >= options.collision_margin


def test_packed_scenes_measure_what_each_scene_measures_alone() -> None:
    robot = ik_layer.load_robot("panda")
    q = robot.random_q((12,), generator=gen(1))
    scenes = own_scenes(robot, q, 2)
    scenes[4] = [Sphere(torch.tensor([[0.4, 0.1, 0.3], [0.2, -0.2, 0.5]], dtype=F64), 0.05), *scenes[4]]  # batched
    for self_collision in (0, 1):
        options = SolveOptions(self_collision=self_collision, collision_activation=0.3)
        together = CollisionCost.of(robot, scenes, options)
        assert together is not None
        least, pair = together.closest(robot, q)
        cost, gradient, _ = together.cost_and_gradient(robot, q)
        for row, scene in enumerate(scenes):
            alone = CollisionCost.of(robot, scene, options)
            if alone is None:  # no obstacles, no self-collision: nothing to measure
                assert bool(torch.isinf(least[row])) and pair[row].tolist() == [-1, -1] and float(cost[row]) == 0
                continue
            one_least, one_pair = alone.closest(robot, q[row])
            torch.testing.assert_close(least[row], one_least, atol=1e-12, rtol=0)
            assert pair[row].tolist() == one_pair.tolist()
            one_cost, one_gradient, _ = alone.cost_and_gradient(robot, q[row])
            torch.testing.assert_close(cost[row], one_cost, atol=1e-12, rtol=0)
            torch.testing.assert_close(gradient[row], one_gradient, atol=1e-12, rtol=0)
        assert float(cost.max()) > 0  # the balls are within the activation


@pytest.mark.parametrize("path", ["host", "tensor", "reference"])
def test_each_target_keeps_clear_of_its_own_scene(path: str) -> None:
    robot = ik_layer.load_robot("panda")
    n = 24 if path == "reference" else 96
    target, scenes = free_targets(robot, n, 3)
    options = SolveOptions(self_collision=1, num_seeds=8)
    if path == "reference":
        result = ik_layer.solve(robot, target, options, obstacles=scenes, reference=True, generator=gen(4))
    else:
        result = solve_on_engine(robot, target, options, obstacles=scenes, seed=4, store=path)
    assert float(result.success.float().mean()) >= 0.9
    assert_own_scene(robot, result, scenes, self_collision=1)


def test_both_stores_give_identical_answers_with_a_scene_per_target() -> None:
    robot = ik_layer.load_robot("panda")
    target, scenes = free_targets(robot, 32, 5)
    options = SolveOptions(self_collision=1, num_seeds=4)
    host = solve_on_engine(robot, target, options, obstacles=scenes, seed=6, store="host")
    tensor = solve_on_engine(robot, target, options, obstacles=scenes, seed=6, store="tensor")
    for name in ("q", "success", "iterations", "min_distance", "closest_pair"):
        assert torch.equal(getattr(host, name), getattr(tensor, name)), name


def test_identical_scenes_per_target_answer_as_one_shared_scene() -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q((40,), generator=gen(7)))
    scene = [TABLE, Sphere([0.35, 0.3, 0.45], 0.1), Capsule([0.5, -0.4, 0.1], [0.5, -0.4, 0.7], 0.05)]
    shared = ik_layer.solve(robot, target, obstacles=scene, self_collision=1, generator=gen(8))
    each = ik_layer.solve(robot, target, obstacles=[scene] * 40, self_collision=1, generator=gen(8))
    for name in ("q", "success", "iterations", "min_distance", "closest_pair"):
        assert torch.equal(getattr(shared, name), getattr(each, name)), name


def test_a_batch_of_targets_takes_its_scenes_in_flattened_order() -> None:
    robot = ik_layer.load_robot("panda")
    target, scenes = free_targets(robot, 6, 9)
    result = ik_layer.solve(robot, target.reshape(2, 3, 4, 4), obstacles=scenes, generator=gen(10))
    assert result.min_distance is not None and result.min_distance.shape == (2, 3)
    flat = ik_layer.IKResult(
        result.q.reshape(6, -1), result.success.reshape(6), result.position_error.reshape(6),
        result.orientation_error.reshape(6), result.iterations.reshape(6), result.min_distance.reshape(6),
        None if result.closest_pair is None else result.closest_pair.reshape(6, 2),
    )  # fmt: skip
    assert_own_scene(robot, flat, scenes, self_collision=0)


def test_bad_scene_lists_get_errors_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q((3,), generator=gen(11)))
    ball = Sphere([0.5, 0.5, 0.5], 0.1)
    with pytest.raises(IKLayerError, match=r"obstacles: one scene per target needs 3 lists .* got 2"):
        ik_layer.solve(robot, target, obstacles=[[ball], [ball]])
    with pytest.raises(IKLayerError, match=r"obstacles\[1\]\[0\] must be an ik_layer.Sphere"):
        ik_layer.solve(robot, target, obstacles=[[ball], ["ball"], []])
    with pytest.raises(IKLayerError, match=r"obstacles\[2\] must be a list"):
        ik_layer.solve(robot, target, obstacles=[[ball], [], "ball"])
    many = Sphere(torch.zeros(shapes.MAX_OBSTACLES + 1, 3), 0.1)
    with pytest.raises(IKLayerError, match=rf"obstacles\[0\]: {shapes.MAX_OBSTACLES + 1} shapes"):
        ik_layer.solve(robot, target, obstacles=[[many], [], []])
    monkeypatch.setattr(shapes, "MAX_BATCH_OBSTACLES", 5)
    with pytest.raises(IKLayerError, match="6 shapes over all scenes, more than 5"):
        ik_layer.solve(robot, target, obstacles=[[ball, ball], [ball, ball], [ball, ball]])
    bare = ik_layer.load_robot("panda", collision=None)
    with pytest.raises(IKLayerError, match="has no collision spheres"):
        ik_layer.solve(bare, target, obstacles=[[], [ball], []])
    assert bool(ik_layer.solve(bare, target, obstacles=[[], [], []]).success.all())  # no obstacles at all
