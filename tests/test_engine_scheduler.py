"""The engine's scheduler: admit while running, retire on success, budget, deadline and cancel; order independence."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import ik_layer
from ik_layer.core.problem import Problem
from ik_layer.engine import CANCELLED, DEADLINE, EMPTY, EXHAUSTED, SOLVED, Engine
from ik_layer.engine.reach import reach
from ik_layer.engine.scheduler import lone_budget
from ik_layer.model.lie import pose_error
from ik_layer.testing import solve_on_engine

pytestmark = pytest.mark.usefixtures("each_store")  # every test on both engine stores

OPTIONS = ik_layer.SolveOptions(num_seeds=1, max_iterations=200)


@pytest.fixture(scope="module")
def robot() -> ik_layer.Robot:
    return ik_layer.load_robot("ur5e")


def reachable(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Configurations inside the limits and their poses: (n, dof), (n, 4, 4)."""
    q = robot.random_q((n,), generator=torch.Generator().manual_seed(seed))
    return q, robot.fk(q)


def starts(robot: ik_layer.Robot, n: int, seed: int) -> torch.Tensor:
    return robot.random_q((n,), generator=torch.Generator().manual_seed(seed))


def unreachable(robot: ik_layer.Robot, n: int) -> torch.Tensor:
    _, target = reachable(robot, n, seed=99)
    target = target.clone()
    target[:, :3, 3] += 5.0
    return target


def assert_verified(robot: ik_layer.Robot, result: ik_layer.IKResult, target: torch.Tensor, options) -> None:
    """Reported successes meet the tolerances when recomputed; every q lies inside the limits."""
    e = pose_error(target, robot.fk(result.q))
    ok = (e[:, :3].norm(dim=-1) <= options.position_tolerance) & (
        e[:, 3:].norm(dim=-1) <= options.orientation_tolerance
    )
    assert bool((ok | ~result.success).all())
    assert bool(((result.q >= robot.lower) & (result.q <= robot.upper)).all())


def test_one_request_solves_and_frees_every_slot(robot):
    _, target = reachable(robot, 40, seed=1)
    engine = Engine(robot, capacity=16, block=8)  # fewer slots than rows: rows wait, then join
    request = engine.submit(Problem.prepare(robot, target, OPTIONS, warm_start=starts(robot, 40, seed=2)), seed=3)
    engine.run(request)
    result = request.result()
    assert request.done.is_set() and not engine.busy
    assert result.success.float().mean() >= 0.95
    assert set(request.status.tolist()) <= {SOLVED, EXHAUSTED}
    assert_verified(robot, result, target, OPTIONS)


def test_results_do_not_depend_on_admission_order_or_neighbours(robot):
    _, a_target = reachable(robot, 12, seed=4)
    _, b_target = reachable(robot, 9, seed=5)
    a_start, b_start = starts(robot, 12, seed=6), starts(robot, 9, seed=7)

    def run(order: str, capacity: int) -> dict[str, ik_layer.IKResult]:
        engine = Engine(robot, capacity=capacity, block=4)
        requests = {}
        for name in order:
            target, start = (a_target, a_start) if name == "a" else (b_target, b_start)
            requests[name] = engine.submit(
                Problem.prepare(robot, target, OPTIONS, warm_start=start), seed=11 if name == "a" else 12
            )
        engine.run()
        return {name: request.result() for name, request in requests.items()}

    first, second, alone = run("ab", 5), run("ba", 32), run("ab", 64)
    for name in "ab":
        for other in (second, alone):
            torch.testing.assert_close(first[name].q, other[name].q, rtol=0, atol=0)
            assert torch.equal(first[name].iterations, other[name].iterations)


def test_a_request_answers_while_another_still_runs(robot):
    engine = Engine(robot, capacity=32, block=4)
    hard = OPTIONS.replace(max_iterations=2000, num_seeds=2, restart_after=8)  # alone: launches to restart_after
    slow = engine.submit(
        Problem.prepare(robot, unreachable(robot, 4), hard, warm_start=starts(robot, 4, seed=8)), give_up=False
    )
    engine.step()
    q, target = reachable(robot, 3, seed=9)
    quick = engine.submit(Problem.prepare(robot, target, OPTIONS, warm_start=q))  # solved before any iteration
    engine.run(quick)
    assert quick.done.is_set() and not slow.done.is_set()
    assert quick.status.tolist() == [SOLVED] * 3 and quick.iterations.tolist() == [0, 0, 0]
    engine.run(slow)
    assert slow.status.tolist() == [EXHAUSTED] * 4 and slow.iterations.tolist() == [2000] * 4


