"""Shared timing helper of the benchmark scripts (run as ``python bench/<script>.py``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def time_call(fn: Callable[[], object], budget_s: float, repeats: int = 5) -> float:
    """Median wall time of one ``fn()`` [us], repeating it to fill about ``budget_s`` seconds."""
    fn()  # warm up
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, int(budget_s / repeats / once))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples) * 1e6
