"""Load test of the HTTP service: micro-batching on vs off, at 1, 8 and 64 concurrent clients.

Starts ``python -m ik_layer.server`` itself on a free loopback port (once with
micro-batching, once with ``--max-batch 1``), lets N async httpx clients send
single-pose IK requests back to back for a fixed time, and prints requests/s,
p50/p99 latency and the throughput ratio batched / unbatched.

    python bench/server_load.py            # 8 s per point
    python bench/server_load.py --quick    # 2 s per point
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from ik_layer.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Point:
    """One measurement: a server mode at one client count."""

    mode: str
    clients: int
    requests: int
    failed: int
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        """Answered requests per second."""
        return self.requests / self.seconds

    def percentile(self, p: float) -> float:
        """Latency percentile ``p`` in [0, 100] [ms]."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return 1e3 * ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


@contextmanager
def running_server(flags: Sequence[str]) -> Iterator[str]:
    """Run ``python -m ik_layer.server`` with ``flags`` on a free loopback port; yield its base URL."""
    server = ServerProcess.start(["--log-level", "warning", *flags], capture=False, cwd=ROOT)
    try:
        yield server.url
    finally:
        server.stop(signal.SIGTERM, timeout=30)


def reachable_targets(url: str, robot: str, count: int, seed: int) -> list[dict[str, list[float]]]:
    """``count`` poses of random configurations inside the joint limits, from the server's own FK."""
    info = next(r for r in httpx.get(f"{url}/v1/robots").json()["robots"] if r["name"] == robot)
    rng = random.Random(seed)
    q = [[rng.uniform(lo, hi) for lo, hi in zip(info["lower"], info["upper"], strict=False)] for _ in range(count)]
    return httpx.post(f"{url}/v1/robots/{robot}/fk", json={"q": q}).json()["poses"]


async def load(
    url: str, robot: str, clients: int, seconds: float, targets: list[dict[str, list[float]]], body: dict[str, object]
) -> tuple[int, int, list[float]]:
    """``clients`` loops posting one target each, back to back, for ``seconds``; (answered, failed, latencies [s]).

    Each loop has its own ``httpx.AsyncClient`` (one connection): one client pooling 64
    connections spends more CPU than the server it measures.
    """
    latencies: list[float] = []
    failed = 0
    sessions = [httpx.AsyncClient(base_url=url, timeout=60) for _ in range(clients)]

    async def client(index: int, http: httpx.AsyncClient, stop_at: float) -> None:
        nonlocal failed
        k = index
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            response = await http.post(f"/v1/robots/{robot}/ik", json={**body, "targets": [targets[k % len(targets)]]})
            if response.status_code == 200:
                latencies.append(time.perf_counter() - start)
            else:
                failed += 1
            k += clients

    stop_at = time.perf_counter() + seconds
    try:
        await asyncio.gather(*(client(i, http, stop_at) for i, http in enumerate(sessions)))
    finally:
        await asyncio.gather(*(http.aclose() for http in sessions))
    return len(latencies), failed, latencies


def measure(mode: str, flags: Sequence[str], args: argparse.Namespace) -> list[Point]:
    """All client counts against one server started with ``flags``."""
    points = []
    body = {"max_iterations": args.max_iterations}
    with running_server([*flags, "--robots", args.robot]) as url:
        targets = reachable_targets(url, args.robot, 512, seed=0)
        for clients in args.clients:
            asyncio.run(load(url, args.robot, clients, args.warmup, targets, body))
            start = time.perf_counter()
            answered, failed, latencies = asyncio.run(load(url, args.robot, clients, args.seconds, targets, body))
            points.append(Point(mode, clients, answered, failed, time.perf_counter() - start, latencies))
            p = points[-1]
            print(
                f"{mode:>9} {clients:>7} {p.rate:>9.1f} {p.percentile(50):>9.2f} {p.percentile(99):>9.2f} {failed:>6}",
                flush=True,
            )
    return points


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 s per point instead of 8")
    parser.add_argument("--robot", default="ur5e")
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=None, help="measured time per point [s]")
    parser.add_argument("--max-batch", type=int, default=256, help="micro-batch size of the batched server")
    parser.add_argument("--max-wait-ms", type=float, default=2.0, help="micro-batch wait of the batched server")
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (2.0 if args.quick else 8.0)
    args.warmup = min(1.0, args.seconds / 4)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"server load: {args.robot} on {args.device}, single-pose IK requests, {args.seconds:g} s per point")
    print(f"{'mode':>9} {'clients':>7} {'req/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'failed':>6}")
    common = ["--device", args.device]
    batched = measure(
        "batched", [*common, "--max-batch", str(args.max_batch), "--max-wait-ms", str(args.max_wait_ms)], args
    )
    unbatched = measure("unbatched", [*common, "--max-batch", "1", "--max-wait-ms", "0"], args)
    print("\nthroughput ratio batched / unbatched (target >= 10x at 64 clients):")
    for on, off in zip(batched, unbatched, strict=False):
        ratio = on.rate / off.rate if off.rate else float("inf")
        p99 = on.percentile(99) / off.percentile(99) if off.latencies else float("nan")
        print(f"  {on.clients:>3} clients: {ratio:6.2f}x requests/s, p99 latency {p99:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
