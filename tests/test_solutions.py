"""Sets of answers (``num_solutions``, ``objective``): every solution reaches its target (checked with Pinocchio),
solutions of one target lie apart, a UR5e's branches are all found (as many as hundreds of random starts find),
objectives rank the solutions, shapes gain the solutions' dimension, bad arguments get clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, Sphere
from ik_layer.collision.cost import CollisionCost
from ik_layer.core.solutions import MAX_ROUNDS, SEPARATION, SolutionSearch, _distance, _wrapping, solve_set

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from ur_analytic import ur_branches

F64 = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def assert_reaches(robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor) -> None:
    """Pinocchio's FK of every ``q`` (m, nq) lies within the default tolerances of its ``target`` (m, 4, 4)."""
    model, data = robot.model, robot.model.createData()
    frame = model.getFrameId(robot.ee_frame)
    for qi, ti in zip(robot.to_pinocchio_q(q).numpy(), target.numpy(), strict=True):
        pin.framesForwardKinematics(model, data, qi)
        placement = data.oMf[frame]
        assert np.linalg.norm(placement.translation - ti[:3, 3]) <= 1e-4
        assert np.linalg.norm(pin.log3(ti[:3, :3] @ placement.rotation.T)) <= 1e-3


def distinct(robot: ik_layer.Robot, q: torch.Tensor) -> list[torch.Tensor]:
    """``q`` (m, nq) kept greedily where at least SEPARATION from those kept (full turns wrapped)."""
    kept: list[torch.Tensor] = []
    for x in q:
        if all(float(_distance(x, y, _wrapping(robot))) >= SEPARATION for y in kept):
            kept.append(x)
    return kept


def test_a_ur5e_finds_every_closed_form_branch() -> None:
    robot = ik_layer.load_robot("ur5e")
    target = robot.fk(robot.random_q((12,), generator=gen(1)))
    result = ik_layer.solve(robot, target, num_solutions=8, generator=gen(2))
    assert result.q.shape == (12, 8, 6) and result.success.shape == (12, 8) and result.status is not None
    counts = result.success.sum(-1)
    assert int((counts == 8).sum()) >= 6  # most generic targets have all eight branches
    for row in range(12):
        found = result.q[row][result.success[row]]
        assert_reaches(robot, found, target[row].expand(len(found), 4, 4))
        assert len(distinct(robot, found)) == len(found)  # pairwise apart
        exact = torch.from_numpy(ur_branches(target[row].numpy()))
        near = _distance(exact[:, None], found[None], _wrapping(robot)) < SEPARATION / 2
        assert bool(near.any(1).all()) and bool(near.any(0).all())  # each branch found, each answer a branch
        assert result.status[row].tolist() == [1] * int(counts[row]) + [2] * (8 - int(counts[row]))


