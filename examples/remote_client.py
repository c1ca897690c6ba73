"""Call the ik-layer HTTP service from Python with ``ik_layer.client``: FK, batched IK, warm starts, gradients, async.

Solves a (4, 25) batch of reachable UR5e targets on the server (split into requests of the server's
``--max-targets`` when larger), checks each answer against the local FK, re-solves warm-started at the
answers (no iterations needed), asks for dq/d(target) and runs a few requests concurrently with the
asyncio client. Exits with status 1 if fewer than 95 % of the targets are reached.

Run against a running server (``make serve``)::

    python examples/remote_client.py --url http://127.0.0.1:8000

or without ``--url`` to start one for the example (``python -m ik_layer.server`` in a child process).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import numpy as np
import torch

import ik_layer
from ik_layer.client import AsyncClient, Client
from ik_layer.model.lie import pose_error
from ik_layer.testing import ServerProcess

ROBOT = "ur5e"


def run(url: str) -> int:
    robot = ik_layer.load_robot(ROBOT)  # only to make targets and check answers locally
    q_true = robot.random_q((4, 25), generator=torch.Generator().manual_seed(0))
    with Client(url) as client:
        info = client.robots()[ROBOT]
        print(f"{info.name}: {info.dof} joints {list(info.joint_names)}, end effector {info.ee_frame}")

        targets = client.fk(ROBOT, q_true)  # (4, 25, 4, 4), computed by the server
        start = time.perf_counter()
        result = client.solve(ROBOT, targets, num_seeds=8)
        took = time.perf_counter() - start
        error = pose_error(targets, robot.fk(result.q))[result.success]  # checked with the local FK
        rate = float(result.success.double().mean())
        print(
            f"solved {int(result.success.sum())}/{result.success.numel()} targets in {took:.2f} s "
            f"(requests of at most {client.max_targets or 'any number of'} targets); "
            f"largest errors of the reached ones {float(error[:, :3].norm(dim=-1).max()):.1e} m, "
            f"{float(error[:, 3:].norm(dim=-1).max()):.1e} rad"
        )
        statuses, counts = np.unique(result.status, return_counts=True)
        print("statuses:", dict(zip(statuses.tolist(), counts.tolist(), strict=True)))

        again = client.solve(ROBOT, targets, warm_start=result.q)
        kept = bool(torch.equal(again.q[result.success], result.q[result.success]))
        print(f"warm-started at the answers: same configurations {kept}, iterations {int(again.iterations.max())}")

        first = client.solve(ROBOT, targets[0, 0], warm_start=result.q[0, 0], gradient=True)
        print(f"dq/d(target twist) of the first target: {tuple(first.gradient.shape)}")

    async def concurrently() -> list[bool]:
        async with AsyncClient(url) as remote:
            answers = await asyncio.gather(*(remote.solve(ROBOT, targets[i]) for i in range(4)))
        return [bool(a.success.all()) for a in answers]

    print("four concurrent requests, all reached:", asyncio.run(concurrently()))
    return 0 if rate >= 0.95 else 1


def main() -> int:
    torch.set_num_threads(1)  # small tensors: more threads only wait for each other (and for other processes)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the service (default: start one for this example)")
    args = parser.parse_args()
    if args.url:
        return run(args.url)
    server = ServerProcess.start(["--robots", ROBOT, "--max-targets", "32"], capture=True)
    try:
        return run(server.url)
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
