"""The micro-batcher on its own, with a fake solver: coalescing, deadlines, keys, refusals, failures, shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from ik_layer.server.batch import MicroBatcher
from ik_layer.server.exceptions import ServiceUnavailable
from ik_layer.server.metrics import Metrics

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """A fake ``process``: doubles each payload, records the batches and the thread it ran in."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.threads: set[str] = set()
        self.fail_on = fail_on

    def __call__(self, payloads: Sequence[int]) -> list[int]:
        self.batches.append(list(payloads))
        self.threads.add(threading.current_thread().name)
        if self.fail_on in payloads:
            raise ValueError(f"bad payload {self.fail_on}")
        return [2 * p for p in payloads]


def batcher(process: Recorder, **options: float) -> MicroBatcher[int, int]:
    settings = {"max_batch": 8, "max_wait": 0.2, "queue_limit": 64, **options}
    return MicroBatcher("fake", process, Metrics(), **settings)  # type: ignore[arg-type]


async def test_concurrent_submissions_become_one_batch_solved_off_the_event_loop() -> None:
    process = Recorder()
    b = batcher(process)
    b.start()
    results = await asyncio.gather(*(b.submit(i, 1, "k") for i in range(5)))
    await b.stop()
    assert results == [0, 2, 4, 6, 8]
    assert process.batches == [[0, 1, 2, 3, 4]]
    assert process.threads == {"ik-solve-fake_0"} and threading.current_thread().name not in process.threads


async def test_rows_never_exceed_max_batch_and_big_requests_go_alone() -> None:
    process = Recorder()
    b = batcher(process, max_batch=4, max_wait=0.05)
    b.start()
    await asyncio.gather(b.submit(1, 3, "k"), b.submit(2, 2, "k"), b.submit(3, 9, "k"), b.submit(4, 1, "k"))
    await b.stop()
    assert process.batches == [[1, 4], [2], [3]]


async def test_only_equal_keys_share_a_batch_and_order_is_kept() -> None:
    process = Recorder()
    b = batcher(process, max_wait=0.05)
    b.start()
    await asyncio.gather(b.submit(1, 1, "a"), b.submit(2, 1, "b"), b.submit(3, 1, "a"), b.submit(4, 1, "b"))
    await b.stop()
    assert process.batches == [[1, 3], [2, 4]]


async def test_zero_wait_takes_whatever_is_waiting() -> None:
    process = Recorder()
    b = batcher(process, max_wait=0.0)
    b.start()
    assert await b.submit(5, 1, "k") == 10
    await b.stop()


async def test_full_line_is_refused_and_refusals_are_counted() -> None:
    b = batcher(Recorder(), queue_limit=2, max_wait=0.2)
    b.start()
    outcomes = await asyncio.gather(*(b.submit(i, 1, "k") for i in range(4)), return_exceptions=True)
    await b.stop()
    assert outcomes[:2] == [0, 2]
    assert all(isinstance(o, ServiceUnavailable) for o in outcomes[2:])
    assert b._metrics.registry.get_sample_value("ik_layer_rejected_total", {"robot": "fake"}) == 2


async def test_cancelled_callers_are_dropped_before_the_solve() -> None:
    process = Recorder()
    b = batcher(process, max_wait=0.1)
    b.start()
    gone = asyncio.create_task(b.submit(1, 1, "k"))
    kept = asyncio.create_task(b.submit(2, 1, "k"))
    await asyncio.sleep(0.01)
    gone.cancel()
    assert await kept == 4
    await b.stop()
    assert process.batches == [[2]]


async def test_a_failing_batch_is_retried_one_by_one() -> None:
    process = Recorder(fail_on=2)
    b = batcher(process, max_wait=0.05)
    b.start()
    outcomes = await asyncio.gather(*(b.submit(i, 1, "k") for i in (1, 2, 3)), return_exceptions=True)
    await b.stop()
    assert outcomes[0] == 2 and outcomes[2] == 6
    assert isinstance(outcomes[1], ValueError) and "bad payload 2" in str(outcomes[1])
    assert process.batches == [[1, 2, 3], [1], [2], [3]]


async def test_stop_fails_waiting_requests_and_later_ones_with_503() -> None:
    b = batcher(Recorder(), max_wait=10.0)
    b.start()
    waiting = asyncio.create_task(b.submit(1, 1, "k"))
    await asyncio.sleep(0.01)
    await b.stop()
    with pytest.raises(ServiceUnavailable, match="shutting down"):
        await waiting
    with pytest.raises(ServiceUnavailable, match="not ready"):
        await b.submit(2, 1, "k")
    assert not b.running


@pytest.mark.parametrize(
    ("options", "message"),
    [({"max_batch": 0}, "max_batch"), ({"max_wait": -1.0}, "max_wait"), ({"queue_limit": 0}, "queue_limit")],
)
def test_options_are_validated_up_front(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        batcher(Recorder(), **options)