def generic_ur5e_targets(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``n`` targets (n, 4, 4) of random configurations and their closed-form branches, only targets whose every
    branch lies away from singularities (its Jacobian's smallest singular value at least 0.01, as
    bench/solve_types.py counts generic targets): near one, branches merge and a tolerance admits a continuum."""
    targets, branches = [], []
    for target in robot.fk(robot.random_q((2 * n,), generator=gen(seed))):
        exact = torch.from_numpy(ur_branches(target.numpy()))
        if len(exact) and float(torch.linalg.svdvals(robot.fk_jacobian(exact)[1]).min()) >= 0.01:
            targets.append(target)
            branches.append(exact)
    assert len(targets) >= n
    return torch.stack(targets[:n]), branches[:n]


@pytest.mark.parametrize("objective", ["first", "closest", "manipulability", "posture"])
def test_every_objective_finds_every_closed_form_branch(objective: str) -> None:
    """An objective ranks the set, it must not shrink it: ``"closest"`` drew its candidates around the warm start
    only, and missed the far branches of about one generic target in seven."""
    robot = ik_layer.load_robot("ur5e", collision=None)
    target, branches = generic_ur5e_targets(robot, 50, 30)
    near = robot.random_q((50,), generator=gen(31))
    result = ik_layer.solve(
        robot, target, num_solutions=8, objective=objective, warm_start=near, posture=near, generator=gen(32)
    )
    found = 0
    for row, exact in enumerate(branches):
        ours = result.q[row][result.success[row]]
        assert_reaches(robot, ours, target[row].expand(len(ours), 4, 4))
        found += bool((_distance(exact[:, None], ours[None], _wrapping(robot)) < SEPARATION / 2).any(1).all())
    assert found >= 49


def test_a_search_solves_at_most_its_bound_of_rows() -> None:
    robot = ik_layer.load_robot("ur5e")
    targets = robot.fk(robot.random_q((5,), generator=gen(4)))
    targets[0, 0, 3] += 5.0  # out of reach: every round runs for it
    problem = ik_layer.Problem.prepare(robot, targets)
    solved: list[int] = []

    def run(part: ik_layer.Problem) -> ik_layer.IKResult:
        solved.append(part.rows)
        return ik_layer.solve(robot, part.target, weights=part.weights)

    for objective in ("first", "manipulability"):
        solved.clear()
        result = solve_set(robot, problem, 4, objective, run)
        assert len(solved) == 1 + MAX_ROUNDS and not bool(result.success[0].any())
        assert sum(solved) <= SolutionSearch.most_rows(5, 4)


@pytest.mark.parametrize("objective", ["closest", "posture", "manipulability"])
def test_the_objective_ranks_the_solutions(objective: str) -> None:
    robot = ik_layer.load_robot("ur5e")
    target = robot.fk(robot.random_q((6,), generator=gen(4)))
    near = robot.random_q((6,), generator=gen(5))
    result = ik_layer.solve(
        robot, target, num_solutions=4, objective=objective, warm_start=near, posture=near, generator=gen(6)
    )
    ranked = 0
    for row in range(6):
        q = result.q[row][result.success[row]]
        ranked += len(q) >= 2
        if objective == "manipulability":
            jac = robot.fk_jacobian(q)[1]
            key = -torch.linalg.det(jac @ jac.transpose(-1, -2)).sqrt()
        else:
            key = _distance(q, near[row], _wrapping(robot))
        assert bool((key[1:] >= key[:-1] - 1e-12).all()), key
    assert ranked >= 4  # most targets have several branches to rank


def test_one_closest_solution_is_no_farther_than_the_first_found() -> None:
    """The same first round (the warm start's answer), then random starts: the closest of them all."""
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q((8,), generator=gen(7)))
    start = robot.random_q((8,), generator=gen(8))
    closest = ik_layer.solve(robot, target, warm_start=start, objective="closest", generator=gen(9))
    first = ik_layer.solve(robot, target, warm_start=start, generator=gen(9))
    assert closest.q.shape == (8, 7) and bool(closest.success.all()) and bool(first.success.all())
    wrap = _wrapping(robot)
    assert bool((_distance(closest.q, start, wrap) <= _distance(first.q, start, wrap) + 1e-12).all())
    assert_reaches(robot, closest.q, target)


@pytest.mark.parametrize("objective", ["closest", "posture"])
def test_a_first_answer_within_half_the_separation_of_the_reference_takes_no_more_rounds(objective: str) -> None:
    """A nearer solution would lie within SEPARATION of that answer: the same solution. Only the targets whose
    first answers lie farther take the round of candidates."""
    robot = ik_layer.load_robot("panda")
    source = robot.random_q((6,), generator=gen(10))
    target = robot.fk(source)
    reference = torch.cat((source[:4] + 0.002, robot.random_q((2,), generator=gen(11))))  # 4 near, 2 far
    problem = ik_layer.Problem.prepare(robot, target, warm_start=reference, posture=reference)
    solved: list[int] = []

    def run(part: ik_layer.Problem) -> ik_layer.IKResult:
        solved.append(part.rows)
        return ik_layer.solve(
            robot, part.target, warm_start=part.warm_start, posture=part.posture, generator=gen(12 + len(solved))
        )

    result = solve_set(robot, problem, 1, objective, run, generator=gen(13))
    away = _distance(result.q[:, 0], reference, _wrapping(robot))
    assert bool(result.success.all()) and bool((away[:4] <= SEPARATION / 2).all()) and bool((away[4:] > 0.1).all())
    assert solved[:2] == [6, 2 * (2 * 1 + 7)]  # the candidates of the two far targets only
    assert_reaches(robot, result.q[:, 0], target)


def test_the_reference_path_and_per_target_scenes_take_solutions_too() -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q((3,), generator=gen(10)))
    scenes = [[Sphere([0.3, 0.3, 0.4], 0.05)], [], [Sphere([0.4, -0.2, 0.3], 0.08)]]
    result = ik_layer.solve(robot, target, num_solutions=3, obstacles=scenes, reference=True, generator=gen(11))
    assert result.min_distance is not None and result.min_distance.shape == (3, 3)
    for row, scene in enumerate(scenes):
        found = result.q[row][result.success[row]]
        assert len(found) == 3 and len(distinct(robot, found)) == 3
        cost = CollisionCost.of(robot, scene, ik_layer.SolveOptions()) if scene else None
        if cost is not None:
            torch.testing.assert_close(result.min_distance[row], cost.min_distance(robot, found), atol=1e-10, rtol=0)