def test_rows_with_different_options_share_blocks(robot):
    _, target = reachable(robot, 20, seed=10)
    loose = OPTIONS.replace(position_tolerance=1e-2, orientation_tolerance=1e-1)
    tight = OPTIONS.replace(position_tolerance=1e-8, orientation_tolerance=1e-7, max_iterations=300)
    engine = Engine(robot, capacity=40, block=8)
    a = engine.submit(Problem.prepare(robot, target, loose, warm_start=starts(robot, 20, seed=11)), seed=1)
    b = engine.submit(Problem.prepare(robot, target, tight, warm_start=starts(robot, 20, seed=11)), seed=1)
    engine.run()
    assert_verified(robot, a.result(), target, loose)
    assert_verified(robot, b.result(), target, tight)
    assert a.result().success.all() and b.result().success.float().mean() >= 0.9
    assert a.iterations.sum() < b.iterations.sum()  # a looser tolerance retires earlier


def test_deadline_retires_unfinished_rows_with_their_best_configuration(robot):
    engine = Engine(robot, capacity=8, block=2)
    target = unreachable(robot, 8)
    long = OPTIONS.replace(max_iterations=10_000)  # 80,000 slot-iterations: about 0.1 s
    problem = Problem.prepare(robot, target, long, warm_start=starts(robot, 8, seed=12))
    request = engine.submit(problem, deadline=time.monotonic() + 0.01, give_up=False)
    engine.run(request)  # alone: its whole budget in slices of a few ms, until the deadline
    assert request.status.tolist() == [DEADLINE] * 8
    result = request.result()
    assert not result.success.any() and bool(torch.isfinite(result.q).all())
    assert int(result.iterations.min()) > 0 and int(result.iterations.max()) < 10_000
    assert_verified(robot, result, target, OPTIONS)
    assert not engine.busy


def test_a_deadline_stops_a_long_launch_between_slices(robot):
    """A block of many slots under a deadline runs in slices of a few ms (ik_layer.engine.pace): the engine answers
    soon after the deadline however long one launch of all its slots would take; the targets solved by then are
    whole solves that answer SOLVED, the others DEADLINE."""
    n = 4000
    _, target = reachable(robot, n, seed=13)
    engine = Engine(robot, capacity=n, block=8)
    problem = Problem.prepare(robot, target, OPTIONS.replace(max_iterations=10_000, num_seeds=1))
    engine.solve(Problem.prepare(robot, target[:64], OPTIONS), seed=0, deadline=time.monotonic() + 1)  # timed
    start = time.monotonic()
    result = engine.solve(problem, seed=1, deadline=start + 0.02)
    late = time.monotonic() - start - 0.02
    whole = time.monotonic()
    engine.solve(problem, seed=1)  # the same, without a deadline: one launch
    assert late < 0.5 * (time.monotonic() - whole)  # the slices stopped long before one launch would have
    status = result.status.tolist()
    assert set(status) <= {SOLVED, DEADLINE} and 0 < status.count(SOLVED) < n
    assert_verified(robot, result, target, OPTIONS)
    assert not engine.busy


def test_rows_still_waiting_at_their_deadline_never_run(robot):
    engine = Engine(robot, capacity=2, block=2)
    busy = engine.submit(
        Problem.prepare(
            robot, unreachable(robot, 2), OPTIONS.replace(max_iterations=10_000), warm_start=starts(robot, 2, seed=15)
        )
    )
    start = starts(robot, 3, seed=16)
    late = engine.submit(
        Problem.prepare(robot, unreachable(robot, 3), OPTIONS, warm_start=start), deadline=time.monotonic() - 1
    )
    engine.step()  # `busy` fills both slots; `late` has expired in the queue
    assert late.done.is_set() and late.status.tolist() == [DEADLINE] * 3
    assert late.iterations.tolist() == [0, 0, 0]
    torch.testing.assert_close(late.q, start, rtol=0, atol=0)  # its starts, with their errors measured
    assert_verified(robot, late.result(), unreachable(robot, 3), OPTIONS)
    engine.cancel(busy)
    engine.run()
    assert not engine.busy


