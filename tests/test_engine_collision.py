"""The collision term in the fused LM kernel (ik_layer.engine.device.collision_step) and its plumbing: the kernel's
cost, gradient and least distance equal the reference term's (ik_layer.collision.cost) on a fixed and a floating base;
both stores give the same answers; the obstacle table hands out ranges, grows and shrinks, and a request waits for
room; a request's answer does not depend on its neighbours' scenes; one scene per target reaches each target's
slots."""

# No `from __future__ import annotations`: warp reads the test kernel's annotations as live types.
import numpy as np
import pytest
import torch
import warp as wp

import ik_layer
from ik_layer import Box, Capsule, Sphere
from ik_layer.collision.cost import CollisionCost
from ik_layer.collision.packed import PackedObstacles
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.engine import Engine, open_store, scheduler
from ik_layer.engine.device.collision_step import SphereLayout, collision_functions, collision_structs, spine_tensors
from ik_layer.engine.obstacles import TABLE_ROWS, ObstacleTable
from ik_layer.model.kernel_types import kernel_types
from ik_layer.testing import example_robot_data_dir, random_configurations, solve_on_engine

F64 = torch.float64
ERD = example_robot_data_dir()
SCENE = [
    Box([0.6, 0.0, -0.09, 0, 0, 0, 1], [0.8, 1.0, 0.1]),
    Box([0.4, 0.1, 0.5, 0.2, 0.3, 0.1, 0.927], [0.2, 0.3, 0.1]),  # turned
    Sphere([0.35, 0.3, 0.45], 0.1),
    Capsule([0.5, -0.4, 0.1], [0.5, -0.4, 0.7], 0.05),
]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def packed(*scenes: list) -> PackedObstacles:
    """``scenes`` packed as the engine packs them (one: shared by every target)."""
    return PackedObstacles.of(tuple(tuple(scene) for scene in scenes), F64, torch.device("cpu"))


def collide_kernel(robot: ik_layer.Robot) -> wp.Kernel:
    """A kernel that writes the collision term (gradient, cost, least distance within reach) and the exact least
    distance (``clearance``) of one configuration per thread."""
    assert robot.collision is not None
    layout, links = robot.chains.layout, robot.chains_to(robot.collision.links).layout
    functions = collision_functions(layout, SphereLayout(links, len(robot.collision)), robot.dtype)
    collide, clearance = functions.collide, functions.clearance
    t = kernel_types(layout, robot.dtype)
    Spheres, Obstacles = collision_structs(robot.dtype)

    @wp.kernel(module="unique", enable_backward=False)
    def term(
        q: wp.array(dtype=t.vecq),
        links_chain: t.Chain,
        spheres: Spheres,
        obstacles: Obstacles,
        scene: wp.vec2i,
        self_on: wp.int32,
        margin: t.f,
        activation: t.f,
        grad: wp.array(dtype=t.vect),
        cost: wp.array(dtype=t.f),
        least: wp.array(dtype=t.f),
        exact: wp.array(dtype=t.f),
    ):
        i = wp.tid()
        g, c, d = collide(q[i], links_chain, spheres, obstacles, scene, self_on, margin, activation)
        grad[i] = g
        cost[i] = c
        least[i] = d
        at_least, _pair = clearance(q[i], links_chain, spheres, obstacles, scene, self_on, -t.f(wp.inf))
        exact[i] = at_least

    return term


