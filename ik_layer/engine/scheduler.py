"""Iteration-level scheduling over the LM kernel's slots: admit, step, retire, cancel, deadlines.

An :class:`Engine` owns a fixed pool of slots for one robot. Requests (:meth:`Engine.submit`, any
thread) wait in a queue; each :meth:`Engine.step` (one worker thread) retires what the last block
finished, admits waiting targets into free slots and advances every running slot by one block of
iterations. A target starts with one seed, which restarts at random when it stalls; once the target has
run ``restart_after`` iterations unsolved and its newest seed has restarted, it gets one more seed in
a slot of its own, up to ``num_seeds``, with the iterations left of its budget (seeds in parallel cut a
hard target's latency, but all but one are wasted work: most targets solve on their first seed's
restarts). A target retires at its first solved seed (its other seeds are freed), when all
its seeds ran out of budget, when its request is cancelled or when the request's deadline passed;
a request is answered as soon as its last target has. A target that lies provably out of the robot's
reach (:mod:`ik_layer.engine.reach`) gets one seed and ``restart_after`` iterations (its best
configuration points towards it) and answers EXHAUSTED. Requests with different options share
the pool; given free slots, a target's answer depends only on its own target, starts, options and
random streams, not on its neighbours or on when it was admitted.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import torch
from torch import Tensor

from ik_layer.collision.cost import CollisionCost
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.core.result import CANCELLED, DEADLINE, EXHAUSTED, ROW_STATUS, SOLVED, IKResult, frame_errors
from ik_layer.core.seeding import first_from_table
from ik_layer.engine.device.kernel import DRAWN_START, GIVEN_START, NEAREST_START, RUNNING, START_POOLS
from ik_layer.engine.launch import BlockLauncher
from ik_layer.engine.pace import Pacer
from ik_layer.engine.reach import reach
from ik_layer.engine.slots import Array, compact_index
from ik_layer.engine.store import open_store
from ik_layer.exceptions import IKLayerError
from ik_layer.model.lie import pose_error
from ik_layer.model.robot import Robot
from ik_layer.terms import term_data

__all__ = [
    "CANCELLED", "DEADLINE", "PROBE_ROWS", "ROW_STATUS",
    "Engine", "Request", "first_starts", "lone_budget", "lone_horizon",
]  # fmt: skip

PROBE_ROWS = 256
"""The targets of a request with a start pool (a collision term) admitted one block ahead of the others."""

_ids = itertools.count()


@dataclass(eq=False)
class Request:
    """One submitted problem; its fields fill in as its targets retire.

    Attributes:
        problem: the checked problem (targets, weights, starts, posture, obstacles, options), taken as it is.
        seed: the seed of the random starts and restarts.
        deadline: ``time.monotonic()`` after which unfinished targets retire with status DEADLINE (None: never).
        collision: the collision term of every target (its obstacles, self-collision), or None.
        start: (n, k, nq) first configurations of the targets' first k seeds (its warm start, then its posture
            where that seeds; the kernel brings them inside the limits as :meth:`Robot.wrap`), or None (k = 0);
            seeds beyond k start uniform in the limits, drawn by the kernel from their restart streams.
        scene: int32 (1, 2) or (n, 2): the rows (first, count) of the targets' scene (one shared, or one per
            target) in the engine's obstacle table once placed, else None.
        q: (n, nq) best configurations (the answer once :attr:`done` is set).
        done: set when every target has retired.
        unreachable: (n,) bool numpy, the targets out of the robot's reach, given a short budget (see
            :meth:`Engine.submit`); all False unless set before the request is queued.
    """

    problem: Problem
    seed: int
    deadline: float | None
    initial: Tensor = field(repr=False)  # (nq,) q before any answer, given no start
    collision: CollisionCost | None = field(default=None, repr=False)
    scene: np.ndarray | None = None
    pool: int = -1  # the engine's start pool of the request's free answers (-1: none), and how many it took
    pooled: int = 0
    id: int = field(default_factory=lambda: next(_ids))
    cancelled: bool = False
    admitted: int = 0  # targets whose first seed reached a slot (in order)
    retired: int = 0
    done: threading.Event = field(default_factory=threading.Event, repr=False)
    gains: tuple[float, ...] = ()  # each of the engine's terms' gain (set as the request opens)

    def __post_init__(self) -> None:
        problem = self.problem
        n = problem.rows
        self.options = problem.options
        self.start = first_starts(problem)
        self.given = 0 if self.start is None else self.start.shape[1]  # seeds with a given start
        # The scheduler's bookkeeping, in numpy (status, iterations and seeds_used are torch views of them).
        self.codes = np.full(n, RUNNING, dtype=np.int32)
        self.used, self.seeds, self.pending = np.zeros((3, n), dtype=np.int64)  # iterations; seeds started, queued
        self.unreachable = np.zeros(n, dtype=bool)
        self.slot = np.full((n, self.options.num_seeds), -1, dtype=np.int64)  # slot of each running seed
        self.best_score = np.full(n, np.inf)  # of the seeds already stopped
        first = self.initial.expand(n, -1) if self.start is None else self.start[:, 0]
        nq = first.shape[-1]
        # The answers, laid out as the slots' answer rows (best q, errors, least distance: one copy takes them).
        self.answer = torch.cat((first, first.new_full((n, 3), torch.inf)), -1)  # q first, errors unmeasured
        self.q, self.error = self.answer[:, :nq], self.answer[:, nq : nq + 2]  # at q: [m], [rad]
        self.moves: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, slots) whose answers are to be taken
        self.least = None  # with a collision term: the least distance at q [m] (NaN until measured) and its pair
        self.pair = None  # (the kernel's, in its sphere order, until finish)
        if self.collision is not None:
            self.least = self.answer[:, nq + 2]
            self.least.fill_(torch.nan)
            self.pair = torch.full((n, 2), -1, dtype=torch.int32, device=first.device)
        self.arrays = SimpleNamespace()  # the engine store's views of the tensors above, and its .tensor (by submit)

    @property
    def rows(self) -> int:
        """Number of targets."""
        return self.problem.rows

    @property
    def status(self) -> Tensor:
        """(n,) int32 final status codes on the CPU (see :data:`ROW_STATUS`), ``RUNNING`` until retired."""
        return torch.from_numpy(self.codes)

    @property
    def iterations(self) -> Tensor:
        """(n,) int64 iterations used (counted from the target's start), on the CPU."""
        return torch.from_numpy(self.used)

    @property
    def seeds_used(self) -> Tensor:
        """(n,) seeds started per target (1 unless the target stalled), on the CPU."""
        return torch.from_numpy(self.seeds)

    def budget(self, rows: np.ndarray) -> np.ndarray:
        """Iteration budgets of the targets ``rows``: ``restart_after`` (at most) for unreachable ones."""
        return _budgets(self.options, self.unreachable[rows])

    def result(self, batch: Sequence[int] | None = None) -> IKResult:
        """The answer, once :attr:`done` is set, each field of the targets' batch shape ``batch`` (default
        ``(n,)``); errors are measured at the best configurations, weighted axes."""
        if not self.done.is_set():
            raise IKLayerError(f"request {self.id} is not finished; wait on request.done")
        shape = (self.rows,) if batch is None else tuple(batch)
        tensor, nq = self.arrays.tensor, self.q.shape[-1]
        answer = tensor(self.arrays.answer)
        return IKResult(
            q=answer[:, :nq].reshape(*shape, nq).contiguous(),
            success=tensor((self.codes == SOLVED).reshape(shape)),
            position_error=answer[:, nq].reshape(shape),
            orientation_error=answer[:, nq + 1].reshape(shape),
            iterations=tensor(self.used.reshape(shape)),
            min_distance=None if self.least is None else answer[:, nq + 2].reshape(shape),
            closest_pair=None if self.pair is None else self.pair.reshape(*shape, 2).to(torch.long),
            status=tensor(self.codes.reshape(shape)),
        )

    def finish(self, robot: Robot, sphere_order: Tensor) -> None:
        """Set :attr:`done`; targets with no recorded seed (cancelled in the queue) get their errors measured here,
        and with collision, those the kernel did not measure their least distance; the kernel's pairs are told in
        the collision model's sphere indices (``sphere_order``: the model's index of each of the kernel's)."""
        measured = self.best_score < np.inf
        if not measured.all():
            rows = torch.from_numpy(np.flatnonzero(~measured)).to(self.q.device)
            self.q[rows] = robot.wrap(self.q[rows])  # a start as given
            pose = robot.kinematics(self.q[rows], jacobian=False)[0]
            error = pose_error(self.problem.target[rows], pose).reshape(len(rows), -1)
            weights = self.problem.weights[rows].reshape(len(rows), -1)
            self.error[rows] = torch.stack(frame_errors(error, weights), dim=-1)
        if self.collision is not None and self.least is not None and self.pair is not None:
            seen = ~torch.isnan(self.least)  # measured by the kernel: its pairs in the model's sphere indices
            self.pair[seen] = _model_pairs(self.pair[seen].long().cpu(), sphere_order).to(self.pair)
            if not bool(seen.all()):  # measured here where the kernel did not
                rows = torch.nonzero(~seen).squeeze(-1)
                least, pair = self.collision.take(rows).closest(robot, self.q[rows])
                self.least[~seen] = least
                self.pair[~seen] = pair.to(self.pair)
        self.done.set()


def first_starts(problem: Problem[Tensor | np.ndarray]) -> Tensor | None:
    """(n, k, nq) the given starts of the targets' first k seeds: the warm start, then the posture where it seeds
    (the kernel wraps them); None without (k = 0)."""
    seeding = problem.posture if problem.posture_seeds else None
    given = [x for x in (problem.warm_start, seeding) if x is not None]
    if not given:
        return None
    return given[0][:, None] if len(given) == 1 else torch.stack(given, dim=1)


def lone_horizon(options: SolveOptions, block: int) -> int:
    """Iterations of the launch that follows a request's admission into an idle engine with nothing else waiting
    (blocks of ``block`` iterations), until the scheduler could first act on it.

    The scheduler acts on a request without obstacles only to retire its targets, to give a stalled target another
    seed (at the first block boundary at or after ``restart_after`` iterations; never with ``num_seeds`` 1), or at
    its deadline or cancellation. Until then the launches of blocks and one launch of all their iterations give the
    same answers, bit for bit: such a request runs to that boundary (the whole solve for most targets) in one
    launch, with no Python between its blocks (with a deadline, in slices: :mod:`ik_layer.engine.pace`).
    """
    if options.num_seeds == 1:
        return options.max_iterations
    return min(options.max_iterations, -(-options.restart_after // block) * block)


def lone_budget(options: SolveOptions) -> int:
    """Iterations of a target solved alone (:meth:`Engine.solve`), its seeds one after another in one slot: as many
    as its ``num_seeds`` seeds could run at most on the scheduler, seed k from ``k * restart_after`` iterations to
    ``max_iterations`` (the sum over k of ``max_iterations - k * restart_after``, where positive)."""
    most, after = options.max_iterations, options.restart_after
    seeds = min(options.num_seeds, -(-most // after))
    return seeds * most - after * seeds * (seeds - 1) // 2


def _budgets(options: SolveOptions, unreachable: np.ndarray, full: int | None = None) -> np.ndarray:
    """Iteration budgets of targets: ``restart_after`` (at most) for those out of reach (``unreachable``), else
    ``full`` (default ``max_iterations``)."""
    full = options.max_iterations if full is None else full
    return np.where(unreachable, min(options.restart_after, full), full)


def _scenes_of(scene: np.ndarray | None, rows: np.ndarray) -> tuple[int, int] | np.ndarray:
    """The table rows (first, count) of the targets ``rows``' scenes: one pair for a shared scene, else (k, 2)."""
    if scene is None:
        return 0, 0
    return (int(scene[0, 0]), int(scene[0, 1])) if len(scene) == 1 else scene[rows]


def _model_pairs(pairs: Tensor, sphere_order: Tensor) -> Tensor:
    """The kernel's closest ``pairs`` (n, 2) (spheres in its order; the other an obstacle, or ``-1 - j`` for its
    sphere ``j``; -1, -1 without a pair) with the collision model's sphere indices (``sphere_order``: the model's
    index of each of the kernel's)."""
    sphere, other = pairs[:, 0], pairs[:, 1]
    found = sphere >= 0
    mapped = torch.stack(
        (
            sphere_order[sphere.clamp_min(0)],
            torch.where(other < 0, -1 - sphere_order[(-1 - other).clamp_min(0)], other),
        ),
        -1,
    )
    return torch.where(found[:, None], mapped, pairs)


class Engine:
    """A pool of ``capacity`` LM slots for ``robot`` and the scheduler around it.

    Seeds take the lowest free slots and each launch covers the slots up to the highest one in use, so
    a few targets cost little in a large pool.

    Args:
        robot: the robot (its dtype and device are the slots').
        capacity: slots (seeds in flight at once).
        block: iterations per launch; seeds are admitted and retired between blocks.
        store: how the host reaches the slots (:mod:`ik_layer.engine.store`): ``"host"`` (numpy views, CPU
            only) or ``"tensor"`` (torch indexing, any device); default ``"host"`` on the CPU, else ``"tensor"``.
            Both give the same answers.
    """

    def __init__(self, robot: Robot, capacity: int = 1024, block: int = 8, *, store: str | None = None) -> None:
        if not isinstance(robot, Robot):
            raise IKLayerError(f"robot must be an ik_layer.Robot (see load_robot), got {type(robot).__name__}")
        for name, value in (("capacity", capacity), ("block", block)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise IKLayerError(f"{name} must be a positive integer, got {value!r}")
        self.robot = robot
        self.block = block
        self.slots = open_store(robot, capacity, store)
        self._device = robot.device
        self._launch = Pacer(BlockLauncher(self.slots))
        self._reach = reach(self.slots.chains)
        self._home = robot.neutral_q()
        # Per slot, on the CPU: free, owning request id, target row, seed index, iterations before its start,
        # whether it is the newest seed of its target with more allowed, and from which iteration of its target.
        self._is_free = np.ones(capacity, dtype=bool)
        self._owner = np.full(capacity, -1, dtype=np.int64)
        self._row = np.zeros(capacity, dtype=np.int64)
        self._seed = np.zeros(capacity, dtype=np.int64)
        self._offset = np.zeros(capacity, dtype=np.int64)
        self._may_ask = np.zeros(capacity, dtype=bool)
        self._ask_from = np.zeros(capacity, dtype=np.int64)
        self._used = 0  # slots in use
        self._top = 0  # one past the highest slot in use
        self._active: dict[int, Request] = {}  # requests with seeds in slots, by id
        self._pools = list(range(START_POOLS))[::-1]  # the free start pools (the lowest taken first)
        self._waiting: deque[Request] = deque()
        self._extra: deque[tuple[Request, int, int, int]] = deque()  # (request, row, seed, offset) to admit
        self._freed: list[np.ndarray] = []  # slots freed during a retirement, emptied at its end
        self._lock = threading.Lock()

    def submit(
        self,
        problem: Problem[Tensor | np.ndarray],
        seed: int = 0,
        deadline: float | None = None,
        *,
        give_up: bool = True,
    ) -> Request:
        """Queue a checked :class:`~ik_layer.core.problem.Problem` (thread-safe) and return its request;
        :meth:`step` does the work.

        A target's first seeds start at its warm start, then its posture (where it seeds), else uniform in the
        limits, drawn on the device by the kernel; another seed starts (up to ``options.num_seeds``) when a
        target's newest one stalls. The problem is taken as it is (:meth:`Problem.prepare` checked it); with
        obstacles or ``self_collision`` the request waits in the queue until the engine's obstacle table has room
        for them.

        Args:
            problem: the targets, weights, starts, posture, obstacles and options.
            seed: seed of the random starts and of the restart streams.
            deadline: ``time.monotonic()`` deadline of the whole request, or None.
            give_up: give the targets that lie out of the robot's reach (over their weighted position axes,
                farther than the position tolerance) one seed of ``restart_after`` iterations; they cannot
                succeed, and answer EXHAUSTED with their best configuration (see :mod:`ik_layer.engine.reach`).
        """
        return self._queue(
            problem, seed, deadline, CollisionCost.of(self.robot, problem.obstacles, problem.options), give_up
        )

    def _queue(
        self,
        problem: Problem[Tensor | np.ndarray],
        seed: int,
        deadline: float | None,
        collision: CollisionCost | None,
        give_up: bool,
    ) -> Request:
        """:meth:`submit` with the problem's collision term (:meth:`CollisionCost.of`) made by the caller."""
        request = self._open(problem, seed, deadline, collision)
        n = problem.rows
        if give_up and n:
            request.unreachable = self._beyond_reach(request.problem)
        if n == 0:
            request.finish(self.robot, self.slots.sphere_order)
            return request
        with self._lock:
            self._waiting.append(request)
        return request

    def solve(self, problem: Problem[Tensor | np.ndarray], seed: int, deadline: float | None = None) -> IKResult:
        """:meth:`solve_arrays`, every field of its answer a tensor on the robot's device."""
        return self.solve_arrays(problem, seed, deadline).map(self.slots.tensor)

    def solve_arrays(
        self, problem: Problem[Tensor | np.ndarray], seed: int, deadline: float | None = None
    ) -> IKResult[Tensor | np.ndarray]:
        """Solve a checked problem here and now, by ``deadline`` (``time.monotonic()``; None: none); the caller owns
        the engine (one worker thread at a time). The answer's fields are as the engine holds them: those a solve
        alone reads off the host are numpy arrays (on the host store, all of them), for a caller that only reads
        their values (the server makes lists of them); :meth:`solve` makes them tensors.

        In an idle engine a problem without obstacles that fits in the slots, with at most one given start per
        target (a warm start, or a posture that seeds), is solved alone (:meth:`_solve_alone`): each target in one
        slot, its seeds one after another, in one launch. Otherwise it is scheduled (as :meth:`submit`, then
        :meth:`run` until it is done): a target's next seed runs beside the one that stalled. The two give
        different answers of the same success rates (``bench/ik_vs_peers.py``), each reproducible for a ``seed``.
        """
        collision = CollisionCost.of(self.robot, problem.obstacles, problem.options)
        if collision is None and not self.busy and 0 < problem.rows <= self.slots.capacity:
            start = first_starts(problem)
            if start is None or start.shape[1] == 1:
                return self._solve_alone(problem, start, seed, deadline)
        request = self._queue(problem, seed, deadline, collision, give_up=True)
        self.run(request)
        return request.result(problem.batch)

    def _solve_alone(
        self, problem: Problem[Tensor | np.ndarray], start: Tensor | None, seed: int, deadline: float | None
    ) -> IKResult[Tensor | np.ndarray]:
        """``problem`` in an idle engine, from its targets' given ``start`` (n, 1, nq) or random ones: each target
        in one slot (from the restart stream of its first seed on the scheduler), where the kernel restarts a
        stalled seed at random, within :func:`lone_budget` iterations (``restart_after`` for a target out of
        reach), all in one launch; the answers read from the slots. Only a ``deadline`` that stops the launch
        first leaves targets running: the scheduler takes the request over, with no more seeds, to retire them."""
        options, slots, n = problem.options, self.slots, problem.rows
        target, weights = slots.array(problem.target), slots.array(problem.weights)
        unreachable = self._reach.beyond(target, weights, options.position_tolerance)
        placed = slice(0, n)
        gains = slots.gains_of(problem)  # (refuses a term added after the engine was built)
        slots.forget_terms()
        given = slots.pack(target, None if start is None else start[:, 0], weights=weights,
                           data=term_data(problem.posture, problem.terms), into=placed)  # fmt: skip
        budget = lone_budget(options)
        kind = GIVEN_START if start is not None else self._first_draw(problem, None)
        slots.place(
            placed, None, options, gains=gains, start=kind, seed=seed,
            rng_offset=np.arange(n) * options.num_seeds,  # as the scheduler's (target, seed 0)
            budget=_budgets(options, unreachable, budget) if np.count_nonzero(unreachable) else budget,
        )  # fmt: skip
        self._launch(budget, n, deadline)
        status, iterations, _, _ = slots.read(n)
        if np.count_nonzero(status == RUNNING):  # stopped by the deadline: the scheduler retires them there
            request = self._open(problem, seed, deadline, None, slots.copy(given))  # (the slots are reused)
            request.unreachable, request.scene, request.admitted = unreachable, np.zeros((1, 2), dtype=np.int32), n
            none = np.zeros(n, dtype=np.int64)
            self._hold(request, np.arange(n), placed, np.arange(n), none, none, more_seeds=False)
            self.run(request)
            return request.result(problem.batch)
        batch, nq = problem.batch, self.robot.nq
        answer = slots.rows_of["answer"]
        error = slots.copy(answer[:n, nq : nq + 2])
        result: IKResult[Tensor | np.ndarray] = IKResult(
            q=slots.copy(answer[:n, :nq]).reshape(*batch, nq),
            success=(status == SOLVED).reshape(batch),
            position_error=error[:, 0].reshape(batch),
            orientation_error=error[:, 1].reshape(batch),
            iterations=iterations.astype(np.int64).reshape(batch),
            status=status.reshape(batch),
        )
        slots.retire(placed)
        return result

    def _open(
        self,
        host_problem: Problem[Tensor | np.ndarray],
        seed: int,
        deadline: float | None,
        collision: CollisionCost | None,
        given: Array | None = None,
    ) -> Request:
        """A new request of ``host_problem`` (its targets and weights made tensors where they are host arrays), with
        the store's arrays of its tensors and its ``given`` rows (packed here unless given: :meth:`Slots.pack`)."""
        problem = host_problem.on_device(self.robot)
        request = Request(problem, seed, deadline, self._home, collision)
        store, arrays = self.slots, request.arrays
        arrays.start = None if request.start is None else store.array(request.start)
        arrays.q, arrays.answer = store.array(request.q), store.array(request.answer)
        arrays.pair = None if request.pair is None else store.array(request.pair)
        request.gains = store.gains_of(problem)  # (refuses a term added after the engine was built)
        if given is None:
            start = None if request.start is None else request.start[:, 0]
            data = term_data(problem.posture, problem.terms)
            given = store.pack(problem.target, start, weights=problem.weights, data=data)
        arrays.given = given
        arrays.tensor = store.tensor
        return request

    def _beyond_reach(self, problem: Problem[Tensor | np.ndarray]) -> np.ndarray:
        """(n,) bool: the targets of ``problem`` that lie out of the robot's reach (:mod:`ik_layer.engine.reach`)."""
        store = self.slots
        return self._reach.beyond(
            store.array(problem.target), store.array(problem.weights), problem.options.position_tolerance
        )

    def cancel(self, request: Request) -> None:
        """Retire ``request``'s targets at the next step (thread-safe); they answer with status CANCELLED."""
        with self._lock:
            request.cancelled = True

    def serves(self, robot: Robot) -> bool:
        """Whether this engine solves for ``robot`` as it is now: built for it, and it has not moved to another
        device or dtype since (its slots stay where they were made)."""
        return robot is self.robot and self.slots.device == robot.device and self.slots.dtype == robot.dtype

    @property
    def seconds_per_iteration(self) -> float | None:
        """Seconds per slot-iteration of this engine's launches as last timed (on the CPU, under a deadline:
        :mod:`ik_layer.engine.pace`); None before."""
        return self._launch.seconds_per_iteration

    @property
    def busy(self) -> bool:
        """Whether any target waits or runs."""
        return bool(self._waiting) or bool(self._extra) or self._used > 0

    def step(self) -> None:
        """Retire what the last block finished (and cancelled or expired targets), admit seeds, run one block.

        Call from one worker thread only; a request is answered at the step after its last target's block.
        """
        self._retire()
        idle = not self._used
        if idle:  # nothing runs: the next admissions bring their own secondary terms
            self.slots.forget_terms()
        self._admit()
        if self._used:
            self._launch(self._horizon() if idle else self.block, self._top, self._deadline())

    def _horizon(self) -> int:
        """Iterations of the launch that follows admissions into an idle engine: :attr:`block`, or for a lone
        request without obstacles :func:`lone_horizon` (a request with obstacles is never lone: its seeds stuck in
        collision wait for the next block's start pool)."""
        if self._waiting or self._extra or len(self._active) != 1:
            return self.block
        request = next(iter(self._active.values()))
        if request.collision is not None:
            return self.block
        return lone_horizon(request.options, self.block)

    def _deadline(self) -> float | None:
        """The earliest deadline of the requests running in the slots (the launch stops there), or None."""
        deadlines = [r.deadline for r in self._active.values() if r.deadline is not None]
        return min(deadlines) if deadlines else None

    def run(self, request: Request | None = None) -> None:
        """Step until ``request`` is done (default: until nothing waits or runs)."""
        while (request is None and self.busy) or (request is not None and not request.done.is_set()):
            self.step()

    # ----------------------------------------------------------------------------------- admission

    def _admit(self) -> None:
        """Place the seeds that wait: stalled targets' next seeds first, then the queue's targets in order; each
        request's seeds of the step in one placement (:meth:`_place`)."""
        with self._lock:
            places: dict[int, tuple[Request, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]] = {}
            taken = 0
            free = self.slots.capacity - self._used
            while self._extra and (taken < free or self._extra[0][0].cancelled):  # stalled targets first
                request, row, k, offset = self._extra.popleft()
                request.pending[row] -= 1
                if request.codes[row] != RUNNING:
                    continue
                if request.cancelled:
                    self._cancel_seedless(request, row, offset)
                    continue
                places.setdefault(request.id, (request, []))[1].append(
                    (np.array([row]), np.array([k]), np.array([offset]))
                )
                taken += 1
            now = time.monotonic()
            while self._waiting:
                request = self._waiting[0]
                expired = request.deadline is not None and now >= request.deadline
                if request.cancelled or expired:  # its targets not started yet never run
                    self._waiting.popleft()
                    self._drop_unadmitted(request, CANCELLED if request.cancelled else DEADLINE)
                    continue
                if self._used + taken >= self.slots.capacity or not self._place_scene(request):
                    break
                take = min(self.slots.capacity - self._used - taken, request.rows - request.admitted)
                probing = request.pool >= 0 and request.admitted == 0 and take > PROBE_ROWS
                if probing:  # a few first: their free answers fill the start pool the others' random seeds draw on
                    take = PROBE_ROWS
                rows, none = np.arange(request.admitted, request.admitted + take), np.zeros(take, dtype=np.int64)
                places.setdefault(request.id, (request, []))[1].append((rows, none, none))
                taken += take
                request.admitted += take
                if request.admitted == request.rows:
                    self._waiting.popleft()
                if probing:  # the rest from the next step on, after a block of the probe's
                    break
            for request, parts in places.values():
                rows, seeds, offsets = (np.concatenate(part) for part in zip(*parts, strict=True))
                self._place(request, rows, seeds, offsets)

    def _place_scene(self, request: Request) -> bool:
        """Whether ``request``'s obstacles are in the obstacle table, placing them there if there is room."""
        if request.scene is None:
            if request.collision is None:
                request.scene = np.zeros((1, 2), dtype=np.int32)
            else:
                request.scene = self.slots.obstacles.add(request.collision.obstacles)
                if request.scene is not None and self._pools:
                    request.pool = self._pools.pop()
                    self.slots.empty_starts(request.pool)
        return request.scene is not None

    def _place(self, request: Request, rows: np.ndarray, seeds: np.ndarray, offsets: np.ndarray) -> None:
        """Seeds ``seeds`` of the targets ``rows`` (distinct) into the lowest free slots, ``offsets`` iterations into
        their budgets."""
        count = len(rows)
        if self._used == self._top:  # no free slot below the highest in use: the next ones
            slots = np.arange(self._top, self._top + count)
            into: slice | np.ndarray = slice(self._top, self._top + count)
        else:
            slots = np.flatnonzero(self._is_free[: self._top + count])[:count]  # all free from _top on
            into = compact_index(slots)
        at = compact_index(rows)
        budget = request.budget(rows) - offsets  # what is left of the targets' budgets
        arrays = request.arrays
        later = (seeds > 0) & (seeds < request.given)  # a given start other than the packed one: the posture's
        self.slots.place(
            into, arrays.given, request.options, of=at, gains=request.gains,
            start=self._start_kinds(request, seeds), seed=request.seed,
            rng_offset=rows * request.options.num_seeds + seeds,
            scene=_scenes_of(request.scene, rows), pool=request.pool, budget=budget,
        )  # fmt: skip
        if later.any():
            index = self.slots.index
            self.slots.fields["q"][index(slots[later])] = arrays.start[index(rows[later]), index(seeds[later])]
        self._hold(request, rows, into, slots, seeds, offsets)

    def _first_draw(self, problem: Problem[Tensor | np.ndarray], collision: CollisionCost | None) -> int:
        """How the first seed of a target of ``problem`` (with ``collision``) without a given start starts: at the
        seed table's nearest configuration where the robot has a table (no floating base) and
        :func:`~ik_layer.core.seeding.first_from_table`, else drawn at random."""
        nearest = self.slots.table is not None and first_from_table(problem, collision is not None)
        return NEAREST_START if nearest else DRAWN_START

    def _start_kinds(self, request: Request, seeds: np.ndarray) -> int | np.ndarray:
        """How the seeds ``seeds`` of ``request``'s targets start (one for all where they agree): given (its first
        ones), :meth:`_first_draw` (the first of a target without a given start), else drawn at random."""
        first = GIVEN_START if request.given else self._first_draw(request.problem, request.collision)
        if not seeds.any():  # (most placements: every target's first seed)
            return first
        kinds = np.where(seeds < request.given, GIVEN_START, DRAWN_START)
        kinds[seeds == 0] = first
        return kinds

    def _hold(
        self,
        request: Request,
        rows: np.ndarray,
        into: slice | np.ndarray,
        slots: np.ndarray,
        seeds: np.ndarray,
        offsets: np.ndarray,
        *,
        more_seeds: bool = True,
    ) -> None:
        """Record seeds ``seeds`` of the targets ``rows`` (distinct) as running in ``slots`` (``into``: the same,
        compact), ``offsets`` iterations into their budgets; targets in reach may ask for more seeds (up to
        ``num_seeds``) unless not ``more_seeds``."""
        count = len(rows)
        at = compact_index(rows)
        unreachable = request.unreachable[at]
        self._is_free[into] = False
        self._used += count
        self._top = max(self._top, int(slots.max()) + 1)
        self._owner[into] = request.id
        self._row[into] = rows
        self._seed[into] = seeds
        self._offset[into] = offsets
        self._may_ask[into] = (seeds + 1 < request.options.num_seeds) & ~unreachable & more_seeds
        self._ask_from[into] = request.options.restart_after
        request.slot[rows, seeds] = slots
        request.seeds[at] += 1
        self._active[request.id] = request

    def _cancel_seedless(self, request: Request, row: int, offset: int) -> None:
        """A cancelled target whose next seed never started: it answers now if no other seed of it runs or waits."""
        if not (request.slot[row] >= 0).any() and not request.pending[row]:
            self._answer(request, np.array([row]), np.array([offset]), code=CANCELLED)

    def _drop_unadmitted(self, request: Request, code: int) -> None:
        """A cancelled or expired request at the head of the queue: its targets not yet started answer ``code``
        (CANCELLED or DEADLINE) at their starts."""
        rows = np.arange(request.admitted, request.rows)
        request.admitted = request.rows
        self._answer(request, rows, np.zeros_like(rows), code=code)

    # ----------------------------------------------------------------------------------- retirement

    def _retire(self) -> None:
        if not self._used:
            return
        top = self._top
        status, iterations, age, score = self.slots.read(top)
        now = time.monotonic()
        self._freed = []
        with self._lock:
            forced = {
                rid: CANCELLED if r.cancelled else DEADLINE
                for rid, r in self._active.items()
                if r.cancelled or (r.deadline is not None and now >= r.deadline)
            }
            owner = self._owner[:top]
            occupied = owner >= 0
            stopped = occupied & (status != RUNNING)
            if forced:
                stopped |= occupied & np.isin(owner, list(forced))
            restarted = self._may_ask[:top] & (iterations > age)  # mostly none: seeds that did not restart
            if restarted.any():
                self._ask_for_seeds(restarted & occupied & ~stopped, iterations)
            slots = np.flatnonzero(stopped)
            if slots.size:
                scores = score[slots].astype(np.float64, copy=False)
                owners = owner[slots]
                first = int(owners[0])
                if len(owners) == 1 or bool((owners == first).all()):  # one request's slots (slice: no copies)
                    groups: list[tuple[int, slice | np.ndarray]] = [(first, slice(None))]
                else:
                    groups = [(rid, owners == rid) for rid in np.unique(owners).tolist()]
                for rid, mine in groups:
                    held = slots[mine]
                    used = self._offset[held] + iterations[held]
                    request = self._active[rid]
                    self._retire_slots(request, held, status[held], used, scores[mine], forced.get(rid))
                    self._flush_best(request)
            if self._freed:
                freed = np.concatenate(self._freed)
                self.slots.retire(freed)
                self._top = int(np.flatnonzero(~self._is_free[:top])[-1]) + 1 if self._used else 0

    def _ask_for_seeds(self, restarted: np.ndarray, iterations: np.ndarray) -> None:
        """Queue one more seed for each target whose newest seed restarted and runs on (``restarted``, per slot
        below the top) once the target ran ``restart_after`` iterations, up to ``num_seeds``."""
        top = len(restarted)
        elapsed = self._offset[:top] + iterations
        ask = np.flatnonzero(restarted & (elapsed >= self._ask_from[:top]))
        if ask.size == 0:
            return
        self._may_ask[ask] = False
        offsets = elapsed[ask].tolist()
        entries = zip(self._owner[ask].tolist(), self._row[ask].tolist(), self._seed[ask].tolist(), strict=True)
        for (rid, row, k), offset in zip(entries, offsets, strict=True):
            request = self._active[rid]
            if not request.cancelled and offset < request.options.max_iterations:
                self._extra.append((request, row, k + 1, offset))
                request.pending[row] += 1

    def _retire_slots(
        self,
        request: Request,
        slots: np.ndarray,
        codes: np.ndarray,
        used: np.ndarray,
        scores: np.ndarray,
        forced: int | None,
    ) -> None:
        """Retire the stopped ``slots`` of ``request``: their codes, iterations counted from target start, scores.

        A target answers with its first solved seed; with ``forced`` (cancel, deadline) every target of
        these slots answers with its best seed so far (solved if that seed met the tolerances, polishing); an
        exhausted seed frees its slot, and answers for its target when no other seed of it runs or waits.
        """
        rows = self._row[slots]
        if forced is None and len(slots) == 1 and codes[0] == SOLVED:  # the common case: one seed solved
            request.best_score[rows] = np.minimum(request.best_score[rows], scores)
            self._take_best(request, rows, slots)
            self._answer(request, rows, used, code=SOLVED)
            return
        self._keep_best(request, rows, slots, scores)
        if forced is not None:  # a target whose seed already succeeded (and was polishing) stands solved
            rows, used = _most_by(rows, used)
            succeeded = request.best_score[rows] < 1
            self._answer(request, rows[succeeded], used[succeeded], code=SOLVED)
            self._answer(request, rows[~succeeded], used[~succeeded], code=forced)
            return
        solved = np.flatnonzero(codes == SOLVED)
        exhausted = codes == EXHAUSTED
        if solved.size == 1:
            solved_rows, winners = rows[solved], solved
        elif solved.size:
            # Seeds of one target that solved in the same block: the earliest wins, then the lowest score.
            solved = solved[np.lexsort((scores[solved], used[solved]))]
            solved_rows, first = np.unique(rows[solved], return_index=True)
            winners = solved[first]
        if solved.size:
            self._take_best(request, solved_rows, slots[winners])
            self._answer(request, solved_rows, used[winners], code=SOLVED)
            exhausted &= request.codes[rows] == RUNNING  # not the targets just solved
        if not exhausted.any():
            return
        self._free_slots(request, slots[exhausted])
        left, most = _most_by(rows[exhausted], used[exhausted])
        still = (request.slot[left] >= 0).any(axis=1) | (request.pending[left] > 0)
        self._answer(request, left[~still], most[~still], code=EXHAUSTED)

    def _keep_best(self, request: Request, rows: np.ndarray, slots: np.ndarray, scores: np.ndarray) -> None:
        """Update the targets' best configurations with the best seeds among ``slots`` (of ``scores``)."""
        if len(rows) == 1:
            if scores[0] < request.best_score[rows[0]]:
                request.best_score[rows] = scores
                self._take_best(request, rows, slots)
            return
        order = np.argsort(scores, kind="stable")
        best_rows, first = np.unique(rows[order], return_index=True)
        best = order[first]
        better = scores[best] < request.best_score[best_rows]
        rows_b, best_b = best_rows[better], best[better]
        request.best_score[rows_b] = scores[best_b]
        self._take_best(request, rows_b, slots[best_b])

    def _take_best(self, request: Request, rows: np.ndarray, slots: np.ndarray) -> None:
        """``request``'s q and errors of the targets ``rows`` from the best configurations of ``slots``: taken at
        :meth:`_flush_best`, all of a step's in one copy."""
        if len(rows):
            request.moves.append((rows, slots))

    def _flush_best(self, request: Request) -> None:
        """Take the answers :meth:`_take_best` noted for ``request`` (a target noted twice: the later)."""
        if not request.moves:
            return
        rows, slots = (np.concatenate(part) for part in zip(*request.moves, strict=True))
        if len(request.moves) > 1:
            last = len(rows) - 1 - np.unique(rows[::-1], return_index=True)[1]
            rows, slots = rows[last], slots[last]
        request.moves = []
        self.slots.take_best(request.arrays.answer, rows, slots, request.arrays.pair)

    def _answer(self, request: Request, rows: np.ndarray, iterations: np.ndarray, *, code: int) -> None:
        """Retire the targets ``rows`` (unique) with ``code``, freeing every slot they hold; the request is
        answered when its last target retires."""
        if len(rows) == 0:
            return
        request.codes[rows] = code
        request.used[rows] = iterations
        request.retired += len(rows)
        if (code == SOLVED and request.pool >= 0) or request.retired == request.rows:  # reads the answers
            self._flush_best(request)
        if code == SOLVED and request.pool >= 0:  # free answers: starts for its seeds stuck in collision
            self.slots.add_starts(request.pool, request.pooled, request.arrays.q[self.slots.index(rows)])
            request.pooled += len(rows)
        held = request.slot[rows].ravel()
        self._free_slots(request, held[held >= 0])
        if request.retired == request.rows:
            self._active.pop(request.id, None)
            if request.scene is not None:
                self.slots.obstacles.release(request.scene)
            if request.pool >= 0:
                self._pools.append(request.pool)
            request.finish(self.robot, self.slots.sphere_order)

    def _free_slots(self, request: Request, slots: np.ndarray) -> None:
        """Give ``slots`` back; the slots' status is set EMPTY for all freed slots at the end of the step."""
        if slots.size == 0:
            return
        request.slot[self._row[slots], self._seed[slots]] = -1
        self._owner[slots] = -1
        self._is_free[slots] = True
        self._used -= len(slots)
        self._freed.append(slots)


def _most_by(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``keys`` (1-D, sorted) and the largest of ``values`` for each."""
    if len(keys) == 1:
        return keys, values
    distinct, inverse = np.unique(keys, return_inverse=True)
    most = np.zeros(len(distinct), dtype=values.dtype)
    np.maximum.at(most, inverse, values)
    return distinct, most
