"""Benchmark scripts that check themselves: they run, and their candidates agree with the reference path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_kernel_bakeoff_kernels_agree_with_eager_torch():
    pytest.importorskip("warp", reason="warp-lang is not installed (pip install -e '.[bench]')")
    pytest.importorskip("numba", reason="numba is not installed (pip install -e '.[bench]')")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "kernel_bakeoff.py"), "--quick", "--threads", "1"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits non-zero on any disagreement
    table = [line for line in done.stdout.splitlines() if line.startswith("| panda |")]
    assert {line.split("|")[4].strip() for line in table} == {"warp", "numba"}


@pytest.mark.slow
def test_warm_start_bench_verifies_its_answers():
    script = ROOT / "bench" / "warm_start_and_memory.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--robots", "ur5e", "--batch", "500"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits non-zero on an unconfirmed success
    row = next(line for line in done.stdout.splitlines() if line.startswith("| ur5e |"))
    median, p99, most = (int(x) for x in row.split("|")[3].split("/"))
    assert median <= p99 <= most <= 3  # 5 mm from the answer: a few iterations
    assert "panda batch 500: success" in done.stdout