def panda(floating: bool) -> ik_layer.Robot:
    if not floating:
        return ik_layer.load_robot("panda")
    if ERD is None:
        pytest.skip("example-robot-data not installed")
    urdf = ERD / "panda_description/urdf/panda_collision.urdf"
    return ik_layer.load_robot(urdf, "panda_hand_tcp", floating_base=True, collision="auto")


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("self_collision", [0, 1])
@pytest.mark.parametrize("spine", [True, False], ids=["spine", "per-link"])
def test_the_kernel_term_equals_the_reference_term(floating: bool, self_collision: int, spine: bool) -> None:
    """Both walks: along the spine (a serial arm's links, one walk) and link by link (any other robot)."""
    robot = panda(floating)
    options = SolveOptions(self_collision=self_collision, collision_margin=0.01, collision_activation=0.1)
    term = CollisionCost.of(robot, SCENE, options)
    assert term is not None
    q = random_configurations(robot, 256, gen(1))
    cost, gradient, least = term.cost_and_gradient(robot, q)
    assert int((cost > 0).sum()) >= 32  # enough configurations near something

    slots = open_store(robot, 1)
    walk = slots._sphere_tensors["spine"]  # the struct's view: changed in place
    assert int(walk) >= 0  # a serial arm: one link's chain holds every other's
    if not spine:
        walk.fill_(-1)
    scene = slots.obstacles.add(packed(SCENE))
    assert scene is not None and scene.tolist() == [[0, len(SCENE)]]
    t = kernel_types(robot.chains.layout, robot.dtype)
    out_grad = torch.zeros(q.shape[0], robot.dof, dtype=F64)
    out_cost, out_least, out_exact = (torch.zeros(q.shape[0], dtype=F64) for _ in range(3))
    wp.launch(
        collide_kernel(robot), dim=q.shape[0],
        inputs=[
            wp.from_torch(q.contiguous(), dtype=t.vecq), slots.link_chain, slots.spheres, slots.obstacles.struct,
            wp.vec2i(*scene[0].tolist()), self_collision, 0.01, 0.1, wp.from_torch(out_grad, dtype=t.vect),
            wp.from_torch(out_cost), wp.from_torch(out_least), wp.from_torch(out_exact),
        ],
        device="cpu",
    )  # fmt: skip
    torch.testing.assert_close(out_cost, cost, atol=1e-10, rtol=0)
    torch.testing.assert_close(out_grad, gradient, atol=1e-10, rtol=0)
    torch.testing.assert_close(out_exact, least, atol=1e-10, rtol=0)
    near = least < 0.01 + 0.1  # within reach the term's least is exact; beyond, at least the reach
    assert int(near.sum()) > 0
    torch.testing.assert_close(out_least[near], least[near], atol=1e-10, rtol=0)
    assert bool((out_least[~near] >= 0.11).all())


def test_both_stores_give_identical_answers_with_collision() -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q(24, generator=gen(2)))
    options = SolveOptions(self_collision=1, num_seeds=4)
    host = solve_on_engine(robot, target, options, obstacles=SCENE, seed=3, store="host")
    tensor = solve_on_engine(robot, target, options, obstacles=SCENE, seed=3, store="tensor")
    assert torch.equal(host.q, tensor.q)
    assert torch.equal(host.success, tensor.success)
    assert torch.equal(host.iterations, tensor.iterations)
    assert host.min_distance is not None and tensor.min_distance is not None
    assert torch.equal(host.min_distance, tensor.min_distance)
    assert host.closest_pair is not None and tensor.closest_pair is not None
    assert torch.equal(host.closest_pair, tensor.closest_pair)
    assert float(host.success.float().mean()) >= 0.75  # some targets collide in their only reachable answers


def test_the_obstacle_table_hands_out_the_first_free_range() -> None:
    table = ObstacleTable(F64, torch.device("cpu"), rows=10, limit=10)
    four = [Sphere(torch.zeros(4, 3), 0.1)]

    def add(*scenes: list) -> list | None:
        rows = table.add(packed(*scenes))
        return None if rows is None else rows.tolist()

    assert add([]) == [[0, 0]]
    assert add(four) == [[0, 4]]
    assert add(four) == [[4, 4]]
    assert add(four) is None  # 2 rows left, and the table may not grow
    table.release(np.array([[0, 4]]))
    assert add([Sphere([1.0, 2.0, 3.0], 0.5), Box([0, 0, 1, 0, 0, 0, 1], [2, 4, 6])]) == [[0, 2]]
    assert table.fields["pos"][0].tolist() == [1.0, 2.0, 3.0] and float(table.fields["radius"][0]) == 0.5
    assert table.fields["extent"][1].tolist() == [1.0, 2.0, 3.0] and float(table.fields["radius"][1]) == 0
    assert add([Capsule([0, 0, 0], [0, 0, 1], 0.1)]) == [[2, 1]]
    assert table.fields["extent"][2].tolist() == [0.0, 0.0, 1.0]
    table.release(np.array([[4, 4]]))
    assert add(four) == [[3, 4]]


