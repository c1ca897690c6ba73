"""Helpers for tests and benchmarks of code that uses ik-layer (ours included).

Nothing here is used by the library itself: a free loopback port, the HTTP
service in a child process, the location of example-robot-data's URDFs
(foreign robot models for tests), and random configurations to draw targets from.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.core.result import IKResult
from ik_layer.model.robot import Robot

__all__ = [
    "ServerProcess",
    "example_robot_data_candidates",
    "example_robot_data_dir",
    "free_port",
    "random_bases",
    "random_configurations",
]

_ERD_SUFFIX = Path("share", "example-robot-data", "robots")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    """``python -m ik_layer.server`` (or another entry to it) running in a child process on a loopback port.

    Attributes:
        process: the child; its stdout and stderr are one text pipe when started with ``capture=True``.
        url: base URL, e.g. ``http://127.0.0.1:8123``.
    """

    process: subprocess.Popen[str]
    url: str

    @classmethod
    def start(
        cls,
        flags: Sequence[str] = (),
        *,
        ready_within: float = 120,
        capture: bool = True,
        cwd: Path | None = None,
        entry: Sequence[str] = ("ik_layer.server",),
    ) -> ServerProcess:
        """Start the server with ``flags`` on a free port and wait until ``/health`` answers 200.

        Args:
            entry: what follows ``python -m``: the module, with the subcommand if any (``("ik_layer", "serve")``).

        Raises:
            RuntimeError: the server exited, or was not ready within ``ready_within`` seconds
                (the message holds what it printed, when captured).
        """
        port = free_port()
        command = [sys.executable, "-m", *entry, "--host", "127.0.0.1", "--port", str(port), *flags]
        pipe = subprocess.PIPE if capture else None
        process = subprocess.Popen(
            command, cwd=cwd, stdout=pipe, stderr=subprocess.STDOUT if capture else None, text=True
        )
        running = cls(process, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + ready_within
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with status {process.returncode}:\n{running._output()}")
            if running._healthy():
                return running
            time.sleep(0.1)
        process.kill()
        raise RuntimeError(f"server not ready within {ready_within} s:\n{running._output()}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20) -> tuple[int, str]:
        """Send ``sig``, wait up to ``timeout`` seconds, and return the exit status and the captured output.

        Raises:
            subprocess.TimeoutExpired: the server did not exit in time (it is killed first).
        """
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            output, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise
        return self.process.returncode, output or ""

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def _output(self) -> str:
        if self.process.stdout is None:
            return "(output not captured)"
        if self.process.poll() is None:
            self.process.kill()
        return self.process.communicate()[0] or ""


def example_robot_data_candidates() -> list[Path]:
    """Places where example-robot-data's ``robots/`` folder may live, most specific first.

    ``$EXAMPLE_ROBOT_DATA_DIR`` first, then beside the ``example_robot_data`` and
    ``pinocchio`` packages (cmeel wheels install under ``cmeel.prefix``), then the
    interpreter's data folders and the usual system prefixes.
    """
    found: list[Path] = []
    env = os.environ.get("EXAMPLE_ROBOT_DATA_DIR")
    if env:
        found.append(Path(env))
    for package in ("example_robot_data", "pinocchio"):
        try:
            module = __import__(package)
        except ImportError:
            continue
        if module.__file__ is None:  # a namespace package: no file to start from
            continue
        for parent in Path(module.__file__).resolve().parents:
            found.append(parent / _ERD_SUFFIX)
            if parent.name == "cmeel.prefix":
                break
    for key in ("purelib", "platlib", "data"):
        base = Path(sysconfig.get_paths()[key])
        found += [base / "cmeel.prefix" / _ERD_SUFFIX, base / _ERD_SUFFIX]
    found += [Path("/opt/openrobots") / _ERD_SUFFIX, Path("/usr/share/example-robot-data/robots")]
    return found


@lru_cache(maxsize=1)
def example_robot_data_dir() -> Path | None:
    """example-robot-data's ``robots/`` folder (``pip install example-robot-data``), or None if absent."""
    for candidate in example_robot_data_candidates():
        if (candidate / "ur_description").is_dir():
            return candidate
    return None


def random_bases(q: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``q`` (..., nq) of a floating-base robot with its base anywhere in a 1 m box around the origin, in any
    orientation (its position drawn first, then its quaternion)."""
    position = torch.rand(*q.shape[:-1], 3, generator=generator, dtype=q.dtype, device=q.device) - 0.5
    quaternion = torch.randn(*q.shape[:-1], 4, generator=generator, dtype=q.dtype, device=q.device)
    return torch.cat((position, quaternion / quaternion.norm(dim=-1, keepdim=True), q[..., 7:]), -1)


def random_configurations(robot: Robot, n: int, generator: torch.Generator) -> torch.Tensor:
    """(n, nq) configurations: joints uniform in their limits (:meth:`Robot.random_q`), a floating base as
    :func:`random_bases` places it."""
    q = robot.random_q((n,), generator=generator)
    return random_bases(q, generator) if robot.floating_base else q


def solve_on_engine(
    robot: Robot,
    target: torch.Tensor,
    options: SolveOptions | None = None,
    *,
    seed: int = 0,
    block: int = 16,
    store: str | None = None,
    **problem: Any,
) -> IKResult:
    """Solve on a fresh :class:`~ik_layer.Engine` of ``block`` iterations per launch, every random start and
    restart drawn from ``seed``; ``problem`` as :meth:`Problem.prepare`'s (``warm_start``, ``weights``...)."""
    from ik_layer.engine import Engine  # warp and the kernels: only for the tests that solve on an engine

    checked = Problem.prepare(robot, target, options, **problem)
    engine = Engine(robot, capacity=max(checked.rows * checked.options.num_seeds, 1), block=block, store=store)
    return engine.solve(checked, seed)