def test_cancel_retires_running_and_waiting_rows(robot):
    engine = Engine(robot, capacity=2, block=2)
    running = engine.submit(
        Problem.prepare(
            robot, unreachable(robot, 3), OPTIONS.replace(max_iterations=10_000), warm_start=starts(robot, 3, seed=13)
        )
    )
    waiting = engine.submit(
        Problem.prepare(robot, unreachable(robot, 2), OPTIONS, warm_start=starts(robot, 2, seed=14))
    )
    engine.step()  # two rows of `running` in slots, one waits; `waiting` has not started
    engine.cancel(waiting)
    engine.cancel(running)
    engine.run()
    assert running.status.tolist() == [CANCELLED] * 3 and waiting.status.tolist() == [CANCELLED] * 2
    assert waiting.iterations.tolist() == [0, 0] and running.iterations.tolist() == [2, 2, 0]
    assert running.done.is_set() and waiting.done.is_set() and not engine.busy


def test_a_target_cancelled_while_polishing_stands_solved(robot):
    """With a secondary term a success polishes before its slot stops; cancelled (or out of time) then, the target
    answers with its best success so far, solved."""
    q, target = reachable(robot, 4, seed=15)
    engine = Engine(robot, capacity=8, block=1)
    request = engine.submit(Problem.prepare(robot, target, OPTIONS.replace(manipulability=0.5), warm_start=q))
    engine.submit(Problem.prepare(robot, unreachable(robot, 1), OPTIONS))  # another request: blocks of one iteration
    engine.step()  # the starts (at answers) succeed and take a first polish step
    assert (engine.slots.polish_from[:4] == 0).all() and (engine.slots.status[:4] == 0).all()  # RUNNING
    engine.cancel(request)
    engine.run()
    assert request.status.tolist() == [SOLVED] * 4 and bool(request.result().success.all())
    assert_verified(robot, request.result(), target, OPTIONS)


def test_submit_from_other_threads_while_a_worker_steps(robot):
    engine = Engine(robot, capacity=16, block=4)
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            if engine.busy:
                engine.step()
            else:
                time.sleep(0.001)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        requests = []
        for k in range(6):
            _, target = reachable(robot, 5, seed=20 + k)
            requests.append(
                (
                    engine.submit(
                        Problem.prepare(robot, target, OPTIONS, warm_start=starts(robot, 5, seed=30 + k)), seed=k
                    ),
                    target,
                )
            )
        for request, _ in requests:
            assert request.done.wait(timeout=60)
    finally:
        stop.set()
        thread.join(timeout=10)
    for request, target in requests:
        assert_verified(robot, request.result(), target, OPTIONS)


def test_solving_a_problem_matches_a_direct_engine_run(robot):
    _, target = reachable(robot, 10, seed=40)
    start = starts(robot, 10, seed=41)
    direct = Engine(robot, capacity=10, block=16)
    request = direct.submit(Problem.prepare(robot, target, OPTIONS, warm_start=start), seed=5)
    direct.run(request)
    via = solve_on_engine(robot, target, OPTIONS, warm_start=start, seed=5)
    torch.testing.assert_close(via.q, request.result().q, rtol=0, atol=0)


def test_engine_arguments_are_checked(robot):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ik_layer.IKLayerError, match="capacity"):
            Engine(robot, capacity=bad)
        with pytest.raises(ik_layer.IKLayerError, match="block"):
            Engine(robot, block=bad)
    with pytest.raises(ik_layer.IKLayerError, match="robot"):
        Engine(None)  # type: ignore[arg-type]
    q, target = reachable(robot, 1, seed=1)
    request = Engine(robot).submit(Problem.prepare(robot, target, OPTIONS, warm_start=q))
    with pytest.raises(ik_layer.IKLayerError, match="not finished"):
        request.result()


