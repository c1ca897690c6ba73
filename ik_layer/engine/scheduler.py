"""Iteration-level scheduling over the LM kernel's slots: admit, step, retire, cancel, deadlines.

An :class:`Engine` owns a fixed pool of slots for one robot. Requests (:meth:`Engine.submit`, any
thread) wait in a queue; each :meth:`Engine.step` (one worker thread) admits waiting rows into free
slots, advances every running slot by one block of iterations; at the next step the rows that
finished, ran out of budget, belong to a cancelled request or passed their request's deadline
retire, and a request is answered as soon as its last row has. Rows of different requests, with different options, share
the pool; a row's answer depends only on its own target, start, options and random stream, not on
which slots it shares a block with or when it was admitted.
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
    """One submitted batch of targets; its fields fill in as its rows retire.

    Attributes:
        target: (n, 4, 4) ``T_base_ee`` targets; start: (n, dof) first configurations; weights: (n, 6).
        options: the solver options of every row; seed: the seed of the rows' restart streams.
        deadline: ``time.monotonic()`` after which unfinished rows retire with status DEADLINE (None: never).
        q: (n, dof) best configurations so far (the answer once :attr:`done` is set).
        status: (n,) int32 final status codes on the CPU (see :data:`ROW_STATUS`), ``RUNNING`` until retired.
        iterations: (n,) int64 iterations used, on the CPU.
        done: set when every row has retired.
    """

    target: Tensor
    start: Tensor
    weights: Tensor
    options: SolveOptions
    seed: int
    deadline: float | None
    id: int = field(default_factory=lambda: next(_ids))
    cancelled: bool = False
    admitted: int = 0  # rows handed to slots so far (rows are admitted in order)
    retired: int = 0
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        n = self.start.shape[0]
        self.q = self.start.clone()
        self.status = torch.full((n,), RUNNING, dtype=torch.int32)
        self.iterations = torch.zeros(n, dtype=torch.int64)
        self._errors: tuple[Tensor, Tensor] | None = None

    @property
    def rows(self) -> int:
        """Number of targets."""
        return self.target.shape[0]

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
        """Measure the errors at the answers and set :attr:`done`."""
        masked = pose_error(self.target, robot.kinematics(self.q, jacobian=False)[0]) * (self.weights > 0)
        self._errors = (masked[:, :3].norm(dim=-1), masked[:, 3:].norm(dim=-1))
        self.done.set()


class Engine:
    """A pool of ``capacity`` LM slots for ``robot`` and the scheduler around it.

    Args:
        robot: the robot (its dtype and device are the slots').
        capacity: slots (rows in flight at once).
        block: iterations per launch; rows are admitted and retired between blocks.
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
        self._slot_request = torch.full((capacity,), -1, dtype=torch.long)  # request id per slot (-1: free), CPU
        self._slot_row = torch.zeros(capacity, dtype=torch.long)  # row of that request, CPU
        self._active: dict[int, Request] = {}  # requests with rows in slots, by id
        self._waiting: deque[Request] = deque()
        self._lock = threading.Lock()

    def submit(
        self,
        target: Tensor,
        start: Tensor,
        options: SolveOptions,
        *,
        weights: Tensor | None = None,
        seed: int = 0,
        deadline: float | None = None,
    ) -> Request:
        """Queue a request (thread-safe) and return it; :meth:`step` does the work.

        Args:
            target: (n, 4, 4) checked targets on the robot's device and dtype (see :meth:`Robot.check_target`).
            start: (n, dof) first configurations, inside the limits.
            options: the rows' budget, tolerances and restart policy.
            weights: (n, 6) non-negative error weights (default ones).
            seed: seed of the rows' restart streams (row i uses stream ``(seed, i)``).
            deadline: ``time.monotonic()`` deadline of the whole request, or None.
        """
        n = target.shape[0]
        if weights is None:
            weights = torch.ones(n, 6, dtype=self.robot.dtype, device=self.robot.device)
        request = Request(target, start, weights, options, seed, deadline)
        if n == 0:
            request.finish(self.robot)
            return request
        with self._lock:
            self._waiting.append(request)
        return request

    def cancel(self, request: Request) -> None:
        """Retire ``request``'s rows at the next step (thread-safe); they answer with status CANCELLED."""
        with self._lock:
            request.cancelled = True

    @property
    def busy(self) -> bool:
        """Whether any row waits or runs."""
        return bool(self._waiting) or len(self._free) < self.slots.capacity

    def step(self) -> None:
        """Retire what the last block finished (and cancelled or expired rows), admit waiting rows, run one block.

        Call from one worker thread only; a request is answered at the step after its last row's block.
        """
        self._retire()
        self._admit()
        if len(self._free) < self.slots.capacity:
            self._launch(self.block)

    def run(self, request: Request | None = None) -> None:
        """Step until ``request`` is done (default: until nothing waits or runs)."""
        while (request is None and self.busy) or (request is not None and not request.done.is_set()):
            self.step()

    def _admit(self) -> None:
        with self._lock:
            while self._waiting and self._free:
                request = self._waiting[0]
                if request.cancelled:
                    self._waiting.popleft()
                    self._finish_unadmitted(request)
                    continue
                take = min(len(self._free), request.rows - request.admitted)
                slots = [self._free.popleft() for _ in range(take)]
                rows = range(request.admitted, request.admitted + take)
                index = torch.tensor(slots, device=self.robot.device)
                row_index = torch.arange(rows.start, rows.stop, device=self.robot.device)
                self.slots.admit(
                    index,
                    request.target[row_index],
                    request.start[row_index],
                    request.options,
                    weights=request.weights[row_index],
                    seed=request.seed,
                    rng_offset=row_index,
                )
                self._slot_request[slots] = request.id
                self._slot_row[slots] = torch.arange(rows.start, rows.stop)
                self._active[request.id] = request
                request.admitted += take
                if request.admitted == request.rows:
                    self._waiting.popleft()

    def _retire(self) -> None:
        if len(self._free) == self.slots.capacity:
            return
        status = self.slots.status.cpu()  # the one host sync per step
        now = time.monotonic()
        finished: list[Request] = []
        with self._lock:
            forced = {
                rid: CANCELLED if r.cancelled else DEADLINE
                for rid, r in self._active.items()
                if r.cancelled or (r.deadline is not None and now >= r.deadline)
            }
            occupied = self._slot_request >= 0
            leaving = occupied & (status != RUNNING)
            if forced:
                leaving |= occupied & torch.isin(self._slot_request, torch.tensor(list(forced)))
            slots = leaving.nonzero().squeeze(1)
            if slots.numel() == 0:
                return
            owners, rows, codes = self._slot_request[slots], self._slot_row[slots], status[slots]
            device_slots = slots.to(self.robot.device)
            best_q, iterations = self.slots.best_q[device_slots], self.slots.iterations[device_slots].cpu()
            self.slots.retire(device_slots)
            self._slot_request[slots] = -1
            self._free.extend(slots.tolist())
            for rid in owners.unique().tolist():
                request = self._active[rid]
                mine = owners == rid
                row = rows[mine]
                code = codes[mine]
                request.q[row.to(request.q.device)] = best_q[mine.to(best_q.device)]
                request.iterations[row] = iterations[mine].to(torch.int64)
                request.status[row] = torch.where(code == RUNNING, forced.get(rid, RUNNING), code)
                request.retired += int(mine.sum())
                if request.retired == request.rows:
                    del self._active[rid]
                    finished.append(request)
        for request in finished:
            request.finish(self.robot)

    def _finish_unadmitted(self, request: Request) -> None:
        """A cancelled request at the head of the queue: its rows not yet in slots answer CANCELLED at their start."""
        request.status[request.admitted :] = CANCELLED
        request.retired += request.rows - request.admitted
        request.admitted = request.rows
        if request.retired == request.rows:
            request.finish(self.robot)
