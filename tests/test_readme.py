"""Every Python block of README.md runs as written, each in a fresh interpreter outside the repository.

A block that talks to the service (it names the quick start's address, http://127.0.0.1:8000) runs against
a server this module starts on a free port: the address is the one thing changed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ik_layer.testing import ServerProcess

README = Path(__file__).resolve().parents[1] / "README.md"
QUICK_START_URL = "http://127.0.0.1:8000"


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the opening fence, code) of each ```python block."""
    blocks, opened, code = [], None, []
    for number, line in enumerate(text.splitlines(), start=1):
        if opened is None and line.strip() == "```python":
            opened, code = number, []
        elif opened is not None and line.strip() == "```":
            blocks.append((opened, "\n".join(code) + "\n"))
            opened = None
        elif opened is not None:
            code.append(line)
    if opened is not None:
        raise ValueError(f"README.md line {opened}: ```python block never closed")
    return blocks


BLOCKS = python_blocks(README.read_text())


def test_every_python_fence_is_a_block() -> None:
    assert len(BLOCKS) == README.read_text().count("```python") > 0


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    running = ServerProcess.start(["--robots", "ur5e"])
    yield running
    running.stop()


@pytest.mark.parametrize("line, code", BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_readme_block_runs(line: int, code: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if QUICK_START_URL in code:
        code = code.replace(QUICK_START_URL, request.getfixturevalue("server").url)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    script = tmp_path / "block.py"  # a file, not -c: warp reads a kernel's source from its file
    script.write_text(code)
    try:
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"README.md line {line}: the block ran past 180 s")
    if done.returncode != 0:
        error = re.sub(r'File ".*block\.py", line (\d+)', lambda m: f"README.md line {line + int(m[1])}", done.stderr)
        pytest.fail(f"README.md line {line}: the block failed (status {done.returncode}):\n{error[-3000:]}")
