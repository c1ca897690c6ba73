"""Scale-out on Ray Serve (issue 44): 1 vs 2 replicas, Ray's overhead, replicas killed or stuck, routing.

Starts a local Ray cluster (``num_cpus`` = this machine's cores, no GPU), deploys ``ik_layer.deploy.ray_serve``
with 1 then 2 CPU replicas (1 CPU each) of one robot, and drives single-pose and 256-target IK requests from
concurrent clients (``bench/load_clients.py``: one connection each, back to back) for a few seconds per point:
solved targets/s, p50/p99 latency, and the 2/1 replica ratio, all in the same run. Before Ray, the plain server
(``python -m ik_layer.server`` in a child process, as ``bench/server_load.py`` starts it) on the same cores gives
the same points: Ray's per-request overhead is the p50 difference at one client. Every answer is counted by status;
each 200's success flags are counted, and a sample of the solved targets (8 rows of one answer in 25) is re-checked
with Pinocchio's FK in float64. After the 2-replica points the replicas' ``/metrics`` are read one by one (the
``x-ik-layer-replica`` header says which answered): their IK request counters must add up to the requests sent.

``--routing``: two robots as per-robot applications (``/v1/robots/<name>``, one replica each) against two shared
replicas holding both, under the same mixed load: rates, which replicas answered which robot, per-robot metrics.

``--haproxy``: Ray Serve 2.60's HAProxy ingress (feature flag ``RAY_SERVE_ENABLE_HA_PROXY=1``) in front instead of
the Python proxy's HTTP server.

``--faults``: (a) 2 replicas under load, one replica's process killed (SIGKILL, its pid from the answers' header):
every attempt's status, requests lost (no 200 after retrying 503s after ``Retry-After`` and errors), when a new
replica answers, the rate before / while one replica serves / after; (b) a maximal request (1024 targets, 64
seeds, 10,000 iterations, tolerances no answer meets, 10 s deadline) on one replica while small requests go on.

Exits 1 on a request lost, a success Pinocchio does not confirm, or metrics that do not add up.

    python bench/scale_out.py                      # 5 s per point
    python bench/scale_out.py --quick              # 2 s per point
    python bench/scale_out.py --faults --routing   # and the fault and routing sections
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import httpx
import torch
from common import markdown_table
from load_clients import Run, confirm, drive
from prometheus_client.parser import text_string_to_metric_families
from server_load import reachable_targets, running_server

import ik_layer

ROOT = Path(__file__).resolve().parents[1]
IK_ENDPOINT = "/v1/robots/{name}/ik"


def ik_path(robot: str) -> str:
    return f"/v1/robots/{robot}/ik"


def wait_healthy(url: str, path: str = "/health", within: float = 180) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}{path}", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url}{path} not healthy within {within} s")


def points(
    url: str, robot: str, targets: list[dict], args: argparse.Namespace, label: str, server_pid: int | None = None
) -> list[Run]:
    """The measured points of one deployment: single pose at 1 and ``--clients`` clients, 256 targets at
    ``--batch-clients`` clients (each after a warm-up of ``args.warmup`` seconds, also counted); the cores each
    part used meanwhile (``server_pid``: the plain server's process)."""
    runs = []
    for clients, batch in ((1, 1), (args.clients, 1), (args.batch_clients, 256)):
        warm = asyncio.run(
            drive(url, ik_path(robot), targets, clients=clients, batch=batch, seconds=args.warmup, label=label)
        )
        args.sent[label] += sum(v for k, v in warm.attempts.items() if k.isdigit())
        meter = CpuMeter(server_pid)
        meter.start()
        run = asyncio.run(
            drive(url, ik_path(robot), targets, clients=clients, batch=batch, seconds=args.seconds, label=label)
        )
        cpu = meter.stop()
        args.sent[label] += sum(v for k, v in run.attempts.items() if k.isdigit())
        runs.append(run)
        print(
            f"{label:>12} {clients:>7} {batch:>5} {run.rate:>9.1f} {run.percentile(50):>8.2f} "
            f"{run.percentile(99):>8.2f} {dict(run.attempts)} replicas {len(run.replicas)}; cores used: {cpu}",
            flush=True,
        )
    return runs


def check_runs(runs: Sequence[Run], robot: ik_layer.Robot, failures: list[str]) -> None:
    """Lost requests and Pinocchio's verdict on the sampled successes of ``runs``."""
    tolerances = (ik_layer.SolveOptions().position_tolerance, ik_layer.SolveOptions().orientation_tolerance)
    for run in runs:
        if run.lost:
            failures.append(f"{run.label} {run.clients}x{run.batch}: {run.lost} requests lost")
        bad = confirm(robot, run.samples, tolerances)
        if bad:
            failures.append(f"{run.label} {run.clients}x{run.batch}: {bad} of {len(run.samples)} not confirmed")


def replica_metrics(url: str, path: str = "/metrics", replicas: int = 2, rounds: int = 30) -> dict[str, float]:
    """IK requests counted by each replica (``ik_layer_requests_total`` of the IK route, every status), read
    through the proxy until ``replicas`` distinct replicas have answered ``path``: 16 requests at once per round
    (one at a time, Ray's router may send every one to the same idle replica)."""
    seen: dict[str, float] = {}

    async def one_round(http: httpx.AsyncClient) -> list[httpx.Response]:
        return list(await asyncio.gather(*(http.get(path) for _ in range(16))))

    async def collect() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            for _ in range(rounds):
                for response in await one_round(http):
                    tag = response.headers.get("x-ik-layer-replica", "-")
                    if tag not in seen:
                        seen[tag] = ik_requests(response.text)
                if len(seen) >= replicas:
                    return

    asyncio.run(collect())
    return seen


def ik_requests(metrics: str) -> float:
    """The IK route's ``ik_layer_requests_total``, every status, in one replica's ``/metrics`` text."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "ik_layer_requests_total" and sample.labels.get("endpoint") == IK_ENDPOINT
    )


class CpuMeter:
    """Cores used by the servers (Ray's replicas of ik-layer, or the plain server's process), Ray's HTTP proxy (or
    HAProxy), this process (the clients), the rest of Ray, and everything else on the machine (other users
    included), between :meth:`start` and :meth:`stop` (Linux /proc). Per process, the CPU time it used in between
    (all of it if it started in between); a process that exits in between counts in "rest of machine"."""

    GROUPS = ("servers", "proxy", "clients", "other ray", "rest of machine")

    def __init__(self, server_pid: int | None = None) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.server_pid = server_pid
        self.before: dict[int, float] = {}
        self.busy = 0.0

    def _group(self, pid: int, cmd: str) -> str | None:
        if pid == os.getpid():
            return "clients"
        if pid == self.server_pid or "ServeReplica:ik-layer" in cmd:
            return "servers"
        if "ProxyActor" in cmd or "haproxy" in cmd:
            return "proxy"
        if "ray" in cmd:
            return "other ray"
        return None

    def _sample(self) -> tuple[dict[int, tuple[str, float]], float]:
        used: dict[int, tuple[str, float]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            group = self._group(int(entry), cmd)
            if group is not None:
                used[int(entry)] = (group, (int(fields[11]) + int(fields[12])) / self.tick)
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:8]]
        return used, (sum(ticks) - ticks[3] - ticks[4]) / self.tick  # busy: all but idle and iowait

    def start(self) -> None:
        used, self.busy = self._sample()
        self.before = {pid: seconds for pid, (_, seconds) in used.items()}
        self.began = time.perf_counter()

    def stop(self) -> str:
        used, busy = self._sample()
        seconds = time.perf_counter() - self.began
        cores = dict.fromkeys(self.GROUPS, 0.0)
        for pid, (group, total) in used.items():
            cores[group] += (total - self.before.get(pid, 0.0)) / seconds
        cores["rest of machine"] = (busy - self.busy) / seconds - sum(cores.values())
        return ", ".join(f"{k} {v:.2f}" for k, v in cores.items())


def rows_of(runs: Sequence[Run], baseline: dict[tuple[int, int], Run] | None = None) -> list[list[str]]:
    rows = []
    for run in runs:
        ratio = f"{run.rate / baseline[(run.clients, run.batch)].rate:.2f}x" if baseline else "-"
        rows.append(
            [
                run.label,
                "single pose" if run.batch == 1 else f"{run.batch} targets",
                str(run.clients),
                f"{run.rate:.0f}",
                f"{run.percentile(50):.2f}",
                f"{run.percentile(99):.2f}",
                ratio,
                f"{run.solved}/{run.solved + run.unsolved}",
                " ".join(f"{k}:{v}" for k, v in sorted(run.attempts.items())),
            ]
        )
    return rows


HEADER = ["deployment", "requests", "clients", "solved/s", "p50 [ms]", "p99 [ms]", "vs 1 replica", "solved"]
HEADER += ["statuses"]


def deploy(settings, replicas: int, *, per_robot: bool = False) -> list:
    """``serve.run`` the applications of ``settings`` with ``replicas`` replicas of 1 CPU (per robot)."""
    from ik_layer.deploy.ray_serve import build_applications, run_applications

    applications = build_applications(settings, per_robot=per_robot, num_replicas=replicas, cpus_per_replica=1)
    run_applications(applications)
    return applications


def faults(url: str, robot: str, targets: list[dict], args: argparse.Namespace, failures: list[str]) -> list[str]:
    """Kill one replica's process under load; then a maximal request beside small ones. Lines of the report."""
    lines = []
    seconds = args.fault_seconds + args.recover_seconds  # at most; the run ends 10 s after the replica is back
    kill_at = args.fault_seconds
    state: dict[str, object] = {"killed": None, "killed_at": None, "back_at": None, "before": set(), "now": 0.0}

    def on_answer(run: Run, tag: str, t: float) -> None:
        state["now"] = t
        if state["killed"] is None:
            state["before"].add(tag)  # type: ignore[union-attr]
            if t >= kill_at and len(state["before"]) >= 2:  # type: ignore[arg-type]
                victim = sorted(state["before"])[0]  # type: ignore[call-overload]
                os.kill(int(victim.split()[1]), signal.SIGKILL)
                state["killed"], state["killed_at"] = victim, t
        elif state["back_at"] is None and tag not in state["before"]:  # type: ignore[operator]
            state["back_at"] = t

    def recovered() -> bool:  # the new replica has answered for args.after_seconds
        back, now = state["back_at"], state["now"]
        return isinstance(back, float) and isinstance(now, float) and now > back + args.after_seconds

    run = asyncio.run(
        drive(
            url, ik_path(robot), targets, clients=args.fault_clients, batch=16, seconds=seconds, label="kill",
            on_answer=on_answer,
            should_stop=recovered,
        )
    )  # fmt: skip
    check_runs([run], args.robot_model, failures)
    killed_at, back_at = state["killed_at"], state["back_at"]
    if killed_at is None:
        failures.append("faults: no replica was killed (fewer than 2 replicas answered)")
        return lines
    assert isinstance(killed_at, float)
    end = run.seconds
    back = back_at if isinstance(back_at, float) else end
    before, during = run.rate_between(1.0, killed_at), run.rate_between(killed_at, back)
    after = run.rate_between(back + 1.0, end) if isinstance(back_at, float) else float("nan")
    lines.append(
        f"kill: {args.fault_clients} clients x 16 targets for {run.seconds:.0f} s; replica {state['killed']} "
        f"SIGKILLed at {killed_at:.1f} s; a new replica answered "
        + (f"at {back_at:.1f} s ({back_at - killed_at:.1f} s later)" if isinstance(back_at, float) else "NEVER")
    )
    lines.append(
        f"  attempts by status: {dict(sorted(run.attempts.items()))}; 503 without Retry-After: {run.no_retry_after}; "
        f"retried attempts: {run.retried}; requests answered 200: {run.requests}; lost: {run.lost}"
    )
    lines.append(
        f"  solved targets/s: before {before:.0f}, one replica down {during:.0f}, after {after:.0f} "
        f"(after/before {after / before:.2f}); answers by replica: {dict(run.replicas)}"
    )
    if not isinstance(back_at, float):
        failures.append("faults: the killed replica did not come back")
    lines.extend(stuck(url, robot, targets, args))
    return lines


