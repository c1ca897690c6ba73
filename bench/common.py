"""Shared helpers of the benchmark scripts (run as ``python bench/<script>.py``): timing, threads, tables."""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch


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


def benchmark_parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the ``--threads`` option every benchmark takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    return parser


def apply_threads_and_describe(threads: int | None) -> str:
    """Set torch's thread count (if given) and describe the machine in one line."""
    if threads:
        torch.set_num_threads(threads)
    machine = platform.processor() or platform.machine()
    return f"torch {torch.__version__} ({torch.get_num_threads()} threads), {machine}, CPU"


def markdown_table(header: list[str], rows: list[list[str]], text_columns: int = 1) -> str:
    """A Markdown table; the first ``text_columns`` columns align left, the others (numbers) right."""
    rule = "|" + "|".join("---" if i < text_columns else "---:" for i in range(len(header))) + "|"
    return "\n".join(["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(row) + " |" for row in rows)])