def test_more_seeds_only_for_targets_that_stall(robot):
    options = OPTIONS.replace(num_seeds=3, max_iterations=120)
    engine = Engine(robot, capacity=64, block=4)
    q, easy = reachable(robot, 4, seed=50)
    at_answer = engine.submit(Problem.prepare(robot, easy, options, warm_start=q), seed=1)
    hard = engine.submit(
        Problem.prepare(robot, unreachable(robot, 4), options, warm_start=starts(robot, 4, seed=51)),
        seed=2,
        give_up=False,
    )
    engine.run()
    assert at_answer.seeds_used.tolist() == [1] * 4 and at_answer.iterations.tolist() == [0] * 4
    assert hard.seeds_used.tolist() == [3] * 4  # each stalled twice, and no more than num_seeds
    assert hard.status.tolist() == [EXHAUSTED] * 4 and hard.iterations.max() <= 120 and not engine.busy
    assert_verified(robot, hard.result(), unreachable(robot, 4), options)


def test_no_more_seeds_before_restart_after_iterations(robot):
    # Stalled seeds restart at every progress check (cost not halved), but a target gets a second seed only
    # once it has run restart_after iterations: a budget below that leaves it one seed.
    hard_targets, hard_starts = unreachable(robot, 4), starts(robot, 4, seed=52)
    engine = Engine(robot, capacity=64, block=4)
    for restart_after, budget, seeds in ((60, 56, 1), (20, 56, 3)):
        options = OPTIONS.replace(num_seeds=3, max_iterations=budget, restart_after=restart_after, check_every=4)
        request = engine.submit(
            Problem.prepare(robot, hard_targets, options, warm_start=hard_starts), seed=3, give_up=False
        )
        engine.run(request)
        assert request.seeds_used.tolist() == [seeds] * 4
        assert request.status.tolist() == [EXHAUSTED] * 4


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "scheduled"])
@pytest.mark.parametrize("name", ["panda", "ur5e"])
def test_several_seeds_reach_the_success_goal(name, alone):
    """Solved alone (a target's seeds one after another in its slot) or scheduled (a stalled target's next seed
    beside it), four seeds reach 99.9 % on reachable targets."""
    robot = ik_layer.load_robot(name)
    _, target = reachable(robot, 2000, seed=60)
    problem = Problem.prepare(robot, target, OPTIONS.replace(num_seeds=4))
    engine = Engine(robot, capacity=len(target) * 4, block=16)
    if alone:
        result = engine.solve(problem, seed=3)
    else:
        request = engine.submit(problem, seed=3)
        engine.run(request)
        result = request.result()
    assert result.success.float().mean() >= 0.999
    assert_verified(robot, result, target, OPTIONS)


# --------------------------------------------------------------------------- provable give-up


@pytest.mark.parametrize("name", [*ik_layer.builtin_robots(), "tiny"])
def test_reach_bound_holds_on_random_configurations(name, tiny_urdf):
    if name == "tiny":  # every joint kind, a prismatic one among them
        every_joint = ["j_cont", "j_side", "j_off", "j_prism", "j_neg", "j_cont_off"]
        robot = ik_layer.load_robot(tiny_urdf, "tool", active_joints=every_joint)
    else:
        robot = ik_layer.load_robot(name)
    bound = reach(robot.chains)
    tip = robot.fk(starts(robot, 10_000, seed=70))[:, :3, 3]
    farthest = float((tip - torch.from_numpy(bound.centre[0])).norm(dim=-1).max())
    assert farthest < bound.radius[0]
    assert farthest > 0.6 * bound.radius[0]  # and not a loose one
    assert reach(robot.chains).radius.tolist() == bound.radius.tolist()  # a function of the chains alone


def beyond_reach(robot: ik_layer.Robot, n: int, distance: float) -> torch.Tensor:
    """Reachable orientations placed at ``distance`` [m] from the reach centre, in random directions."""
    _, target = reachable(robot, n, seed=71)
    direction = torch.randn(n, 3, generator=torch.Generator().manual_seed(72), dtype=robot.dtype)
    target = target.clone()
    target[:, :3, 3] = (
        torch.from_numpy(reach(robot.chains).centre[0]) + distance * direction / direction.norm(dim=-1)[:, None]
    )
    return target


