"""Load test of the HTTP service: continuous batching vs one request at a time, against the HTTP stack's ceiling.

Starts ``python -m ik_layer.server`` itself on a free loopback port (once as configured, once with
``--max-requests-in-flight 1``: unbatched), lets N async httpx clients send single-pose IK requests back to back
for a fixed time, and prints requests/s, p50/p99 latency, the same clients' rate on ``GET /health`` (a no-op route:
the HTTP stack's ceiling), and the ratios. IK and ``/health`` alternate in ``--rounds`` windows per point; the ratio
to the no-op is the median of each window's against the one beside it (the machine's speed drifts over seconds). A
window counts the requests answered in it once the clients' loops are running (connections open), not their start.
Each point also shows the CPU time the server process (all its threads) and the clients' process spent per answered
request, and the share of a core the clients used: where the clients use a whole core, the point measures them (the
load generator: one event loop handles every response in turn) as much as the server, and the server's CPU per
request is the figure that compares the routes.
``--hostile`` then measures a maximal request (1024 unreachable targets, 64 seeds, 10,000 iterations): when it
answers against its deadline, and the latency of a small IK request and of ``/health`` meanwhile (reachable targets
with tolerances no answer meets, so that only the deadline stops it: targets out of reach are given up at once).

``--stalled N`` measures, instead, what N stalled request bodies cost the server: started with a short
``--read-timeout`` (2 s; quick: 1 s), it gets N connections that each send headers announcing a 4 MiB JSON body
(``Content-Length: 4194304``, the default ``--max-body-bytes``), then 1 MiB of it, and stall. The server's
resident memory (VmRSS of its process) is read before, at its peak while the connections stall, and once the
read timeout has refused them; each must get a 408 or be closed. Meanwhile one client polls ``/health`` and
sends single-pose IK requests, one after the other (max latency of each). The script exits non-zero when a
stalled connection is neither refused nor closed, when the server stops answering, or when its memory after
exceeds that before by more than 30 MiB.

    python bench/server_load.py            # 8 s per point
    python bench/server_load.py --quick    # 2 s per point
    python bench/server_load.py --stalled 32
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import signal
import ssl
import statistics
import sys
import time
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from common import markdown_table

from ik_layer.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
STALL_DECLARED = 4 * 1024 * 1024  # [bytes] Content-Length each stalled client announces: the default --max-body-bytes
STALL_SENT = 1024 * 1024  # [bytes] of it each sends before it stalls
STALL_RSS_SLACK = 30.0  # [MiB] most the server's memory may stay above its level before the stalled clients


@dataclass(frozen=True)
class Point:
    """One measurement: a server mode at one client count."""

    mode: str
    clients: int
    requests: int
    failed: int
    seconds: float
    latencies: list[float]
    window_rates: list[float]  # answered requests per second in each of its windows
    server_cpu: float  # [s] CPU time of the server process (all its threads) over the windows
    client_cpu: float  # [s] CPU time of this process (the clients) over the windows

    @property
    def rate(self) -> float:
        """Answered requests per second."""
        return self.requests / self.seconds

    def ratio(self, other: Point) -> float:
        """The median over windows of this point's rate over ``other``'s in the window beside it."""
        return statistics.median(a / b for a, b in zip(self.window_rates, other.window_rates, strict=True))

    def cpu_per_request(self, seconds: float) -> float:
        """``seconds`` of CPU time per answered request [us]."""
        return 1e6 * seconds / max(self.requests, 1)

    def percentile(self, p: float) -> float:
        """Latency percentile ``p`` in [0, 100] [ms]."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return 1e3 * ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