def test_the_obstacle_table_places_scenes_back_to_back_growing_and_shrinking() -> None:
    table = ObstacleTable(F64, torch.device("cpu"), rows=4, limit=16)
    ball, box = Sphere([1.0, 0.0, 0.0], 0.1), Box([0, 2, 0, 0, 0, 0, 1], [1, 1, 1])
    first = table.add(packed([box, ball], [], [Sphere(torch.tensor([[3.0, 0, 0], [4, 0, 0]]), 0.2)]))
    assert first is not None and first.tolist() == [[0, 2], [2, 0], [2, 2]]
    assert table.rows == 4
    # each scene's shapes in its own order, whatever their kinds
    assert table.fields["pos"][:4, 0].tolist() == [0.0, 1.0, 3.0, 4.0] and table.fields["pos"][0, 1] == 2.0
    second = table.add(packed([ball] * 3, [box] * 2))  # no room in 4 rows: the table doubles, rows kept
    assert second is not None and second.tolist() == [[4, 3], [7, 2]]
    assert table.rows == 16 and table.fields["pos"][:4, 0].tolist() == [0.0, 1.0, 3.0, 4.0]
    assert table.add(packed([ball] * 8)) is None  # 9 rows in use of at most 16
    struct = table.struct
    table.release(first)
    table.release(second)
    assert table.rows == 4 and table.struct is not struct  # emptied: back to its first size, bound anew


