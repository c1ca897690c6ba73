"""The examples run, check what they claim and exit non-zero when a claim fails (remote_client: test_client.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_example(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


@pytest.mark.parametrize(
    "script",
    [
        "invert_learned_model.py",  # exits 1 unless the implicit gradient matches finite differences
        "kinematics_demo.py",  # exits 1 unless FK and Jacobians equal Pinocchio's to 1e-10
        "whole_body.py",  # exits 1 unless Pinocchio confirms >= 99 % of its answers
    ],
)
def test_example_runs_and_reports_success(script: str) -> None:
    done = run_example(script)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_learn_through_ik_recovers_the_tool_offset_to_a_millimetre() -> None:
    done = run_example("learn_through_ik.py")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    offset_error = float(re.search(r"true \[.*\]: ([\d.]+) mm off", done.stdout).group(1))
    target_miss = float(re.search(r"targets are within ([\d.]+) mm", done.stdout).group(1))
    assert offset_error <= 1.0
    assert target_miss <= 5.0


def test_learn_through_ik_fails_loudly_when_it_misses() -> None:
    done = run_example("learn_through_ik.py", "--steps", "1")  # too few steps for the network
    assert done.returncode == 1
    assert "FAILED: the network's targets miss by" in done.stderr