def test_shapes_follow_the_targets_batch() -> None:
    robot = ik_layer.load_robot("panda")
    target = robot.fk(robot.random_q((2, 3), generator=gen(12)))
    result = ik_layer.solve(robot, target, num_solutions=2, generator=gen(13))
    assert result.q.shape == (2, 3, 2, 7) and result.success.shape == (2, 3, 2)
    assert result.position_error.shape == (2, 3, 2) and result.iterations.shape == (2, 3, 2)
    one = ik_layer.solve(robot, target, objective="manipulability", generator=gen(13))
    assert one.q.shape == (2, 3, 7) and one.success.shape == (2, 3)


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"num_solutions": 0}, "num_solutions must be an int in [1, 64]"),
        ({"num_solutions": 65}, "num_solutions must be an int"),
        ({"num_solutions": 2.0}, "num_solutions must be an int"),
        ({"num_solutions": True}, "num_solutions must be an int"),
        ({"objective": "fast"}, "objective must be one of"),
        ({"objective": "closest"}, "give warm_start"),
        ({"objective": "posture"}, "give posture"),
    ],
)
def test_bad_arguments_are_refused_naming_them(arguments: dict, words: str) -> None:
    robot = ik_layer.load_robot("panda")
    with pytest.raises(IKLayerError, match=words.replace("[", r"\[").replace("]", r"\]")):
        ik_layer.solve(robot, robot.fk(robot.neutral_q()), **arguments)


def test_each_solution_carries_its_own_gradient() -> None:
    """ur5e (no null space): each solution's dq/d(target twist) is the inverse of its own Jacobian."""
    from ik_layer.model.lie import so3_exp

    robot = ik_layer.load_robot("ur5e")
    target = robot.fk(robot.random_q((1,), generator=gen(14)))[0]
    xi = torch.zeros(6, dtype=F64, requires_grad=True)
    moved = torch.eye(4, dtype=F64).clone()
    moved[:3, :3] = so3_exp(xi[3:])
    moved[:3, 3] = xi[:3]
    result = ik_layer.ik_solve(robot, moved @ target, num_solutions=3, generator=gen(15))
    assert result.q.shape == (3, 6) and bool(result.success.all())
    # the twist moves the target about the base's origin: at the target, v + w x p
    p = target[:3, 3]
    shift = torch.eye(6, dtype=F64)
    shift[:3, 3:] = -torch.tensor([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]], dtype=F64)
    expected = [ik_layer.target_gradient(robot, result.q[s].detach()) @ shift for s in range(3)]
    for s in range(3):
        rows = torch.stack([torch.autograd.grad(result.q[s, j], xi, retain_graph=True)[0] for j in range(6)])
        # within the pose tolerances, not at zero error: the implicit step moves q by up to about 1e-4
        torch.testing.assert_close(rows, expected[s], atol=1e-3, rtol=0)
        assert all(float((rows - expected[o]).abs().max()) > 0.1 for o in range(3) if o != s)  # its own
    assert float((result.q[0] - result.q[1]).detach().abs().max()) > SEPARATION