def test_a_request_waits_for_room_in_the_obstacle_table() -> None:
    robot = ik_layer.load_robot("panda")
    far = [Sphere(torch.full((TABLE_ROWS // 4, 3), 5.0), 0.1)]  # a whole quarter of the table, out of reach
    target = robot.fk(robot.random_q(5, generator=gen(4)))
    engine = Engine(robot, capacity=8, block=8)
    engine.slots.obstacles.limit = TABLE_ROWS  # the table may not grow
    requests = [engine.submit(Problem.prepare(robot, target[k : k + 1], obstacles=far), seed=k) for k in range(5)]
    engine.step()
    assert [r.scene.tolist() for r in requests[:4] if r.scene is not None] == [
        [[k * TABLE_ROWS // 4, TABLE_ROWS // 4]] for k in range(4)
    ]
    assert requests[4].scene is None and requests[4].admitted == 0  # waits: no room
    engine.run()
    assert requests[4].scene is not None
    for request in requests:
        result = request.result()
        assert bool(result.success.all())
        assert result.min_distance is not None and float(result.min_distance.min()) > 3


def test_an_answer_does_not_depend_on_the_neighbours_scenes() -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q(6, generator=gen(5)))
    options = SolveOptions(self_collision=1)
    alone = Engine(robot, capacity=32, block=8)
    mine = alone.submit(Problem.prepare(robot, target, options, obstacles=SCENE), seed=6)
    alone.run()
    shared = Engine(robot, capacity=32, block=8)
    other = shared.submit(Problem.prepare(robot, target.flip(0), obstacles=[SCENE[2]]), seed=7)
    again = shared.submit(Problem.prepare(robot, target, options, obstacles=SCENE), seed=6)
    shared.run()
    assert other.scene is not None and again.scene is not None and other.scene.tolist() != again.scene.tolist()
    assert torch.equal(mine.result().q, again.result().q)
    assert torch.equal(mine.result().success, again.result().success)


def test_the_spine_is_found_on_serial_arms_only() -> None:
    robot = ik_layer.load_robot("panda")
    assert robot.collision is not None
    walk = spine_tensors(robot.chains_to(robot.collision.links))
    # each link's chain ends after the joints moving it: link k after k of them, the hand after all seven
    assert walk["ends"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 7]
    assert int(walk["spine"]) in (7, 8)
    if ERD is None:
        pytest.skip("example-robot-data not installed")
    feet = ["FL_FOOT", "FR_FOOT"]
    solo = ik_layer.load_robot(ERD / "solo_description/robots/solo12.urdf", ee_frames=feet, floating_base=True)
    legs = spine_tensors(solo.chains_to(feet))  # two moving branches: neither chain holds the other
    assert int(legs["spine"]) == -1


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_the_closest_pair_is_the_one_at_the_least_distance(reference: bool) -> None:
    """Both paths name the pair at ``min_distance``: its own distance, measured alone, is the least."""
    robot = ik_layer.load_robot("panda")
    spheres = robot.collision
    assert spheres is not None
    balls = Sphere(torch.tensor([[0.3, 0.3, 0.5], [0.4, -0.3, 0.4]], dtype=F64), torch.tensor([0.1, 0.08], dtype=F64))
    obstacles = [SCENE[0], balls]  # flattened: the table, then the two balls
    target = robot.fk(robot.random_q(64, generator=gen(21)))
    result = ik_layer.solve(robot, target, obstacles=obstacles, self_collision=1, reference=reference)
    assert result.min_distance is not None and result.closest_pair is not None
    centres = spheres.centres(robot, result.q, jacobian=False)[0]
    flat = [SCENE[0], Sphere(balls.center[0], balls.radius[0]), Sphere(balls.center[1], balls.radius[1])]
    kinds = set()
    for row, (k, other) in enumerate(result.closest_pair.tolist()):
        at = centres[row, k]
        if other >= 0:
            d = flat[other].signed_distance(at) - spheres.radii[k]
        else:
            d = (at - centres[row, -1 - other]).norm() - spheres.radii[k] - spheres.radii[-1 - other]
            assert sorted((k, -1 - other)) in spheres.pairs.tolist()
        kinds.add(other >= 0)
        torch.testing.assert_close(d, result.min_distance[row], atol=1e-12, rtol=0)
    assert kinds == {True, False}  # both kinds of pairs met


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_without_any_pair_there_is_no_closest_pair(reference: bool) -> None:
    """One sphere and no obstacle: self-collision has nothing to measure (+inf, and the pair -1, -1)."""
    lone = {"collision_spheres": {"panda_link4": [{"center": [0.0, 0.0, 0.0], "radius": 0.05}]}}
    robot = ik_layer.load_robot("panda", collision=lone)
    target = robot.fk(robot.random_q(3, generator=gen(22)))
    result = ik_layer.solve(robot, target, self_collision=1, reference=reference)
    assert result.min_distance is not None and result.closest_pair is not None
    assert bool(torch.isinf(result.min_distance).all())
    assert result.closest_pair.tolist() == [[-1, -1]] * 3


def test_a_start_pool_keeps_the_latest_answers_in_a_ring() -> None:
    from ik_layer.engine.device.kernel import POOL_STARTS

    robot = ik_layer.load_robot("panda")
    for store in ("host", "tensor"):
        slots = open_store(robot, 1, store)
        q = torch.arange(3 * POOL_STARTS * 7, dtype=F64).reshape(-1, 7)  # answer k holds 7k .. 7k + 6
        slots.empty_starts(1)
        slots.add_starts(1, 0, slots.array(q[:5]))
        slots.add_starts(1, 5, slots.array(q[5 : POOL_STARTS + 9]))  # wraps round: 9 overwritten
        pool = slots.pool_q[POOL_STARTS : 2 * POOL_STARTS]
        assert int(slots.pool_count[1]) == POOL_STARTS and int(slots.pool_count[0]) == 0
        held = sorted(int(row[0]) // 7 for row in pool)
        assert held == list(range(9, POOL_STARTS + 9)), store
        assert torch.equal(pool[(POOL_STARTS + 8) % POOL_STARTS], q[POOL_STARTS + 8])
        slots.add_starts(1, POOL_STARTS + 9, slots.array(q[: 3 * POOL_STARTS]))  # more than a pool: the last ones
        held = sorted(int(row[0]) // 7 for row in slots.pool_q[POOL_STARTS : 2 * POOL_STARTS])
        assert held == list(range(2 * POOL_STARTS, 3 * POOL_STARTS))
        slots.empty_starts(1)
        assert int(slots.pool_count[1]) == 0


def test_seeds_stuck_in_collision_restart_from_the_start_pool_on_both_stores() -> None:
    """ur5e (no null space) in a bin: most seeds converge in collision and restart, mostly from the free answers
    of other targets; both stores answer alike, every success is free, and the pools come back."""
    robot = ik_layer.load_robot("ur5e")
    floor = Box([0.55, 0.0, -0.02, 0, 0, 0, 1], [0.6, 0.8, 0.04])
    walls = [Box([x, 0.0, 0.1, 0, 0, 0, 1], [0.02, 0.5, 0.2]) for x in (0.3, 0.8)]
    scene = [floor, *walls]
    cost = CollisionCost.of(robot, scene, SolveOptions(self_collision=1))
    assert cost is not None
    q = robot.random_q((20000,), generator=gen(30))
    tip = robot.fk(q)[:, :3, 3]
    inside = (tip[:, 0] > 0.35) & (tip[:, 0] < 0.75) & (tip[:, 1].abs() < 0.25) & (tip[:, 2] < 0.2)
    q = q[inside & (cost.min_distance(robot, q) > 0.005)][:48]
    assert q.shape[0] == 48
    options = SolveOptions(self_collision=1)
    answers = {}
    for store in ("host", "tensor"):
        engine = Engine(robot, capacity=64, block=8, store=store)
        request = engine.submit(Problem.prepare(robot, robot.fk(q), options, obstacles=scene), seed=31)
        engine.run()
        assert request.pool == 0 and request.pooled == int(request.result().success.sum())
        assert engine._pools == list(range(len(engine._pools)))[::-1]  # given back
        answers[store] = request.result()
    host, tensor = answers["host"], answers["tensor"]
    assert torch.equal(host.q, tensor.q) and torch.equal(host.iterations, tensor.iterations)
    assert float(host.success.float().mean()) >= 0.95
    assert bool((cost.min_distance(robot, host.q[host.success]) >= 0).all())
    assert float(host.iterations.float().mean()) > 12  # restarts happened (a plain solve takes about 8)


def test_requests_beyond_the_start_pools_solve_without_one() -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q(4, generator=gen(32)))
    engine = Engine(robot, capacity=16, block=8)
    engine._pools = [5]  # one pool left
    first, second = (engine.submit(Problem.prepare(robot, target, obstacles=SCENE), seed=k) for k in range(2))
    engine.step()
    assert (first.pool, second.pool) == (5, -1)
    engine.run()
    assert engine._pools == [5]
    for request in (first, second):
        assert bool(request.result().success.all())


def test_a_pooled_request_admits_a_probe_first_then_the_rest_on_both_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a start pool, PROBE_ROWS targets run one block ahead; the others' random first seeds then draw on the
    probe's free answers. Both stores answer alike and every success is free."""
    monkeypatch.setattr(scheduler, "PROBE_ROWS", 8)
    robot = ik_layer.load_robot("ur5e")
    q = robot.random_q((400,), generator=gen(33))
    cost = CollisionCost.of(robot, SCENE, SolveOptions(self_collision=1))
    assert cost is not None
    q = q[cost.min_distance(robot, q) > 0.005][:24]
    assert q.shape[0] == 24
    answers = {}
    for store in ("host", "tensor"):
        engine = Engine(robot, capacity=64, block=16, store=store)
        problem = Problem.prepare(robot, robot.fk(q), SolveOptions(self_collision=1), obstacles=SCENE)
        request = engine.submit(problem, seed=34)
        engine.step()
        assert request.admitted == 8 and request.pool >= 0
        engine.step()
        assert request.admitted == 24
        engine.run()
        answers[store] = request.result()
    host, tensor = answers["host"], answers["tensor"]
    assert torch.equal(host.q, tensor.q) and torch.equal(host.iterations, tensor.iterations)
    assert float(host.success.float().mean()) >= 0.95
    assert bool((cost.min_distance(robot, host.q[host.success]) >= 0).all())