def test_targets_beyond_reach_give_up_early(robot):
    options = OPTIONS.replace(num_seeds=4)
    radius = float(reach(robot.chains).radius[0])
    target = beyond_reach(robot, 6, radius + 0.3)
    engine = Engine(robot, capacity=24, block=8)
    request = engine.submit(Problem.prepare(robot, target, options, warm_start=starts(robot, 6, seed=73)), seed=4)
    engine.run(request)
    result = request.result()
    assert request.unreachable.all() and request.status.tolist() == [EXHAUSTED] * 6
    assert not result.success.any() and (result.position_error >= 0.3).all()
    assert request.iterations.tolist() == [options.restart_after] * 6 and request.seeds_used.tolist() == [1] * 6
    assert_verified(robot, result, target, options)


def test_targets_just_inside_reach_are_unaffected(robot):
    options = OPTIONS.replace(num_seeds=2, max_iterations=60)
    target = beyond_reach(robot, 4, float(reach(robot.chains).radius[0]) - 1e-3)
    answers = []
    for give_up in (True, False):
        engine = Engine(robot, capacity=8, block=8)
        request = engine.submit(
            Problem.prepare(robot, target, options, warm_start=starts(robot, 4, seed=74)), seed=5, give_up=give_up
        )
        engine.run(request)
        answers.append(request)
    assert not answers[0].unreachable.any()
    torch.testing.assert_close(answers[0].result().q, answers[1].result().q, rtol=0, atol=0)
    assert answers[0].iterations.tolist() == answers[1].iterations.tolist() == [60] * 4
    assert answers[0].seeds_used.tolist() == answers[1].seeds_used.tolist()


def test_give_up_reads_only_the_weighted_position_axes(robot):
    target = beyond_reach(robot, 2, float(reach(robot.chains).radius[0]) + 0.5)
    weights = torch.tensor([[1.0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]], dtype=robot.dtype)  # row 1: orientation only
    request = Engine(robot, capacity=8).submit(
        Problem.prepare(robot, target, OPTIONS, warm_start=starts(robot, 2, seed=75), weights=weights)
    )
    assert request.unreachable.tolist() == [True, False]


def test_starts_drawn_by_the_kernel_do_not_depend_on_admission(robot):
    _, target = reachable(robot, 12, seed=70)
    options = OPTIONS.replace(num_seeds=3)

    def run(capacity: int, block: int, before: int) -> ik_layer.IKResult:
        engine = Engine(robot, capacity=capacity, block=block)
        if before:  # another request first: this one's rows take other slots
            engine.submit(Problem.prepare(robot, reachable(robot, before, seed=71)[1], options), seed=9)
        request = engine.submit(Problem.prepare(robot, target, options), seed=4)
        engine.run()
        assert bool(((request.q >= robot.lower) & (request.q <= robot.upper)).all())
        return request.result()

    first = run(12, 8, 0)
    for other in (run(40, 8, 7), run(5, 8, 3)):
        torch.testing.assert_close(first.q, other.q, rtol=0, atol=0)
        assert torch.equal(first.iterations, other.iterations)
    assert first.success.float().mean() >= 0.9
    assert_verified(robot, first, target, options)
    engine = Engine(robot, capacity=12, block=8)
    reseeded = engine.submit(Problem.prepare(robot, target, options), seed=5)
    engine.run(reseeded)
    assert not torch.equal(first.q, reseeded.result().q)  # another seed, other starts


def test_a_request_cancelled_before_it_starts_answers_without_a_start(robot):
    engine = Engine(robot, capacity=4, block=4)
    _, target = reachable(robot, 3, seed=72)
    request = engine.submit(Problem.prepare(robot, target, OPTIONS))
    engine.cancel(request)
    engine.run(request)
    assert request.status.tolist() == [CANCELLED] * 3 and not request.result().success.any()
    assert torch.equal(request.q, robot.wrap(torch.zeros(3, robot.dof, dtype=robot.dtype)))


