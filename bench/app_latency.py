"""The service's own time for a lone request: the ASGI app called in this process, no socket and no client library.

``bench/server_load.py`` times requests over HTTP from a load generator on the same machine, whose own work and
the operating system's are most of a lone request's latency and swing between runs. This script calls the app as
uvicorn does (``app(scope, receive, send)``, the lifespan running, the robot loaded and warmed up), one request after
another, and times each call from its first byte in to its last byte out: ``GET /health`` (the no-op route) and a
single-pose ``POST /v1/robots/{robot}/ik`` of new reachable targets (``fk`` of random configurations), in
alternating rounds. It prints the medians and p99s, their ratio and difference; every IK answer is re-checked with
Pinocchio in float64 (the exit status is 1 if a success is not confirmed). To compare two checkouts, run it from
each (``PYTHONPATH=<checkout>``) on the same machine.

Called back to back, a request finds the processor's caches holding the one before it; in a server, the client's
work, the network stack's and the other processes' run between two requests. ``--evict MB`` writes over MB of
memory before each timed call (untimed), so that each call starts from cold caches: 32 is this machine's
last-level cache.

    python bench/app_latency.py --threads 1                     # ur5e, 3 rounds of 1,000 requests each
    python bench/app_latency.py --threads 1 --evict 32          # each request from cold caches
    python bench/app_latency.py --robot panda --requests 300 --rounds 1
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence

import numpy as np
import torch
from common import apply_threads_and_describe, benchmark_parser, markdown_table
from fastapi import FastAPI
from ik_vs_peers import STRICT, succeeded, verify

from ik_layer.model.lie import matrix_to_pose
from ik_layer.server import Settings, create_app


async def call(app: FastAPI, method: str, path: str, body: bytes = b"") -> tuple[float, int, bytes]:
    """Seconds from the request's arrival to its answer's last byte, its status and body."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        "headers": [(b"host", b"bench"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    answered = asyncio.Event()
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    status: list[int] = []
    chunks: list[bytes] = []

    async def receive() -> dict:
        if pending:
            return pending.pop()
        await answered.wait()  # the client stays connected until its answer is in
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    start = time.perf_counter()
    await app(scope, receive, send)
    seconds = time.perf_counter() - start
    answered.set()
    return seconds, status[0], b"".join(chunks)


class Evictor:
    """Writes over ``megabytes`` of memory when called: what the caches held is gone (none for 0)."""

    def __init__(self, megabytes: float) -> None:
        self.buffer = np.zeros(int(megabytes * 2**20) // 8)

    def __call__(self) -> None:
        self.buffer[::8] += 1.0  # one write per 64-byte cache line


async def measure(
    robot_name: str, requests: int, rounds: int, evict: Evictor
) -> tuple[dict[str, list[float]], int, int]:
    """Per route, the seconds of every timed call (each after ``evict``); the IK successes and those Pinocchio does
    not confirm."""
    app = create_app(Settings(robots=[robot_name]))
    times: dict[str, list[float]] = {"health": [], "ik": []}
    solved = refuted = 0
    async with app.router.lifespan_context(app):
        robot = app.state.ik.robots[robot_name].robot
        path = f"/v1/robots/{robot_name}/ik"
        generator = torch.Generator().manual_seed(0)
        for round_ in range(rounds + 1):  # the first round warms up, untimed
            target = robot.fk(robot.random_q((requests,), generator=generator))
            poses = matrix_to_pose(target).tolist()
            health, ik, q = [], [], []
            for pose in poses:
                evict()
                health.append((await call(app, "GET", "/health"))[0])
                body = json.dumps({"targets": [{"position": pose[:3], "orientation": pose[3:]}]}).encode()
                evict()
                seconds, status, answer = await call(app, "POST", path, body)
                if status != 200:
                    raise SystemExit(f"app_latency.py: the IK route answered {status}: {answer[:200]!r}")
                ik.append(seconds)
                q.append(json.loads(answer)["solutions"][0])
            if round_ == 0:
                continue
            times["health"] += health
            times["ik"] += ik
            success = np.array([s["success"] for s in q])
            pos, ori, _ = verify(robot, torch.tensor([s["q"] for s in q], dtype=torch.float64), target.numpy())
            solved += int(success.sum())
            refuted += int((success & ~succeeded(pos, ori, STRICT)).sum())
    return times, solved, refuted


def main(argv: Sequence[str] | None = None) -> int:
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--robot", default="ur5e")
    parser.add_argument("--requests", type=int, default=1000, help="requests per route and round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds, after one untimed")
    parser.add_argument("--evict", type=float, default=0, metavar="MB", help="write over MB of memory before each call")
    args = parser.parse_args(argv)
    if args.evict < 0:
        parser.error("--evict must be >= 0")
    machine = apply_threads_and_describe(args.threads)
    times, solved, refuted = asyncio.run(measure(args.robot, args.requests, args.rounds, Evictor(args.evict)))
    rows = []
    for route, seconds in times.items():
        us = np.array(seconds) * 1e6
        rows.append([route, f"{statistics.median(us):.0f}", f"{np.percentile(us, 99):.0f}", f"{len(us):,}"])
    health, ik = (statistics.median(times[route]) for route in ("health", "ik"))
    caches = f"{args.evict:g} MB evicted before each" if args.evict else "back to back"
    print(f"{args.robot}, {args.rounds} x {args.requests} requests per route, in process, {caches}; {machine}\n")
    print(markdown_table(["route", "median [us]", "p99 [us]", "requests"], rows))
    print(f"\nIK / health: {health / ik:.2f}x the rate, +{(ik - health) * 1e6:.0f} us per request")
    print(f"IK successes: {solved:,} of {len(times['ik']):,}; not confirmed by Pinocchio: {refuted}")
    return 1 if refuted else 0


if __name__ == "__main__":
    sys.exit(main())
