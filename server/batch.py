"""Dynamic micro-batching: coalesce concurrent requests into one solver call, LitServe-style.

One :class:`MicroBatcher` per robot owns a waiting line and a worker task.
The worker waits for a first request, keeps collecting until the waiting rows
reach ``max_batch`` or ``max_wait`` has passed, then hands one batch to a
dedicated solver thread (the event loop never runs torch) and resolves each
request's future with its own result.

Requests carry a ``key`` (their solver options): a batch only holds requests
with the key of the oldest waiting one; the others stay in line, in order, for
the next batch. A request is never split, so one larger than ``max_batch`` is
solved alone. Requests whose caller has gone (cancelled future) are dropped
before the solve, and results for callers that left meanwhile are discarded.
If a batch fails, its requests are solved one by one so one bad request
cannot fail its neighbours.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ik_layer.server.exceptions import ServiceUnavailable
from ik_layer.server.metrics import Metrics

__all__ = ["MicroBatcher"]

P = TypeVar("P")
R = TypeVar("R")


@dataclass(eq=False)
class _Item(Generic[P, R]):
    payload: P
    rows: int
    key: Hashable
    future: asyncio.Future[R] = field(repr=False)


class MicroBatcher(Generic[P, R]):
    """Coalesces concurrent :meth:`submit` calls into calls of ``process`` in a worker thread.

    Args:
        name: label of the metrics (the robot's name).
        process: solves a batch of payloads in the worker thread and returns one result per payload.
        metrics: where batch sizes, queue depth, solve latency and refusals go.
        max_batch: most rows per ``process`` call (>= 1; 1 turns batching off).
        max_wait: longest a first request waits for others to join [s] (>= 0).
        queue_limit: most requests waiting; more are refused with :class:`ServiceUnavailable`.
    """

    def __init__(
        self,
        name: str,
        process: Callable[[Sequence[P]], Sequence[R]],
        metrics: Metrics,
        *,
        max_batch: int,
        max_wait: float,
        queue_limit: int,
    ) -> None:
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}")
        if not max_wait >= 0:
            raise ValueError(f"max_wait must be >= 0 seconds, got {max_wait!r}")
        if not isinstance(queue_limit, int) or queue_limit < 1:
            raise ValueError(f"queue_limit must be a positive integer, got {queue_limit!r}")
        self.name = name
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.queue_limit = queue_limit
        self._process = process
        self._metrics = metrics
        self._waiting: deque[_Item[P, R]] = deque()
        self._waiting_rows = 0
        self._in_flight: list[_Item[P, R]] = []
        self._arrived = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def running(self) -> bool:
        """Whether :meth:`start` ran and :meth:`stop` did not."""
        return self._worker is not None

    def start(self) -> None:
        """Start the worker task and its solver thread (call inside the running event loop)."""
        if self._worker is not None:
            raise RuntimeError(f"batcher {self.name!r} is already running")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ik-solve-{self.name}")
        self._worker = asyncio.get_running_loop().create_task(self._run(), name=f"ik-batcher-{self.name}")

    async def stop(self) -> None:
        """Stop the worker, fail the requests still waiting with 503, wait for the solver thread."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        for item in [*self._in_flight, *self._waiting]:
            if not item.future.done():
                item.future.set_exception(ServiceUnavailable("the server is shutting down"))
        self._waiting.clear()
        self._in_flight = []
        self._waiting_rows = 0
        self._metrics.queue_depth.labels(self.name).set(0)
        if self._executor is not None:
            await asyncio.to_thread(self._executor.shutdown, wait=True)
            self._executor = None

    async def submit(self, payload: P, rows: int, key: Hashable) -> R:
        """Queue ``payload`` (``rows`` rows, solver options ``key``) and wait for its result.

        Raises:
            ServiceUnavailable: the line is full or the batcher is not running.
            Exception: whatever ``process`` raised for this payload.
        """
        if self._worker is None:
            raise ServiceUnavailable(f"robot {self.name!r} is not ready")
        if len(self._waiting) >= self.queue_limit:
            self._metrics.rejected.labels(self.name).inc()
            raise ServiceUnavailable(f"robot {self.name!r} has {len(self._waiting)} requests waiting; retry later")
        item: _Item[P, R] = _Item(payload, rows, key, asyncio.get_running_loop().create_future())
        self._waiting.append(item)
        self._waiting_rows += rows
        self._metrics.queue_depth.labels(self.name).set(len(self._waiting))
        self._arrived.set()
        return await item.future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._waiting:
                self._arrived.clear()
                await self._arrived.wait()
            deadline = loop.time() + self.max_wait
            while self._waiting_rows < self.max_batch and (remaining := deadline - loop.time()) > 0:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), remaining)
                except asyncio.TimeoutError:  # the builtin TimeoutError only from Python 3.11
                    break
            batch = self._take()
            if batch:
                await self._dispatch(batch)

    def _take(self) -> list[_Item[P, R]]:
        """Remove and return the next batch: the oldest live request and same-key ones that fit."""
        live = [item for item in self._waiting if not item.future.done()]
        batch: list[_Item[P, R]] = []
        rest: list[_Item[P, R]] = []
        rows = 0
        for item in live:
            fits = not batch or (item.key == batch[0].key and rows + item.rows <= self.max_batch)
            if fits:
                batch.append(item)
                rows += item.rows
            else:
                rest.append(item)
        self._waiting = deque(rest)
        self._waiting_rows = sum(item.rows for item in rest)
        self._metrics.queue_depth.labels(self.name).set(len(rest))
        return batch

    async def _dispatch(self, batch: list[_Item[P, R]]) -> None:
        self._metrics.batch_rows.labels(self.name).observe(sum(item.rows for item in batch))
        self._metrics.batch_requests.labels(self.name).observe(len(batch))
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        self._in_flight = batch
        outcomes = await loop.run_in_executor(self._executor, self._solve, [item.payload for item in batch])
        self._in_flight = []
        self._metrics.solve_seconds.labels(self.name).observe(time.perf_counter() - start)
        for item, (ok, value) in zip(batch, outcomes, strict=True):
            if item.future.done():  # the caller left while we solved
                continue
            if ok:
                item.future.set_result(value)
            else:
                item.future.set_exception(value)

    def _solve(self, payloads: list[P]) -> list[tuple[bool, R | Exception]]:
        """In the solver thread: the batch at once, or one by one if the batch fails."""
        try:
            results = list(self._process(payloads))
            if len(results) != len(payloads):
                raise RuntimeError(f"process returned {len(results)} results for {len(payloads)} payloads")
        except Exception as err:
            if len(payloads) == 1:
                return [(False, err)]
            return [self._solve([payload])[0] for payload in payloads]
        return [(True, result) for result in results]