def test_a_goal_set_row_reaches_one_of_its_goals_and_says_which() -> None:
    robot = ik_layer.load_robot("panda")
    reachable = robot.fk(robot.random_q((4, 3), generator=gen(16)))  # 4 rows of 3 goals
    goals = reachable.clone()
    goals[0, :2, 0, 3] += 5.0  # row 0: only its last goal in reach
    goals[1, :, 0, 3] += 5.0  # row 1: none in reach
    result = ik_layer.solve(robot, goals, goal_set=True, generator=gen(17))
    assert result.q.shape == (4, 7) and result.goal is not None and result.goal.shape == (4,)
    assert result.success.tolist() == [True, False, True, True]
    assert result.goal.tolist()[0] == 2 and result.goal.tolist()[2:] == [0, 0]  # "first": the first goal solved
    for row in (0, 2, 3):
        assert_reaches(robot, result.q[row : row + 1], goals[row, int(result.goal[row])][None])
    start = robot.random_q((4,), generator=gen(18))
    near = ik_layer.solve(robot, reachable, goal_set=True, objective="closest", warm_start=start, generator=gen(19))
    every = ik_layer.solve(robot, reachable, warm_start=start[:, None].expand(4, 3, 7), generator=gen(19))
    away = _distance(every.q, start[:, None], _wrapping(robot))  # each goal's answer from the same starts
    assert near.goal is not None and near.goal.tolist() == away.argmin(-1).tolist()


def test_the_gradient_of_a_goal_set_answer_is_the_reached_goal_s() -> None:
    robot = ik_layer.load_robot("ur5e")
    goals = robot.fk(robot.random_q((2,), generator=gen(20)))[None].clone()  # one row, two goals
    goals[0, 0, 0, 3] += 5.0  # out of reach: the second is reached
    goals.requires_grad_(True)
    result = ik_layer.ik_solve(robot, goals, goal_set=True, generator=gen(21))
    assert result.goal is not None and result.goal.tolist() == [1] and bool(result.success.all())
    (grad,) = torch.autograd.grad(result.q.sum(), goals)
    assert float(grad[0, 0].abs().max()) == 0.0 and float(grad[0, 1].abs().max()) > 0.1


def test_goal_sets_refuse_what_they_cannot_take() -> None:
    robot = ik_layer.load_robot("panda")
    pose = robot.fk(robot.neutral_q())
    with pytest.raises(IKLayerError, match="goal_set needs targets"):
        ik_layer.solve(robot, pose, goal_set=True)
    with pytest.raises(IKLayerError, match="num_solutions must be 1"):
        ik_layer.solve(robot, pose[None, None], goal_set=True, num_solutions=2)
    with pytest.raises(IKLayerError, match="give warm_start"):
        ik_layer.solve(robot, pose[None, None], goal_set=True, objective="closest")
    with pytest.raises(IKLayerError, match="goal_set must be True or False"):
        ik_layer.solve(robot, pose[None, None], goal_set=1)


def test_a_result_maps_each_field_it_holds() -> None:
    n = torch.arange(3)
    result = ik_layer.IKResult(n[:, None] * 1.0, n > 0, n * 0.1, n * 0.2, n, status=n + 1)
    halved = result.map(lambda x: x[:2])
    assert torch.equal(halved.q, result.q[:2]) and torch.equal(halved.status, torch.tensor([1, 2]))
    assert halved.min_distance is None and halved.closest_pair is None and halved.goal is None
