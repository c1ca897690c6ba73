"""Continuous batching: one robot's solver engine, stepping in a thread of its own, shared by every request.

An :class:`EngineWorker` owns the robot's :class:`~ik_layer.engine.Engine`. Routes :meth:`~EngineWorker.submit`
a job (on the event loop, which runs no torch but for one case below) and await its ticket's future. The worker
thread only schedules; what it does to a request's data goes through the stages of
:class:`~ik_layer.server.stages.IKStages` (decode -> submit -> collect -> encode). It loops: decode the requests
that may start, submit parts of the waiting ones (as many rows as :class:`~ik_layer.server.admission.AdmissionPolicy`
allots), run one step of the engine, collect and encode the answer of every request whose rows have all retired
(its JSON body, built off the event loop). No request waits for another's tail, and requests with different options
share the engine. A request for several solutions (:attr:`~ik_layer.server.decode.IKJob.searches`) runs its
search's rounds one after another, each handed over in parts like any request's rows.

The one case: a small request that finds the worker idle, whose whole budget the engine's own timing puts under
:data:`HERE_SECONDS`, is solved at once by :meth:`~EngineWorker.submit` on the event loop, through the same stages:
two thread hand-overs cost a lone request more than such a solve (0.3-0.4 ms of a single-pose request's 1 ms
over ``/health`` in ``bench/server_load.py``), and the loop is held for about that budget at most. Off the CPU the
engine is never timed, so every request goes to the worker thread.

Bounds, so that no request can cost without limit:

* a request is handed to the engine in parts; a part of ``r`` rows claims ``r * num_seeds`` slots (its
  worst case), and one request claims at most its share of the slots (:mod:`ik_layer.server.admission`), so
  others always find room;
* every request has a deadline: at it, its unfinished rows retire with their best configuration so far
  (status ``deadline``); rows never started retire without running;
* what may wait or solve per robot is bounded in requests (``queue_limit``) and in work
  (rows x frames x seeds x iterations, ``max_work``: a target of F end-effector frames costs about F times
  one frame's per iteration; a search's rows are those of all its rounds at most); a request over ``max_work``
  alone is refused (413), one that does not fit now gets 503;
* a cancelled request (its client left) retires at the next block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from torch import Tensor

from ik_layer import IKLayerError, IKResult, Problem, Robot
from ik_layer.core.solutions import SolutionSearch
from ik_layer.engine import ROW_STATUS, Engine, Request, lone_budget
from ik_layer.server.admission import AdmissionPolicy, Demand
from ik_layer.server.decode import IKJob
from ik_layer.server.exceptions import ServiceUnavailable, TooMuchWork
from ik_layer.server.metrics import Metrics
from ik_layer.server.stages import IKStages

__all__ = ["LONE_SLOTS", "EngineWorker", "Ticket"]

LONE_SLOTS = 256
"""The most slots (rows x num_seeds) of a request the worker solves at once when it is the only one (a short
solve: it blocks the worker, and requests arriving meanwhile wait for it)."""

HERE_SECONDS = 0.005
"""The most seconds of estimated work (rows x the lone budget of their seeds x the engine's seconds per slot-iteration)
of a request :meth:`EngineWorker.submit` solves on the event loop when the worker is idle."""

_log = logging.getLogger("server")


@dataclass(eq=False)
class Ticket:
    """One IK request inside a worker.

    Attributes:
        job: the decoded request; deadline: ``time.monotonic()`` time limit; work: rows x frames x seeds x
            iterations (all rounds of a search).
        future: resolved on the event loop with the JSON answer or the exception to answer with.
        parts: its problem's requests on the engine, in row order; cancelled: its client left.
        problem: what it solves now (its search's round, for a search); search: its search of several solutions;
            late: its search stopped for lack of time.
    """

    job: IKJob
    deadline: float
    work: int
    future: asyncio.Future[bytes] = field(repr=False)
    arrived: float = field(default_factory=time.monotonic)
    parts: list[Request] = field(default_factory=list)
    cancelled: bool = False
    # Worker thread only (or submit, solving here under the lock):
    problem: Problem[Tensor | np.ndarray] | None = None
    search: SolutionSearch | None = None
    late: bool = False
    error: Exception | None = None
    submitted: int = 0  # rows handed to the engine
    running: list[tuple[Request, int]] = field(default_factory=list)  # unfinished parts and their slot claims
    solved: IKResult[Tensor | np.ndarray] | None = None  # the answers of a request solved alone (no parts)

    @property
    def claimed(self) -> int:
        """Slots the unfinished parts may hold at most."""
        return sum(claim for _, claim in self.running)

    @property
    def left(self) -> int:
        """Rows of its problem not yet handed to the engine."""
        return (self.job.rows if self.problem is None else self.problem.rows) - self.submitted


class EngineWorker:
    """The solver of one robot for the service: an engine stepping in a dedicated thread while work exists.

    Args:
        name: the robot's name (metrics label).
        robot: the robot.
        metrics: the app's metrics.
        slots: the engine's slots (seeds in flight, all requests together); shared by an
            :class:`~ik_layer.server.admission.AdmissionPolicy`.
        block: LM iterations per engine block (requests join and leave between steps); a step runs
            ``policy.blocks(claimed)`` blocks (several under a light load).
        max_requests: requests solving at once (1: one request at a time, unbatched).
        queue_limit: requests waiting or solving before new ones get 503.
        max_work: row-iterations (rows x frames x seeds x iterations) waiting or solving before new ones get 503
            (413 for one that alone exceeds it).

    Raises:
        ValueError: too few ``slots`` to share (see :class:`~ik_layer.server.admission.AdmissionPolicy`).
    """

    def __init__(
        self,
        name: str,
        robot: Robot,
        metrics: Metrics,
        *,
        slots: int,
        block: int,
        max_requests: int,
        queue_limit: int,
        max_work: int,
    ) -> None:
        self.name = name
        self.policy = AdmissionPolicy(capacity=slots)
        self.stages = IKStages(robot)
        self.engine = Engine(robot, capacity=slots, block=block)
        self.block = block
        self.max_requests = max_requests
        self.queue_limit = queue_limit
        self.max_work = max_work
        self._metrics = metrics.of_robot(name)
        self._cond = threading.Condition()
        self._tickets: list[Ticket] = []  # accepted, not yet answered, in arrival order (guarded by _cond)
        self._work = 0  # of _tickets
        self._closed = False  # admits nothing more
        self._stopping = False  # cancels everything
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = -1  # its thread's identifier

    # ------------------------------------------------------------------------- event loop side

    def start(self) -> None:
        """Start the worker thread (call inside the running event loop, which receives the answers)."""
        if self._thread is not None:
            raise RuntimeError(f"worker {self.name!r} is already running")
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        self._thread = threading.Thread(target=self._run, name=f"ik-engine-{self.name}", daemon=True)
        self._thread.start()

    def submit(self, job: IKJob, deadline: float) -> Ticket:
        """Accept ``job`` with a ``time.monotonic()`` deadline; await ``ticket.future`` for the JSON answer.

        Raises:
            TooMuchWork: the job alone exceeds ``max_work``.
            ServiceUnavailable: not running, or the waiting line is full (in requests or in work).
        """
        options = job.options
        work = job.most_rows * job.frames * options.num_seeds * max(options.max_iterations, 1)
        if work > self.max_work:
            rounds = " x the rounds of num_solutions" if job.searches else ""
            raise TooMuchWork(
                f"this request may cost {work:,} row-iterations (targets x frames x num_seeds x max_iterations"
                f"{rounds}); this server takes at most {self.max_work:,}: lower num_seeds, max_iterations or "
                "num_solutions, or split it"
            )
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._thread is None or self._closed or self._stopping:
                raise ServiceUnavailable(f"robot {self.name!r} is not serving (starting or shutting down)")
            if len(self._tickets) >= self.queue_limit or self._work + work > self.max_work:
                self._metrics.rejected.inc()
                raise ServiceUnavailable(f"robot {self.name!r} has {len(self._tickets)} requests in line; retry later")
            ticket = Ticket(job, deadline, work, loop.create_future())
            here = self._fits_here(job)
            self._tickets.append(ticket)
            self._work += work
            if here:  # the worker thread waits on the lock (an RLock) until the ticket is answered
                self._work_on([ticket])
            if ticket in self._tickets:
                self._cond.notify()
        return ticket

    def _fits_here(self, job: IKJob) -> bool:
        """Whether ``job`` may be solved here and now on the event loop: nothing else in line, the engine idle and
        timed, one solve (no search) whose whole budget takes at most :data:`HERE_SECONDS` by that timing."""
        per_iteration = self.engine.seconds_per_iteration
        if per_iteration is None or self._tickets or self.engine.busy or job.searches:
            return False
        return job.most_rows * lone_budget(job.options) * per_iteration <= HERE_SECONDS

    def cancel(self, ticket: Ticket) -> None:
        """Stop ``ticket`` (its client left): its rows retire at the next block, rows not started never run."""
        with self._cond:
            if ticket.cancelled:
                return
            ticket.cancelled = True
            for part in ticket.parts:
                self.engine.cancel(part)
            self._cond.notify()

    def close(self, deadline: float) -> None:
        """Admit nothing more (503) and retire every request in flight by ``deadline`` (``time.monotonic()``)."""
        with self._cond:
            self._closed = True
            for ticket in self._tickets:
                ticket.deadline = min(ticket.deadline, deadline)
                for part in ticket.parts:
                    part.deadline = min(part.deadline if part.deadline is not None else deadline, deadline)
            self._cond.notify()

    async def stop(self) -> None:
        """Stop admitting, cancel what is left (answered with 503) and wait for the worker thread to end."""
        with self._cond:
            self._stopping = True
            for ticket in self._tickets:
                ticket.cancelled = True
                for part in ticket.parts:
                    self.engine.cancel(part)
            self._cond.notify()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    # ------------------------------------------------------------------------- worker thread

    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._tickets or self._stopping):
                    self._cond.wait()
                if self._stopping and not self._tickets:
                    return
                tickets = list(self._tickets)
            self._work_on(tickets)

    def _work_on(self, tickets: list[Ticket]) -> None:
        """One round of work on ``tickets``: hand rows over, run a step, answer what is finished."""
        try:
            claimed = self._hand_over(tickets)
            self.engine.block = self.block * self.policy.blocks(claimed)
            if self.engine.busy:
                start = time.perf_counter()
                self.engine.step()
                self._metrics.block_seconds.observe(time.perf_counter() - start)
            self._answer_finished(tickets)
        except Exception as err:  # a bug: answer what is in flight (500) and keep serving on a fresh engine
            _log.exception("engine worker %r failed; failing %d requests", self.name, len(tickets))
            self._fail(tickets, err)

    def _fail(self, tickets: list[Ticket], err: Exception) -> None:
        """Answer ``tickets`` with ``err`` and replace the engine, whose state is unknown."""
        engine = self.engine
        self.engine = Engine(engine.robot, capacity=engine.slots.capacity, block=self.block, store=engine.slots.kind)
        for ticket in tickets:
            self._forget_running(ticket)
        self._leave_line(tickets)
        self._settle([(ticket, err) for ticket in tickets])

    def _hand_over(self, tickets: list[Ticket]) -> int:
        """Start waiting requests (up to ``max_requests`` solving), then give the engine parts of them, oldest
        first, as the admission policy allots; return the slots claimed."""
        now = time.monotonic()
        self._start(tickets, now)
        pending = [t for t in tickets if t.left and t.problem is not None and not t.cancelled]
        for ticket in pending:
            if now >= ticket.deadline:  # expired before starting: retired at the next step without running
                self._submit(ticket, ticket.left, 0)
        live = [t for t in pending if now < t.deadline]
        claimed = sum(t.claimed for t in tickets)
        demands = [Demand(t.left, t.job.options.num_seeds, t.claimed) for t in live]
        if len(live) == 1 and len(tickets) == 1 and self._alone(live[0]):
            self._solve_alone(live[0])
            return 0
        for ticket, rows in zip(live, self.policy.allot(demands, claimed), strict=True):
            if rows > 0:
                claim = rows * ticket.job.options.num_seeds
                claimed += claim
                self._submit(ticket, rows, claim)
        return claimed

    def _start(self, tickets: list[Ticket], now: float) -> None:
        """Decode the oldest waiting tickets that may start, together; a ticket whose job is invalid keeps its
        error."""
        solving = sum(1 for t in tickets if t.problem is not None and t.left)
        waiting = [t for t in tickets if t.problem is None and t.error is None and not t.cancelled]
        starting = waiting[: max(self.max_requests - solving, 0)]
        for ticket, decoded in zip(starting, self.stages.decode([t.job for t in starting]), strict=True):
            if isinstance(decoded, IKLayerError):
                ticket.error = decoded
            else:
                ticket.search = self.stages.search(ticket.job, decoded)
                ticket.problem = decoded if ticket.search is None else ticket.search.problem
            self._metrics.queue_wait_seconds.observe(now - ticket.arrived)

    def _alone(self, ticket: Ticket) -> bool:
        """Whether ``ticket`` may be solved at once, alone: the only request, a small one of one solve (no search),
        nothing of it started, and the engine idle."""
        problem = ticket.problem
        small = problem is not None and problem.rows * ticket.job.options.num_seeds <= LONE_SLOTS
        return small and ticket.submitted == 0 and ticket.search is None and not self.engine.busy

    def _solve_alone(self, ticket: Ticket) -> None:
        """Solve ``ticket`` on the idle engine in one call (:meth:`IKStages.solve`: one launch, each target's seeds
        one after another, see :meth:`Engine.solve <ik_layer.engine.Engine.solve>`), instead of handing its rows
        over in parts."""
        assert ticket.problem is not None
        rows = ticket.problem.rows
        self._metrics.rows_admitted.inc(rows)
        self.engine.block = self.block * self.policy.blocks(rows * ticket.job.options.num_seeds)  # as a part's
        start = time.perf_counter()
        ticket.solved = self.stages.solve(self.engine, ticket.problem, ticket.deadline)
        self._metrics.block_seconds.observe(time.perf_counter() - start)
        ticket.submitted = rows
        assert ticket.solved.status is not None  # the engine's answers carry their statuses
        self._count_statuses(ticket.solved.status)

    def _submit(self, ticket: Ticket, rows: int, claim: int) -> None:
        """Hand the next ``rows`` rows of ``ticket`` to the engine as a part claiming ``claim`` slots."""
        assert ticket.problem is not None
        span = slice(ticket.submitted, ticket.submitted + rows)
        part = self.stages.submit(self.engine, ticket.problem, span, ticket.deadline)
        ticket.submitted += rows
        ticket.running.append((part, claim))
        self._metrics.rows_admitted.inc(rows)
        self._metrics.rows_in_flight.inc(rows)
        with self._cond:
            ticket.parts.append(part)
            if ticket.cancelled:
                self.engine.cancel(part)

    def _answer_finished(self, tickets: list[Ticket]) -> None:
        """Release the claims of finished parts; answer every ticket with nothing left to run."""
        answered: list[Ticket] = []
        for ticket in tickets:
            finished = [entry for entry in ticket.running if entry[0].done.is_set()]
            for part, _ in finished:
                self._count_retired(part)
            ticket.running = [entry for entry in ticket.running if entry not in finished]
            if ticket.running:
                continue
            stopped = ticket.cancelled or ticket.error is not None
            if ticket.left and not stopped:
                continue
            if ticket.search is not None and not stopped and self._next_round(ticket):
                continue
            answered.append(ticket)
        if not answered:
            return
        outcomes = [(ticket, self._outcome(ticket)) for ticket in answered]
        self._leave_line(answered)
        self._settle(outcomes)

    def _leave_line(self, tickets: list[Ticket]) -> None:
        """Take ``tickets`` out of the line, before they are answered: a client's next request may then find the
        worker idle."""
        with self._cond:
            for ticket in tickets:
                self._tickets.remove(ticket)
                self._work -= ticket.work

    def _next_round(self, ticket: Ticket) -> bool:
        """Give ``ticket``'s search the answers of its finished round; True when another round starts (its rows
        wait to be handed over), False when the search is over (``ticket.late`` where time ran out first)."""
        assert ticket.search is not None
        ticket.search.add(self.stages.answers(ticket.parts))
        following = ticket.search.problem
        if following is None:
            return False
        if time.monotonic() >= ticket.deadline:
            ticket.late = True
            return False
        ticket.problem, ticket.submitted = following, 0
        with self._cond:
            ticket.parts = []
        return True

    def _forget_running(self, ticket: Ticket) -> None:
        """Take the rows of ``ticket``'s unfinished parts off the rows-in-flight gauge."""
        self._metrics.rows_in_flight.dec(sum(part.rows for part, _ in ticket.running))
        ticket.running = []

    def _count_retired(self, part: Request) -> None:
        self._metrics.rows_in_flight.dec(part.rows)
        self._count_statuses(part.status)

    def _count_statuses(self, status: Tensor | np.ndarray) -> None:
        """Count retired rows of ``status`` (codes) by status."""
        for code, count in Counter(status.reshape(-1).tolist()).items():
            self._metrics.rows_retired[ROW_STATUS[code]].inc(count)

    def _outcome(self, ticket: Ticket) -> bytes | Exception:
        """The answer of a ticket with nothing left to run."""
        if ticket.error is not None:
            return ticket.error
        if self._stopping:
            return ServiceUnavailable("the server is shutting down")
        if ticket.left or (ticket.cancelled and ticket.search is not None):  # its client is gone anyway
            return ServiceUnavailable("the request was cancelled")
        if ticket.solved is not None:
            answers = ticket.solved
        elif ticket.search is None:
            answers = self.stages.answers(ticket.parts)
        else:
            answers = ticket.search.result(ticket.late)
        try:
            return self.stages.encode(self.stages.collect(ticket.job, answers))
        except IKLayerError as err:
            return err

    def _settle(self, outcomes: list[tuple[Ticket, bytes | Exception]]) -> None:
        """Resolve the tickets' futures on the event loop: at once where this runs on it, else in one wake-up (unless
        the loop is gone)."""
        assert self._loop is not None
        futures = [(ticket.future, outcome) for ticket, outcome in outcomes]
        if threading.get_ident() == self._loop_thread:  # solved by submit, on the event loop
            _resolve(futures)
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
            self._loop.call_soon_threadsafe(_resolve, futures)


def _resolve(outcomes: list[tuple[asyncio.Future[bytes], bytes | Exception]]) -> None:
    for future, outcome in outcomes:
        if future.done():  # the route stopped waiting (client gone)
            continue
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