@contextmanager
def running_server(flags: Sequence[str]) -> Iterator[ServerProcess]:
    """Run ``python -m ik_layer.server`` with ``flags`` on a free loopback port; yield it (``.url``, ``.process``)."""
    server = ServerProcess.start(["--log-level", "warning", *flags], capture=False, cwd=ROOT)
    try:
        yield server
    finally:
        server.stop(signal.SIGTERM, timeout=30)


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` [MiB] (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def cpu_seconds(pid: int) -> float:
    """CPU time process ``pid`` has used so far, all its threads, user and system [s] (Linux)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Window:
    """What one :func:`load` window measured."""

    answered: int
    failed: int
    latencies: list[float]  # [s] of the requests answered in the window
    server_cpu: float  # [s] the server process's CPU time over the window
    client_cpu: float  # [s] this process's CPU time over the window


def reachable_targets(url: str, robot: str, count: int, seed: int) -> list[dict[str, list[float]]]:
    """``count`` poses of random configurations inside the joint limits, from the server's own FK."""
    info = next(r for r in httpx.get(f"{url}/v1/robots").json()["robots"] if r["name"] == robot)
    rng = random.Random(seed)
    q = [[rng.uniform(lo, hi) for lo, hi in zip(info["lower"], info["upper"], strict=False)] for _ in range(count)]
    return httpx.post(f"{url}/v1/robots/{robot}/fk", json={"q": q}).json()["poses"]


async def load(
    url: str,
    robot: str,
    clients: int,
    seconds: float,
    targets: list[dict[str, list[float]]],
    body: dict[str, object] | None,
    server_pid: int,
) -> Window:
    """``clients`` loops posting one target each (``body`` None: ``GET /health``), back to back: the requests
    answered in the ``seconds`` after the loops have settled (failed: all of them), and the CPU time the server
    (process ``server_pid``) and the clients spent meanwhile.

    Each loop has its own ``httpx.AsyncClient`` (one connection): one client pooling 64
    connections spends more CPU than the server it measures. The loops run for :func:`settling` seconds before the
    window opens (their connections opened, each request following the one before), and until it closes: what is
    counted is the steady state, not the clients' start or their last requests.
    """
    latencies: list[float] = []
    failed = 0
    tls = ssl.create_default_context()  # one for all (unused: plain HTTP); httpx makes one per client, 20 ms each
    sessions = [httpx.AsyncClient(base_url=url, timeout=60, verify=tls) for _ in range(clients)]
    opens_at = time.perf_counter() + settling(clients)
    closes_at = opens_at + seconds

    cpu: list[tuple[float, float]] = []  # (server, clients) when the window opens and when it closes

    async def meter() -> None:
        for moment in (opens_at, closes_at):
            await asyncio.sleep(max(moment - time.perf_counter(), 0.0))
            cpu.append((cpu_seconds(server_pid), time.process_time()))

    async def client(index: int, http: httpx.AsyncClient) -> None:
        nonlocal failed
        k = index
        while (start := time.perf_counter()) < closes_at:
            if body is None:
                response = await http.get("/health")
            else:
                response = await http.post(
                    f"/v1/robots/{robot}/ik", json={**body, "targets": [targets[k % len(targets)]]}
                )
            end = time.perf_counter()
            if response.status_code != 200:
                failed += 1
            elif opens_at <= end <= closes_at:
                latencies.append(end - start)
            k += clients

    gc.collect()
    gc.freeze()  # this process's objects (torch among them) out of full passes: each paused every client 0.05-0.15 s
    try:
        await asyncio.gather(meter(), *(client(i, http) for i, http in enumerate(sessions)))
    finally:
        await asyncio.gather(*(http.aclose() for http in sessions))
        gc.unfreeze()
    (server_open, client_open), (server_close, client_close) = cpu
    return Window(len(latencies), failed, latencies, server_close - server_open, client_close - client_open)


def settling(clients: int) -> float:
    """Seconds ``clients`` loops run before a window opens: their connections made and their first requests done."""
    return 0.2 + 0.005 * clients


def measure(mode: str, flags: Sequence[str], args: argparse.Namespace) -> dict[str, list[Point]]:
    """All client counts against one server started with ``flags``: IK requests, and ``/health`` side by side, in
    ``args.rounds`` alternating windows (the machine's speed drifts over seconds: each window's ratio is taken
    against the window beside it)."""
    points: dict[str, list[Point]] = {mode: [], "no-op": []}
    body = {"max_iterations": args.max_iterations}
    window = args.seconds / args.rounds
    with running_server([*flags, "--robots", args.robot]) as server:
        url, pid = server.url, server.process.pid
        targets = reachable_targets(url, args.robot, 512, seed=0)
        for clients in args.clients:
            payloads = {mode: body, "no-op": None}
            for payload in payloads.values():
                asyncio.run(load(url, args.robot, clients, args.warmup, targets, payload, pid))
            windows: dict[str, list[Window]] = {name: [] for name in payloads}
            for _ in range(args.rounds):
                for name, payload in payloads.items():
                    windows[name].append(asyncio.run(load(url, args.robot, clients, window, targets, payload, pid)))
            for name, runs in windows.items():
                p = Point(
                    name,
                    clients,
                    requests=sum(run.answered for run in runs),
                    failed=sum(run.failed for run in runs),
                    seconds=window * len(runs),
                    latencies=[x for run in runs for x in run.latencies],
                    window_rates=[run.answered / window for run in runs],
                    server_cpu=sum(run.server_cpu for run in runs),
                    client_cpu=sum(run.client_cpu for run in runs),
                )
                points[name].append(p)
                print(
                    f"{name:>9} {clients:>7} {p.rate:>9.1f} {p.percentile(50):>9.2f} {p.percentile(99):>9.2f} "
                    f"{p.failed:>6} {p.cpu_per_request(p.server_cpu):>10.0f} {p.cpu_per_request(p.client_cpu):>10.0f} "
                    f"{100 * p.client_cpu / p.seconds:>8.0f}",
                    flush=True,
                )
        if args.hostile:
            asyncio.run(hostile(url, args.robot, targets))
        if args.soak:
            soak(server, args.robot, targets, args.soak, body)
    return points


def soak(server: ServerProcess, robot: str, targets: list[dict[str, list[float]]], seconds: float, body: dict) -> None:
    """64 clients for ``seconds``: failed requests, and the server's memory at the start, half-way and the end."""
    pid = server.process.pid
    before = rss_mib(pid)
    half = asyncio.run(load(server.url, robot, 64, seconds / 2, targets, body, pid))
    middle = rss_mib(pid)
    rest = asyncio.run(load(server.url, robot, 64, seconds / 2, targets, body, pid))
    after = rss_mib(pid)
    print(
        f"\nsoak: 64 clients for {seconds:g} s: {half.answered + rest.answered} answered, "
        f"{half.failed + rest.failed} failed; "
        f"server RSS {before:.0f} -> {middle:.0f} -> {after:.0f} MiB"
    )


async def hostile(url: str, robot: str, targets: list[dict[str, list[float]]]) -> None:
    """A maximal request with a 1 s deadline; meanwhile small IK requests and ``/health``, one after the other."""
    body = {
        "targets": [targets[k % len(targets)] for k in range(1024)],
        "num_seeds": 64,
        "max_iterations": 10_000,
        "position_tolerance": 1e-300,
        "orientation_tolerance": 1e-300,
        "timeout": 1.0,
    }
    async with httpx.AsyncClient(base_url=url, timeout=60) as big, httpx.AsyncClient(base_url=url, timeout=60) as small:
        start = time.perf_counter()
        maximal = asyncio.create_task(big.post(f"/v1/robots/{robot}/ik", json=body))
        ik: list[float] = []
        health: list[float] = []
        k = 0
        while not maximal.done():
            t = time.perf_counter()
            await small.post(f"/v1/robots/{robot}/ik", json={"targets": [targets[k % len(targets)]]})
            ik.append(time.perf_counter() - t)
            t = time.perf_counter()
            await small.get("/health")
            health.append(time.perf_counter() - t)
            k += 1
        answer = await maximal
        took = time.perf_counter() - start
    statuses = {s["status"] for s in answer.json()["solutions"]}
    ik_ms, health_ms = sorted(1e3 * x for x in ik), sorted(1e3 * x for x in health)
    print(
        f"\nmaximal request (1024 never-met targets x 64 seeds x 10,000 iterations, timeout 1 s): "
        f"HTTP {answer.status_code} in {took:.2f} s, statuses {sorted(statuses)}; "
        f"meanwhile {len(ik)} small IK requests: median {ik_ms[len(ik_ms) // 2]:.1f} ms, max {ik_ms[-1]:.1f} ms; "
        f"/health max {health_ms[-1]:.1f} ms"
    )


@dataclass(frozen=True)
class Stalled:
    """What ``clients`` stalled request bodies cost the server: its memory [MiB], their ends, requests beside them."""

    clients: int
    before: float
    during: float  # peak while the stalled connections were open
    after: float
    outcomes: list[str]  # per stalled connection: its HTTP status, "closed", or "open" (neither in time)
    health: list[float]  # latencies [s] of the answered /health polls
    ik: list[float]  # latencies [s] of the answered single-pose IK requests
    failed: int  # polls or IK requests not answered 200

    @property
    def refused(self) -> bool:
        """Whether every stalled connection got a 408 or was closed."""
        return all(outcome in ("408", "closed") for outcome in self.outcomes)

    @property
    def answering(self) -> bool:
        """Whether the server answered every poll and IK request meanwhile (and at least one of each)."""
        return self.failed == 0 and bool(self.health) and bool(self.ik)


async def stall(url: str, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a connection, send headers announcing a :data:`STALL_DECLARED`-byte JSON body and :data:`STALL_SENT`
    bytes of it (a valid JSON prefix), and leave it there."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {STALL_DECLARED}\r\n\r\n"
    )
    prefix = b'{"targets": ['
    writer.write(head.encode() + prefix + b" " * (STALL_SENT - len(prefix)))
    await writer.drain()
    return reader, writer


async def stall_outcome(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float) -> str:
    """The HTTP status the server answers a stalled connection with, "closed" (no answer), or "open" (neither
    within ``timeout`` seconds); the connection is closed on our side afterwards."""
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except asyncio.TimeoutError:  # the builtin TimeoutError only from Python 3.11
        return "open"
    except ConnectionError:
        return "closed"
    finally:
        writer.close()
    return line.split()[1].decode() if line else "closed"


async def stalled(server: ServerProcess, robot: str, targets: list[dict], clients: int, read_timeout: float) -> Stalled:
    """``clients`` stalled bodies against ``server``; one client polls ``/health`` and solves single poses meanwhile.

    Memory before is read after a warm-up of that client; after, once every stalled connection has ended and the
    server had a second to free what they held.
    """
    pid, path = server.process.pid, f"/v1/robots/{robot}/ik"
    health: list[float] = []
    ik: list[float] = []
    failed = 0
    stop = asyncio.Event()

    async def timed(latencies: list[float], request: Awaitable[httpx.Response]) -> None:
        nonlocal failed
        start = time.perf_counter()
        try:
            answered = (await request).status_code == 200
        except httpx.HTTPError:
            answered = False
        if answered:
            latencies.append(time.perf_counter() - start)
        else:
            failed += 1

    async def probe(http: httpx.AsyncClient, k: int) -> None:
        await timed(health, http.get("/health"))
        await timed(ik, http.post(path, json={"targets": [targets[k % len(targets)]]}))

    async def poll(http: httpx.AsyncClient) -> float:
        """Probe until ``stop``; the peak memory seen [MiB]."""
        peak, k = 0.0, 0
        while not stop.is_set():
            await probe(http, k)
            peak, k = max(peak, rss_mib(pid)), k + 1
            await asyncio.sleep(0.01)
        return peak

    async with httpx.AsyncClient(base_url=server.url, timeout=10 * read_timeout) as http:
        for k in range(20):  # warm-up
            await probe(http, k)
        health.clear()
        ik.clear()
        await asyncio.sleep(0.5)
        before = rss_mib(pid)
        polling = asyncio.create_task(poll(http))
        connections = await asyncio.gather(*(stall(server.url, path) for _ in range(clients)))
        sent = rss_mib(pid)
        outcomes = await asyncio.gather(
            *(stall_outcome(reader, writer, 2 * read_timeout + 10) for reader, writer in connections)
        )
        stop.set()
        peak = max(sent, await polling)
    await asyncio.sleep(1.0)
    return Stalled(clients, before, peak, rss_mib(pid), list(outcomes), health, ik, failed)


def measure_stalled(flags: Sequence[str], args: argparse.Namespace) -> int:
    """``--stalled``: one server with a short read timeout, ``args.stalled`` stalled bodies; print the table."""
    flags = [*flags, "--robots", args.robot, "--read-timeout", f"{args.read_timeout:g}"]
    with running_server(flags) as server:
        targets = reachable_targets(server.url, args.robot, 64, seed=0)
        run = asyncio.run(stalled(server, args.robot, targets, args.stalled, args.read_timeout))
    others = sorted({o for o in run.outcomes if o not in ("408", "closed")})
    header = [
        "stalled", "RSS before [MiB]", "during (peak)", "after", "after - before", "408", "closed", "other",
        "/health max [ms]", "small IK max [ms]", "failed",
    ]  # fmt: skip
    row = [
        str(run.clients),
        f"{run.before:.0f}",
        f"{run.during:.0f}",
        f"{run.after:.0f}",
        f"{run.after - run.before:+.1f}",
        str(run.outcomes.count("408")),
        str(run.outcomes.count("closed")),
        ", ".join(f"{o} x{run.outcomes.count(o)}" for o in others) or "-",
        f"{1e3 * max(run.health, default=float('nan')):.1f}",
        f"{1e3 * max(run.ik, default=float('nan')):.1f}",
        str(run.failed),
    ]
    print(markdown_table(header, [row]))
    print(
        f"\ngoals: every stalled connection refused (408) or closed: {'yes' if run.refused else 'NO'}; "
        f"server answering meanwhile ({len(run.health)} /health, {len(run.ik)} IK): "
        f"{'yes' if run.answering else 'NO'}; "
        f"RSS after within {STALL_RSS_SLACK:g} MiB of before: {run.after - run.before:+.1f} MiB"
    )
    return 0 if run.refused and run.answering and run.after - run.before <= STALL_RSS_SLACK else 1


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 s per point instead of 8 (--stalled: 1 s read timeout)")
    parser.add_argument("--robot", default="ur5e")
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=None, help="measured time per point [s]")
    parser.add_argument("--hostile", action="store_true", help="also time a maximal request and requests beside it")
    parser.add_argument("--soak", type=float, default=0, help="then load 64 clients for this long [s], memory watched")
    parser.add_argument(
        "--stalled", type=int, default=0, metavar="N", help="instead: N clients stall 4 MiB bodies, memory watched"
    )
    parser.add_argument("--read-timeout", type=float, help="server's --read-timeout with --stalled [s] (2; quick: 1)")
    parser.add_argument("--json", type=Path, help="also write the points here (plotted by bench/report.py)")
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4, help="alternating IK / no-op windows per point")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (2.0 if args.quick else 8.0)
    args.warmup = min(1.0, args.seconds / 4)
    args.read_timeout = args.read_timeout or (1.0 if args.quick else 2.0)
    if args.stalled < 0 or args.read_timeout <= 0 or args.rounds < 1:
        parser.error("--stalled must be >= 0, --read-timeout positive and --rounds at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    common = ["--device", args.device, "--max-targets", "1024"]
    if args.stalled:
        print(
            f"stalled bodies: {args.stalled} clients send {STALL_SENT >> 20} MiB of {STALL_DECLARED >> 20} MiB "
            f"and stall; server --read-timeout {args.read_timeout:g} s, {args.robot} on {args.device}"
        )
        return measure_stalled(common, args)
    print(f"server load: {args.robot} on {args.device}, single-pose IK requests, {args.seconds:g} s per point")
    print(
        f"{'mode':>9} {'clients':>7} {'req/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'failed':>6} {'server us':>10} "
        f"{'client us':>10} {'client %':>8}"
    )
    batched = measure("batched", common, args)
    args.hostile, args.soak = False, 0
    unbatched = measure("unbatched", [*common, "--max-requests-in-flight", "1"], args)["unbatched"]
    print("\nratios (goals at 64 clients: >= 0.5x no-op, >= 10x unbatched, p99 <= 5x p50):")
    for on, noop, off in zip(batched["batched"], batched["no-op"], unbatched, strict=True):
        print(
            f"  {on.clients:>3} clients: {on.ratio(noop):5.2f}x no-op, {on.rate / off.rate:6.2f}x unbatched, "
            f"p99/p50 {on.percentile(99) / on.percentile(50):5.2f}, "
            f"p50 {on.percentile(50) - noop.percentile(50):+.2f} ms vs no-op, server CPU per request "
            f"{on.cpu_per_request(on.server_cpu):.0f} us vs {noop.cpu_per_request(noop.server_cpu):.0f} us"
        )
    if args.json:
        points = [*batched["batched"], *unbatched]
        rows = [
            {
                "clients": p.clients,
                "batching": p.mode == "batched",
                "throughput_rps": p.rate,
                "p99_ms": p.percentile(99),
            }
            for p in points
        ]
        args.json.write_text(json.dumps({"results": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
