"""Load clients for the service's benchmarks that count every answer: statuses, retries, replicas, a timeline.

``bench/server_load.py`` measures the happy path (200 or "failed"); ``bench/scale_out.py`` also needs to know
what each request got when a replica dies (every status, each exception by name, whether a 503 carried
``Retry-After``), which replica answered (the ``x-ik-layer-replica`` header of ``ik_layer.deploy.ray_serve``), the
answered targets per second over time, and a sample of answers to re-check with Pinocchio. The targets come from
``server_load.reachable_targets`` (the server's own FK of random configurations inside the limits).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import numpy as np
import pinocchio as pin
import torch

import ik_layer

REPLICA_HEADER = "x-ik-layer-replica"  # ik_layer.deploy.ray_serve.REPLICA_HEADER (importing it needs Ray)
RETRYABLE = 503
MAX_ATTEMPTS = 20  # per request, retrying a 503 (after its Retry-After) or an error without an answer


@dataclass
class Run:
    """What ``clients`` loops got sending ``batch`` targets per request for ``seconds``.

    Attributes:
        latencies: seconds from the first attempt to the 200 of each answered request.
        attempts: every attempt's outcome: the HTTP status, or the exception's class name.
        no_retry_after: 503 answers without a ``Retry-After`` header.
        lost: requests with no 200 after :data:`MAX_ATTEMPTS` attempts (or still unanswered at the end).
        solved / unsolved: targets of 200 answers with ``success`` true / false.
        replicas: 200 answers per replica tag (``<replica id> <pid>``; ``-`` without the header).
        timeline: (seconds since start, solved targets) of each 200 answer.
        samples: (q, target pose) of some solved targets, for :func:`confirm`.
    """

    label: str
    clients: int
    batch: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    attempts: Counter[str] = field(default_factory=Counter)
    no_retry_after: int = 0
    lost: int = 0
    retried: int = 0
    solved: int = 0
    unsolved: int = 0
    replicas: Counter[str] = field(default_factory=Counter)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    samples: list[tuple[list[float], dict]] = field(default_factory=list)

    @property
    def requests(self) -> int:
        """Requests answered 200."""
        return len(self.latencies)

    @property
    def rate(self) -> float:
        """Solved targets per second."""
        return self.solved / self.seconds

    def percentile(self, p: float) -> float:
        """Latency percentile ``p`` in [0, 100] [ms] of the answered requests."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return 1e3 * ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def rate_between(self, start: float, end: float) -> float:
        """Solved targets per second answered between ``start`` and ``end`` seconds after the start."""
        if end <= start:
            return float("nan")
        return sum(n for t, n in self.timeline if start <= t < end) / (end - start)


async def drive(
    url: str,
    path: str,
    targets: list[dict],
    *,
    clients: int,
    batch: int,
    seconds: float,
    label: str = "",
    body: dict | None = None,
    sample_every: int = 25,
    retry: bool = True,
    on_answer: Callable[[Run, str, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Run:
    """``clients`` loops, each on its own connection, posting ``batch`` targets (from ``targets``, in turn) to
    ``path`` back to back for ``seconds``; a 503 is retried after its ``Retry-After`` (at most 1 s), an error
    without an answer after 0.1 s, each up to :data:`MAX_ATTEMPTS` attempts (``retry`` False: never).

    ``on_answer(run, tag, t)``, if given, is called for each 200 (``t``: seconds since the start);
    ``should_stop()``, if given, ends the run early (checked before each request).
    """
    run = Run(label, clients, batch)
    sessions = [httpx.AsyncClient(base_url=url, timeout=60) for _ in range(clients)]
    began = time.perf_counter()
    stop_at = began + seconds
    answered = 0

    async def one(http: httpx.AsyncClient, k: int) -> None:
        nonlocal answered
        rows = [targets[(k + i) % len(targets)] for i in range(batch)]
        payload = {**(body or {}), "targets": rows}
        start = time.perf_counter()
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                run.retried += 1
            try:
                response = await http.post(path, json=payload)
            except httpx.HTTPError as err:
                run.attempts[type(err).__name__] += 1
                if not retry:
                    break
                await asyncio.sleep(0.1)
                continue
            run.attempts[str(response.status_code)] += 1
            if response.status_code == 200:
                now = time.perf_counter()
                run.latencies.append(now - start)
                solutions = response.json()["solutions"]
                good = sum(1 for s in solutions if s["success"])
                run.solved += good
                run.unsolved += len(solutions) - good
                tag = response.headers.get(REPLICA_HEADER, "-")
                run.replicas[tag] += 1
                run.timeline.append((now - began, good))
                if answered % sample_every == 0:
                    run.samples.extend((s["q"], rows[i]) for i, s in enumerate(solutions[:8]) if s["success"])
                answered += 1
                if on_answer is not None:
                    on_answer(run, tag, now - began)
                return
            if response.status_code == RETRYABLE:
                if "retry-after" not in response.headers:
                    run.no_retry_after += 1
                if not retry:
                    break
                await asyncio.sleep(min(1.0, float(response.headers.get("retry-after", 0.1))))
                continue
            if not retry or response.status_code < 500:
                break
            await asyncio.sleep(0.1)  # a 5xx other than 503: counted, and retried as the client library would
        run.lost += 1

    async def client(index: int, http: httpx.AsyncClient) -> None:
        k = index * batch
        while time.perf_counter() < stop_at and not (should_stop and should_stop()):
            await one(http, k)
            k += clients * batch

    try:
        await asyncio.gather(*(client(i, http) for i, http in enumerate(sessions)))
    finally:
        await asyncio.gather(*(http.aclose() for http in sessions))
    run.seconds = time.perf_counter() - began
    return run


def confirm(robot: ik_layer.Robot, samples: list[tuple[list[float], dict]], tolerances: tuple[float, float]) -> int:
    """How many sampled answers (q, target pose) Pinocchio in float64 does NOT put within ``tolerances`` (position
    [m], orientation [rad]) of their target (the robot's one end-effector frame)."""
    model, data = robot.model, robot.model.createData()
    frame = model.getFrameId(robot.ee_frame)
    bad = 0
    for q, pose in samples:
        qi = robot.to_pinocchio_q(torch.tensor(q, dtype=torch.float64)).double().numpy()
        pin.framesForwardKinematics(model, data, qi)
        reached = data.oMf[frame]
        x, y, z, w = pose["orientation"]
        goal = pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
        position = float(np.linalg.norm(reached.translation - np.asarray(pose["position"])))
        orientation = float(np.linalg.norm(pin.log3(goal @ reached.rotation.T)))
        if position > tolerances[0] * (1 + 1e-6) or orientation > tolerances[1] * (1 + 1e-6):
            bad += 1
    return bad