def stuck(url: str, robot: str, targets: list[dict], args: argparse.Namespace) -> list[str]:
    """A maximal request (10 s deadline) while 4 clients send single poses: its answer, the small ones' latency."""
    maximal = {
        "targets": [targets[k % len(targets)] for k in range(1024)],
        "num_seeds": 64,
        "max_iterations": 10_000,
        "position_tolerance": 1e-300,
        "orientation_tolerance": 1e-300,
        "timeout": 10.0,
    }

    async def scenario() -> tuple[Run, Run, httpx.Response, float, float]:
        before = await drive(url, ik_path(robot), targets, clients=4, batch=1, seconds=3, label="before")
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            start = time.perf_counter()
            big = asyncio.create_task(http.post(ik_path(robot), json=maximal))
            await asyncio.sleep(0.5)
            meanwhile = await drive(url, ik_path(robot), targets, clients=4, batch=1, seconds=8, label="meanwhile")
            answer = await big
            return before, meanwhile, answer, time.perf_counter() - start, start

    before, meanwhile, answer, took, _ = asyncio.run(scenario())
    big_tag = answer.headers.get("x-ik-layer-replica", "-")
    statuses = Counter(s["status"] for s in answer.json()["solutions"]) if answer.status_code == 200 else {}
    lines = [
        f"stuck: 1024 targets x 64 seeds x 10,000 iterations, never-met tolerances, timeout 10 s: HTTP "
        f"{answer.status_code} after {took:.1f} s from replica {big_tag}, rows {dict(statuses)}",
        f"  small requests (4 clients, single pose) before: {before.requests / before.seconds:.0f}/s, p50 "
        f"{before.percentile(50):.1f} ms, p99 {before.percentile(99):.1f} ms; during: "
        f"{meanwhile.requests / meanwhile.seconds:.0f}/s, p50 {meanwhile.percentile(50):.1f} ms, p99 "
        f"{meanwhile.percentile(99):.1f} ms; statuses {dict(meanwhile.attempts)}; lost {meanwhile.lost}",
        f"  during, answers by replica: {dict(meanwhile.replicas)} (the maximal request's: {big_tag})",
    ]
    return lines


