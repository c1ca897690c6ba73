"""Iteration-level scheduling over the LM kernel's slots: admit, step, retire, cancel, deadlines.

An :class:`Engine` owns a fixed pool of slots for one robot. Requests (:meth:`Engine.submit`, any
thread) wait in a queue; each :meth:`Engine.step` (one worker thread) retires what the last block
finished, admits waiting targets into free slots and advances every running slot by one block of
iterations. A target starts with one seed; while it is unsolved and its newest seed has restarted
(it stalled), it gets one more seed in a slot of its own, up to ``num_seeds``, with the iterations
left of its budget. A target retires at its first solved seed (its other seeds are freed), when all
its seeds ran out of budget, when its request is cancelled or when the request's deadline passed;
a request is answered as soon as its last target has. Requests with different options share
the pool; given free slots, a target's answer depends only on its own target, starts, options and
random streams, not on its neighbours or on when it was admitted.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ik_layer.engine.kernel import EXHAUSTED, RUNNING, SOLVED, BlockLauncher
from ik_layer.engine.slots import Slots
from ik_layer.exceptions import IKLayerError
from ik_layer.kinematics import Robot
from ik_layer.lie import pose_error
from ik_layer.options import SolveOptions
from ik_layer.solver import IKResult

__all__ = ["CANCELLED", "DEADLINE", "ROW_STATUS", "Engine", "Request"]

DEADLINE = 4  # retired when its request's deadline passed; best configuration so far
CANCELLED = 5  # retired because its request was cancelled
ROW_STATUS = {SOLVED: "solved", EXHAUSTED: "exhausted", DEADLINE: "deadline", CANCELLED: "cancelled"}
"""Final status of a row, by code, as :attr:`Request.status` holds it."""

_ids = itertools.count()


@dataclass(eq=False)
class Request:
    """One submitted batch of targets; its fields fill in as its targets retire.

    Attributes:
        target: (n, 4, 4) ``T_base_ee`` targets; weights: (n, 6).
        start: (n, k, dof) first configurations of the targets' first k seeds; seeds beyond k start random.
        posture: (n, dof) preferred configurations, or None.
        options: the solver options of every target; seed: the seed of the random starts and restarts.
        deadline: ``time.monotonic()`` after which unfinished targets retire with status DEADLINE (None: never).
        q: (n, dof) best configurations (the answer once :attr:`done` is set).
        status: (n,) int32 final status codes on the CPU (see :data:`ROW_STATUS`), ``RUNNING`` until retired.
        iterations: (n,) int64 iterations used (counted from the target's start), on the CPU.
        seeds_used: (n,) seeds started per target (1 unless the target stalled), on the CPU.
        done: set when every target has retired.
    """

    target: Tensor
    start: Tensor
    weights: Tensor
    posture: Tensor | None
    options: SolveOptions
    seed: int
    deadline: float | None
    id: int = field(default_factory=lambda: next(_ids))
    cancelled: bool = False
    admitted: int = 0  # targets whose first seed reached a slot (in order)
    retired: int = 0
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        n = self.target.shape[0]
        self.q = self.start[:, 0].clone()
        self.error = torch.full((n, 2), torch.inf, dtype=self.q.dtype, device=self.q.device)  # at q: [m], [rad]
        self.status = torch.full((n,), RUNNING, dtype=torch.int32)
        self.iterations = torch.zeros(n, dtype=torch.int64)
        self.slot = torch.full((n, self.options.num_seeds), -1, dtype=torch.long)  # slot of each running seed, CPU
        self.seeds_used = torch.zeros(n, dtype=torch.long)  # seeds started per target, CPU
        self.best_score = torch.full((n,), torch.inf, dtype=torch.float64)  # of seeds already freed, CPU
        self._errors: tuple[Tensor, Tensor] | None = None
        self._random_starts: dict[int, Tensor] = {}

    @property
    def rows(self) -> int:
        """Number of targets."""
        return self.target.shape[0]

    def seed_start(self, rows: Tensor, k: int, robot: Robot) -> Tensor:
        """Starts (len(rows), dof) of seed ``k`` of the targets ``rows``: given, or uniform in the limits."""
        if k < self.start.shape[1]:
            return self.start[rows, k]
        if k not in self._random_starts:  # drawn once for all rows: a row's start does not depend on the others
            generator = torch.Generator(device=robot.device).manual_seed(self.seed * 1_000_003 + k)
            self._random_starts[k] = robot.random_q((self.rows,), generator=generator)
        return self._random_starts[k][rows]

    def result(self) -> IKResult:
        """The answer, once :attr:`done` is set; errors are measured at the best configurations, weighted axes."""
        if self._errors is None:
            raise IKLayerError(f"request {self.id} is not finished; wait on request.done")
        device = self.q.device
        return IKResult(
            q=self.q,
            success=(self.status == SOLVED).to(device),
            position_error=self._errors[0],
            orientation_error=self._errors[1],
            iterations=self.iterations.to(device),
        )

    def finish(self, robot: Robot) -> None:
        """Set :attr:`done`; targets that never ran (cancelled in the queue) get their errors measured here."""
        unmeasured = torch.isinf(self.error[:, 0]).nonzero().squeeze(1)
        if unmeasured.numel():
            rows = unmeasured
            pose = robot.kinematics(self.q[rows], jacobian=False)[0]
            masked = pose_error(self.target[rows], pose) * (self.weights[rows] > 0)
            self.error[rows] = torch.stack((masked[:, :3].norm(dim=-1), masked[:, 3:].norm(dim=-1)), dim=-1)
        self._errors = (self.error[:, 0], self.error[:, 1])
        self.done.set()


class Engine:
    """A pool of ``capacity`` LM slots for ``robot`` and the scheduler around it.

    Args:
        robot: the robot (its dtype and device are the slots').
        capacity: slots (seeds in flight at once).
        block: iterations per launch; seeds are admitted and retired between blocks.
    """

    def __init__(self, robot: Robot, capacity: int = 1024, block: int = 8) -> None:
        if not isinstance(robot, Robot):
            raise IKLayerError(f"robot must be an ik_layer.Robot (see load_robot), got {type(robot).__name__}")
        for name, value in (("capacity", capacity), ("block", block)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise IKLayerError(f"{name} must be a positive integer, got {value!r}")
        self.robot = robot
        self.block = block
        self.slots = Slots(robot, capacity)
        self._launch = BlockLauncher(self.slots)
        self._free: deque[int] = deque(range(capacity))
        # Per slot, on the CPU: owning request id (-1: free), target row, seed index, iterations before its start.
        self._slot_request = torch.full((capacity,), -1, dtype=torch.long)
        self._slot_row = torch.zeros(capacity, dtype=torch.long)
        self._slot_seed = torch.zeros(capacity, dtype=torch.long)
        self._slot_offset = torch.zeros(capacity, dtype=torch.long)
        self._slot_may_ask = torch.zeros(capacity, dtype=torch.bool)  # newest seed of its target, more allowed
        self._active: dict[int, Request] = {}  # requests with seeds in slots, by id
        self._waiting: deque[Request] = deque()
        self._extra: deque[tuple[Request, int, int, int]] = deque()  # (request, row, seed, offset) to admit
        self._freed: list[int] = []  # slots freed during a retirement, emptied at its end
        self._lock = threading.Lock()

    def submit(
        self,
        target: Tensor,
        start: Tensor,
        options: SolveOptions,
        *,
        weights: Tensor | None = None,
        posture: Tensor | None = None,
        seed: int = 0,
        deadline: float | None = None,
    ) -> Request:
        """Queue a request (thread-safe) and return it; :meth:`step` does the work.

        Args:
            target: (n, 4, 4) checked targets on the robot's device and dtype (see :meth:`Robot.check_target`).
            start: (n, dof) or (n, k, dof) starts of the first seeds, inside the limits.
            options: budget, tolerances, restart policy and ``num_seeds`` (the most seeds per target).
            weights: (n, 6) non-negative error weights (default ones).
            posture: (n, dof) preferred configurations (pulled towards in the null space), or None.
            seed: seed of the random starts and of the restart streams.
            deadline: ``time.monotonic()`` deadline of the whole request, or None.
        """
        n = target.shape[0]
        if weights is None:
            weights = torch.ones(n, 6, dtype=self.robot.dtype, device=self.robot.device)
        if start.dim() == 2:
            start = start[:, None]
        request = Request(target, start, weights, posture, options, seed, deadline)
        if n == 0:
            request.finish(self.robot)
            return request
        with self._lock:
            self._waiting.append(request)
        return request

    def cancel(self, request: Request) -> None:
        """Retire ``request``'s targets at the next step (thread-safe); they answer with status CANCELLED."""
        with self._lock:
            request.cancelled = True

    @property
    def busy(self) -> bool:
        """Whether any target waits or runs."""
        return bool(self._waiting) or bool(self._extra) or len(self._free) < self.slots.capacity

    def step(self) -> None:
        """Retire what the last block finished (and cancelled or expired targets), admit seeds, run one block.

        Call from one worker thread only; a request is answered at the step after its last target's block.
        """
        self._retire()
        self._admit()
        if len(self._free) < self.slots.capacity:
            self._launch(self.block)

    def run(self, request: Request | None = None) -> None:
        """Step until ``request`` is done (default: until nothing waits or runs)."""
        while (request is None and self.busy) or (request is not None and not request.done.is_set()):
            self.step()

    # ----------------------------------------------------------------------------------- admission

    def _admit(self) -> None:
        with self._lock:
            groups: dict[tuple[Request, int], list[tuple[int, int]]] = {}  # (request, seed) -> [(row, offset)]
            taken = 0
            while self._extra and (taken < len(self._free) or self._extra[0][0].cancelled):  # stalled targets first
                request, row, k, offset = self._extra.popleft()
                if request.status[row] != RUNNING:
                    continue
                if request.cancelled:
                    self._cancel_seedless(request, row, offset)
                    continue
                groups.setdefault((request, k), []).append((row, offset))
                taken += 1
            for (request, k), entries in groups.items():
                rows, offsets = torch.tensor(entries, dtype=torch.long).T
                self._place(request, rows, k, offsets)
            while self._waiting and self._free:
                request = self._waiting[0]
                if request.cancelled:
                    self._waiting.popleft()
                    self._drop_unadmitted(request)
                    continue
                take = min(len(self._free), request.rows - request.admitted)
                rows = torch.arange(request.admitted, request.admitted + take)
                self._place(request, rows, 0, torch.zeros_like(rows))
                request.admitted += take
                if request.admitted == request.rows:
                    self._waiting.popleft()

    def _place(self, request: Request, rows: Tensor, k: int, offsets: Tensor) -> None:
        """Seed ``k`` of the targets ``rows`` (CPU) into free slots, ``offsets`` iterations into their budgets."""
        slots = torch.tensor([self._free.popleft() for _ in range(len(rows))])
        device = self.robot.device
        on_device, slots_on_device = rows.to(device), slots.to(device)
        extra = {} if request.posture is None else {"posture": request.posture[on_device]}
        self.slots.admit(
            slots_on_device,
            request.target[on_device],
            request.seed_start(on_device, k, self.robot),
            request.options,
            weights=request.weights[on_device],
            seed=request.seed,
            rng_offset=(on_device * request.options.num_seeds + k),
            **extra,
        )
        if k > 0:  # a later seed gets what is left of its target's budget
            self.slots.budget[slots_on_device] = (request.options.max_iterations - offsets).to(device, torch.int32)
        self._slot_request[slots] = request.id
        self._slot_row[slots] = rows
        self._slot_seed[slots] = k
        self._slot_offset[slots] = offsets
        self._slot_may_ask[slots] = k + 1 < request.options.num_seeds
        request.slot[rows, k] = slots
        request.seeds_used[rows] += 1
        self._active[request.id] = request

    def _cancel_seedless(self, request: Request, row: int, offset: int) -> None:
        """A cancelled target whose next seed never started: it answers now if no other seed of it runs or waits."""
        waiting = any(r is request and i == row for r, i, _, _ in self._extra)
        if not bool((request.slot[row] >= 0).any()) and not waiting:
            self._answer(request, torch.tensor([row]), torch.tensor([offset]), code=CANCELLED)

    def _drop_unadmitted(self, request: Request) -> None:
        """A cancelled request at the head of the queue: its targets not yet started answer CANCELLED."""
        rows = torch.arange(request.admitted, request.rows)
        request.admitted = request.rows
        self._answer(request, rows, torch.zeros_like(rows), code=CANCELLED)

    # ----------------------------------------------------------------------------------- retirement

    def _retire(self) -> None:
        if len(self._free) == self.slots.capacity:
            return
        state = torch.stack((self.slots.status, self.slots.iterations, self.slots.age)).cpu()  # one host sync
        status, iterations, age = state[0], state[1].to(torch.long), state[2].to(torch.long)
        now = time.monotonic()
        self._freed: list[int] = []
        with self._lock:
            forced = {
                rid: CANCELLED if r.cancelled else DEADLINE
                for rid, r in self._active.items()
                if r.cancelled or (r.deadline is not None and now >= r.deadline)
            }
            owner = self._slot_request
            occupied = owner >= 0
            stopped = occupied & (status != RUNNING)
            if forced:
                stopped |= occupied & torch.isin(owner, torch.tensor(list(forced)))
            self._ask_for_seeds(occupied & ~stopped, iterations, age)
            slots = stopped.nonzero().squeeze(1)
            for rid in owner[slots].unique().tolist():
                request = self._active[rid]
                mine = slots[owner[slots] == rid]
                self._retire_slots(
                    request, mine, status[mine], self._slot_offset[mine] + iterations[mine], forced.get(rid)
                )
            if self._freed:
                self.slots.retire(torch.tensor(self._freed, device=self.robot.device))

    def _ask_for_seeds(self, running: Tensor, iterations: Tensor, age: Tensor) -> None:
        """Queue one more seed for each target whose newest seed restarted, up to ``num_seeds``."""
        ask = (running & self._slot_may_ask & (iterations > age)).nonzero().squeeze(1)
        if ask.numel() == 0:
            return
        self._slot_may_ask[ask] = False
        offsets = (self._slot_offset[ask] + iterations[ask]).tolist()
        owners, rows, seeds = (x[ask].tolist() for x in (self._slot_request, self._slot_row, self._slot_seed))
        entries = zip(owners, rows, seeds, strict=True)
        for (rid, row, k), offset in zip(entries, offsets, strict=True):
            request = self._active[rid]
            if not request.cancelled and offset < request.options.max_iterations:
                self._extra.append((request, row, k + 1, offset))

    def _retire_slots(self, request: Request, slots: Tensor, codes: Tensor, used: Tensor, forced: int | None) -> None:
        """Retire the stopped ``slots`` (CPU) of ``request``: their codes, and iterations counted from target start.

        A target answers with its first solved seed; with ``forced`` (cancel, deadline) every target of these
        slots answers with its best seed so far; an exhausted seed frees its slot, and answers for its target
        when no other seed of it runs or waits.
        """
        rows = self._slot_row[slots]
        self._keep_best(request, rows, slots)
        if forced is not None:
            self._answer(request, *_most_by(rows, used), code=forced)
            return
        solved = (codes == SOLVED).nonzero().squeeze(1)
        # Seeds of one target that solved in the same block: the earliest wins, then the lowest score.
        scores = self.slots.best_score[slots[solved].to(self.robot.device)].cpu()
        solved = solved[torch.argsort(scores, stable=True)]
        solved = solved[torch.argsort(used[solved], stable=True)]
        solved_rows, first = _first_of(rows[solved])
        winners = slots[solved[first]].to(self.robot.device)
        request.q[solved_rows.to(request.q.device)] = self.slots.best_q[winners]
        request.error[solved_rows.to(request.q.device)] = self.slots.best_error[winners]
        self._answer(request, solved_rows, used[solved[first]], code=SOLVED)
        exhausted = (codes == EXHAUSTED) & ~torch.isin(rows, solved_rows)
        self._free_slots(request, slots[exhausted])
        left, most = _most_by(rows[exhausted], used[exhausted])
        still = (request.slot[left] >= 0).any(dim=1)
        if self._extra:
            waiting = torch.tensor([row for r, row, _, _ in self._extra if r is request], dtype=torch.long)
            still |= torch.isin(left, waiting)
        self._answer(request, left[~still], most[~still], code=EXHAUSTED)

    def _keep_best(self, request: Request, rows: Tensor, slots: Tensor) -> None:
        """Update the targets' best configurations with the best seeds among ``slots``."""
        scores = self.slots.best_score[slots.to(self.robot.device)].double().cpu()
        order = torch.argsort(scores)
        best_rows, first = _first_of(rows[order])
        best_slots, best_scores = slots[order][first], scores[order][first]
        better = best_scores < request.best_score[best_rows]
        rows_b, slots_b = best_rows[better], best_slots[better]
        request.best_score[rows_b] = best_scores[better]
        request.q[rows_b.to(request.q.device)] = self.slots.best_q[slots_b.to(self.robot.device)]
        request.error[rows_b.to(request.q.device)] = self.slots.best_error[slots_b.to(self.robot.device)]

    def _answer(self, request: Request, rows: Tensor, iterations: Tensor, *, code: int) -> None:
        """Retire the targets ``rows`` (CPU, unique) with ``code``, freeing every slot they hold; the request is
        answered when its last target retires."""
        if len(rows) == 0:
            return
        request.status[rows] = code
        request.iterations[rows] = iterations
        request.retired += len(rows)
        held = request.slot[rows].flatten()
        self._free_slots(request, held[held >= 0])
        if request.retired == request.rows:
            self._active.pop(request.id, None)
            request.finish(self.robot)

    def _free_slots(self, request: Request, slots: Tensor) -> None:
        """Give ``slots`` (CPU) back; the slots' status is set EMPTY for all freed slots at the end of the step."""
        request.slot[self._slot_row[slots], self._slot_seed[slots]] = -1
        self._slot_request[slots] = -1
        freed = slots.tolist()
        self._free.extend(freed)
        self._freed.extend(freed)


def _first_of(keys: Tensor) -> tuple[Tensor, Tensor]:
    """The distinct values of ``keys`` (1-D) and the position of each one's first occurrence."""
    distinct, inverse = torch.unique(keys, return_inverse=True)
    positions = torch.arange(len(keys))
    first = torch.full((len(distinct),), len(keys), dtype=torch.long).scatter_reduce(0, inverse, positions, "amin")
    return distinct, first


def _most_by(keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """The distinct values of ``keys`` (1-D, sorted) and the largest of ``values`` for each."""
    distinct, inverse = torch.unique(keys, return_inverse=True)
    most = torch.zeros(len(distinct), dtype=values.dtype).scatter_reduce(0, inverse, values, "amax", include_self=False)
    return distinct, most
