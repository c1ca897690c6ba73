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


@pytest.mark.slow
def test_cost_terms_bench_verifies_its_answers():
    script = ROOT / "bench" / "cost_terms.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--repeats", "1", "--threads", "1"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits non-zero on an unconfirmed success
    assert "every success confirmed with Pinocchio" in done.stdout
    rows = {line.split("|")[1].strip(): line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")}
    assert set(rows) >= {"plain", "centring=1", "manipulability=0.5"}
    assert float(rows["centring=1"][6]) < float(rows["plain"][6])  # nearer the middle of the limits
    assert float(rows["manipulability=0.5"][7]) > float(rows["plain"][7])  # further from singularities


@pytest.mark.slow
def test_active_joints_bench_verifies_its_answers(erd_urdf):
    urdf = erd_urdf("tiago_description/robots/tiago_dual.urdf")
    script = ROOT / "bench" / "active_joints.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--batch", "100", "--repeats", "1", "--urdf", str(urdf)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits non-zero on an unconfirmed success
    rows = {line.split("|")[1].strip(): line.split("|") for line in done.stdout.splitlines() if line.startswith("| 1")}
    assert set(rows) == {"101-joint model", "12-joint model"}
    assert all(row[2].strip() == "8" and row[5].strip() == "0" for row in rows.values())  # moving joints, unconfirmed
    assert "(goal >= 0.8x" in done.stdout


@pytest.mark.slow
def test_server_load_stalled_bodies_are_refused():
    script = ROOT / "bench" / "server_load.py"
    done = subprocess.run(
        [sys.executable, str(script), "--stalled", "4", "--quick"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # non-zero: kept open, memory, no answer
    row = next(line.split("|") for line in done.stdout.splitlines() if line.startswith("| 4 |"))
    assert int(row[6]) + int(row[7]) == 4  # every stalled connection got a 408 or was closed
    assert int(row[11]) == 0  # no /health or IK request failed meanwhile


@pytest.mark.slow
def test_robot_models_bench_verifies_its_answers(erd_urdf):
    erd_urdf("solo_description/robots/solo12.urdf")  # skips loudly without example-robot-data
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "robot_models.py"), "--quick"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits non-zero on a refuted success
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith(("| talos", "| solo12"))]
    robots, paths = ("talos hands", "talos whole body", "solo12 feet"), ("engine", "reference")
    assert {(row[1].strip(), row[3].strip()) for row in rows} == {(r, p) for r in robots for p in paths}
    assert all(row[6].strip() == "0" for row in rows)  # nothing refuted


@pytest.mark.slow
def test_small_batches_bench_confirms_every_success():
    script = ROOT / "bench" / "small_batches.py"
    done = subprocess.run(
        [sys.executable, str(script), "--device", "cpu", "--batch", "1", "--batch", "8", "--calls", "3"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits 1 on an unconfirmed success
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith(("| 1 ", "| 8 "))]
    assert len(rows) == 2 and all(row[3].strip() == row[5].strip() == "100.00 %" for row in rows)
    assert "successes float64 FK did not confirm: 0" in done.stdout


@pytest.mark.slow
def test_app_latency_bench_times_both_routes_and_confirms_every_success():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "app_latency.py"), "--requests", "40", "--rounds", "1", "--threads", "1"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits 1 on an unconfirmed success
    rows = {line.split("|")[1].strip(): line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")}
    assert {"health", "ik"} <= set(rows) and rows["ik"][4].strip() == rows["health"][4].strip() == "40"
    assert "IK successes: 40 of 40; not confirmed by Pinocchio: 0" in done.stdout