def routing(url: str, _: str, __: list[dict], args: argparse.Namespace, failures: list[str]) -> list[str]:
    """Two robots, mixed 256-target load: per-robot applications against shared replicas."""
    from ray import serve

    from ik_layer.server.settings import Settings

    robots = [args.robot, args.second_robot]
    settings = Settings(robots=robots, device="cpu", max_targets=1024)
    lines = []
    results = {}
    for layout in ("per-robot", "shared"):
        for name in serve.status().applications:
            serve.delete(name)
        per_robot = layout == "per-robot"
        deploy(settings, 1 if per_robot else 2, per_robot=per_robot)
        wait_healthy(url)
        pools = {r: reachable_targets(url, r, 512, seed=1) for r in robots}
        for r in robots:
            wait_healthy(url, f"/v1/robots/{r}/health" if per_robot else "/health")

        async def mixed() -> list[Run]:
            return list(
                await asyncio.gather(
                    *(
                        drive(url, ik_path(r), pools[r], clients=2, batch=256, seconds=args.seconds, label=f"{r}")
                        for r in robots
                    )
                )
            )

        warm = asyncio.run(mixed())
        runs = asyncio.run(mixed())
        sent = {
            r: sum(v for run in (w, m) for k, v in run.attempts.items() if k.isdigit())
            for r, w, m in zip(robots, warm, runs, strict=True)
        }
        for run, r in zip(runs, robots, strict=True):
            if run.lost:
                failures.append(f"routing {layout} {r}: {run.lost} lost")
        results[layout] = runs
        tags = {r: set(run.replicas) for r, run in zip(robots, runs, strict=True)}
        line = f"{layout}: " + ", ".join(
            f"{run.label} {run.rate:.0f} solved/s (p50 {run.percentile(50):.0f} ms) from {len(run.replicas)} replica(s)"
            for run in runs
        )
        line += f"; total {sum(run.rate for run in runs):.0f} solved/s"
        if per_robot:
            disjoint = not (tags[robots[0]] & tags[robots[1]])
            line += f"; no replica answered both robots: {'yes' if disjoint else 'NO'}"
            if not disjoint:
                failures.append("routing: a replica answered both robots")
            for r in robots:  # every IK request for r since the deploy went to r's replica: its counter says so
                counted = replica_metrics(url, f"/v1/robots/{r}/metrics", replicas=1, rounds=1)
                line += f"; {r}'s replica counted {sum(counted.values()):.0f} IK requests, sent {sent[r]}"
                if sum(counted.values()) != sent[r]:
                    failures.append(f"routing: {r}'s metrics {sum(counted.values()):.0f} != {sent[r]} sent")
        lines.append(line)
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 s per point instead of 5")
    parser.add_argument("--robot", default="ur5e")
    parser.add_argument("--seconds", type=float, default=None, help="measured time per point [s]")
    parser.add_argument("--clients", type=int, default=16, help="clients of single-pose requests (and 1)")
    parser.add_argument("--batch-clients", type=int, default=4, help="clients of 256-target requests")
    parser.add_argument("--faults", action="store_true", help="also kill a replica under load, and block one")
    parser.add_argument("--fault-seconds", type=float, default=None, help="load before the kill [s] (8; quick: 5)")
    parser.add_argument("--recover-seconds", type=float, default=240, help="most load after the kill [s]")
    parser.add_argument("--after-seconds", type=float, default=10, help="load once the new replica answers [s]")
    parser.add_argument("--fault-clients", type=int, default=8)
    parser.add_argument("--routing", action="store_true", help="also compare per-robot and shared applications")
    parser.add_argument("--second-robot", default="panda", help="the other robot of --routing")
    parser.add_argument(
        "--raw-proxy-errors", action="store_true", help="leave Ray's proxy errors as they are (no 503 middleware)"
    )
    parser.add_argument(
        "--haproxy", action="store_true", help="Ray Serve's HAProxy ingress (RAY_SERVE_ENABLE_HA_PROXY=1)"
    )
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="Ray's num_cpus (default: cores)")
    args = parser.parse_args(argv)
    args.seconds = args.seconds or (2.0 if args.quick else 5.0)
    args.warmup = min(1.0, args.seconds / 4)
    args.fault_seconds = args.fault_seconds or (5.0 if args.quick else 8.0)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.sent = Counter()
    args.robot_model = ik_layer.load_robot(args.robot).to(dtype=torch.float64)
    failures: list[str] = []
    print(
        f"scale-out: {args.robot} on the CPU, {args.cpus} cores for Ray (num_cpus), {os.cpu_count()} on the machine; "
        f"{args.seconds:g} s per point"
    )
    print(f"{'deployment':>12} {'clients':>7} {'batch':>5} {'solved/s':>9} {'p50 ms':>8} {'p99 ms':>8} statuses")
    flags = ["--device", "cpu", "--max-targets", "1024", "--robots", args.robot]
    with running_server(flags) as server:
        targets = reachable_targets(server.url, args.robot, 1024, seed=0)
        plain = points(server.url, args.robot, targets, args, "plain server", server.process.pid)

    import ray
    from ray import serve

    from ik_layer.deploy.ray_serve import PROXY_CALLBACK
    from ik_layer.server.settings import Settings
    from ik_layer.testing import free_port

    pythonpath = os.pathsep.join(filter(None, (os.environ.get("PYTHONPATH"), str(ROOT))))
    if not args.raw_proxy_errors:  # the proxy's 500 for a dead replica's requests -> 503 + Retry-After
        os.environ.setdefault(*PROXY_CALLBACK)
    if args.haproxy:  # Ray 2.60's feature flag: HAProxy in front instead of the Python proxy's HTTP server
        os.environ["RAY_SERVE_ENABLE_HA_PROXY"] = "1"
    ray.init(
        num_cpus=args.cpus,
        num_gpus=0,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": pythonpath}},
    )
    lines: list[str] = []
    try:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        settings = Settings(robots=[args.robot], device="cpu", max_targets=1024)
        ray_runs: dict[int, list[Run]] = {}
        kind = "ray+haproxy" if args.haproxy else "ray"
        labels = {1: f"{kind} 1 replica", 2: f"{kind} 2 replicas"}
        for replicas in (1, 2):
            began = time.perf_counter()
            deploy(settings, replicas)
            wait_healthy(url)
            print(f"  {replicas} replica(s) deployed and healthy in {time.perf_counter() - began:.1f} s", flush=True)
            ray_runs[replicas] = points(url, args.robot, targets, args, labels[replicas])
        counted = replica_metrics(url, replicas=2)
        # serve.run of 2 replicas is a new version of the deployment: Ray replaced the 1-replica one (and its counts)
        sent = args.sent[labels[2]]
        kept = set(ray_runs[1][0].replicas) & set(counted)
        if kept:
            sent += args.sent[labels[1]]
        metrics_line = (
            "per-replica /metrics after the 2-replica points: IK requests "
            + " + ".join(f"{v:.0f} ({k})" for k, v in counted.items())
            + f" = {sum(counted.values()):.0f}; sent {sent}"
            + (" (since the 1-replica deploy: its replica was kept)" if kept else " (since the 2-replica deploy)")
        )
        if sum(counted.values()) != sent:
            failures.append(f"metrics do not add up: {sum(counted.values()):.0f} counted, {sent} sent")
        check_runs([*plain, *ray_runs[1], *ray_runs[2]], args.robot_model, failures)
        for section, wanted in ((faults, args.faults), (routing, args.routing)):
            if wanted:
                found = section(url, args.robot, targets, args, failures)
                print("\n".join(found), flush=True)
                lines.extend(found)
    finally:
        serve.shutdown()
        ray.shutdown()

    baseline = {(r.clients, r.batch): r for r in ray_runs[1]}
    print()
    print(
        markdown_table(
            HEADER, rows_of(plain) + rows_of(ray_runs[1], baseline) + rows_of(ray_runs[2], baseline), text_columns=2
        )
    )
    one, two = ray_runs[1], ray_runs[2]
    overhead = one[0].percentile(50) - plain[0].percentile(50)
    print(
        f"\ngoals: 2/1 replicas at {args.batch_clients} clients x 256 targets: {two[2].rate / one[2].rate:.2f}x "
        f"(goal >= 1.6x); at {args.clients} clients x 1 pose: {two[1].rate / one[1].rate:.2f}x; Ray's overhead at "
        f"one client: p50 {overhead:+.2f} ms over the plain server (goal <= 1.5 ms)"
    )
    print(metrics_line)
    checked = sum(len(r.samples) for r in [*plain, *one, *two])
    print(f"Pinocchio (float64) re-checked {checked} sampled successes of the table's points")
    for line in lines:
        print(line)
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