LONE_OPTIONS = [OPTIONS, OPTIONS.replace(num_seeds=3, restart_after=12)]


def lone_problem(robot: ik_layer.Robot, options: ik_layer.SolveOptions) -> Problem:
    """12 reachable targets and 2 out of reach (given up early, as the reach test finds), with a posture that seeds
    and pulls (terms: polishing)."""
    _, target = reachable(robot, 12, seed=40)
    target = torch.cat((target, unreachable(robot, 2)))
    posture = starts(robot, 1, seed=41)[0]
    return Problem.prepare(robot, target, options.replace(centring=0.1), posture=posture)


def counted_launches(engine: Engine) -> list[int]:
    """The iterations of each of ``engine``'s launches from now on."""
    blocks: list[int] = []
    launch = engine._launch
    engine._launch = lambda block, rows, deadline: (blocks.append(block), launch(block, rows, deadline))[1]  # type: ignore[method-assign]
    return blocks


@pytest.mark.parametrize("options", LONE_OPTIONS, ids=["one", "seeds"])
def test_a_lone_request_runs_in_one_launch_with_the_answers_of_blocks(robot, options):
    """Submitted alone to an idle engine a request runs until the scheduler could first act on it (its whole budget
    with one seed; else the first block boundary at or after restart_after) in one launch; beside another request
    the same problem runs in blocks of 4 iterations: the same answers, bit for bit."""
    problem = lone_problem(robot, options)

    def solved(companion: bool) -> tuple[ik_layer.IKResult, list[int]]:
        engine = Engine(robot, capacity=64, block=4)
        blocks = counted_launches(engine)
        request = engine.submit(problem, seed=3)
        if companion:
            engine.submit(Problem.prepare(robot, unreachable(robot, 1), OPTIONS.replace(max_iterations=400)), seed=4)
        engine.run(request)
        return request.result(), blocks

    alone, alone_blocks = solved(companion=False)
    shared, shared_blocks = solved(companion=True)
    first = options.max_iterations if options.num_seeds == 1 else 12
    assert alone_blocks[0] == first and set(shared_blocks) == {4}
    assert len(alone_blocks) < len(shared_blocks)
    for name in ("q", "success", "iterations", "status", "position_error", "orientation_error"):
        assert torch.equal(getattr(alone, name), getattr(shared, name)), name
    assert alone.success[:12].float().mean() >= 0.9 and not alone.success[12:].any()
    if options.num_seeds > 1:  # some targets ran past the first launch: the scheduler took the request over
        assert bool((shared.iterations[:12] > first).any())


@pytest.mark.parametrize("options", LONE_OPTIONS, ids=["one", "seeds"])
def test_a_problem_solved_alone_runs_its_seeds_in_one_launch(robot, options):
    """``Engine.solve`` in an idle engine: one launch of :func:`lone_budget` iterations, each target's seeds one
    after another in its slot (the scheduler's answers with one seed, bit for bit), targets out of reach given up
    after ``restart_after``; verified answers, every slot freed."""
    problem = lone_problem(robot, options)
    engine = Engine(robot, capacity=64, block=4)
    blocks = counted_launches(engine)
    direct = engine.solve(problem, seed=3)
    budget = lone_budget(options)
    assert blocks == [budget] and budget == sum(max(0, options.max_iterations - k * options.restart_after)
                                                for k in range(options.num_seeds))  # fmt: skip
    assert not engine.busy and bool((engine.slots.status == EMPTY).all())
    assert bool((direct.iterations[:12] <= budget).all())
    assert bool((direct.iterations[12:] <= options.restart_after).all())
    assert direct.success[:12].float().mean() >= 0.9 and not direct.success[12:].any()
    assert_verified(robot, direct, problem.target, options)
    if options.num_seeds == 1:
        scheduled = Engine(robot, capacity=64, block=4)
        request = scheduled.submit(problem, seed=3)
        scheduled.run(request)
        for name in ("q", "success", "iterations", "status", "position_error", "orientation_error"):
            assert torch.equal(getattr(direct, name), getattr(request.result(), name)), name
    else:  # some target restarted in its slot, past the scheduler's first boundary
        assert bool((direct.iterations[:12] > 12).any())
