"""Ray Serve deployment of the same FastAPI app as ``python -m ik_layer.server``: one replica per GPU.

The service is stateless, so scaling out is replicas behind Ray Serve's HTTP proxy. Each replica
builds the app with :func:`ik_layer.server.app.create_app` from the driver's :class:`ik_layer.server.settings.Settings`
(``IK_LAYER_*`` variables and defaults), runs its lifespan (load + warm up the robots), and serves
every route (``/health``, ``/v1/robots/{name}/ik``, ``/metrics``...) unchanged; micro-batching
happens inside each replica.

    # on a Ray cluster (or locally; starts one): replicas = GPUs, 1 GPU each; 0 GPUs: 1 CPU replica
    python -m ik_layer.deploy.ray_serve --port 8000
    IK_LAYER_ROBOTS=panda IK_LAYER_DTYPE=float32 python -m ik_layer.deploy.ray_serve --replicas 4 --gpus-per-replica 1
    # or with Ray's own CLI (settings from the environment):
    serve run ik_layer.deploy.ray_serve:app

Needs the ``deploy`` extra (``ray[serve]``, not a dependency of the project); without it, importing this module
raises an ImportError saying so, and ``python -m`` prints that one line.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from ik_layer.server.settings import Settings

_PROG = "python -m ik_layer.deploy.ray_serve"
_MISSING = "the Ray Serve deployment needs the deploy extra: pip install -e '.[deploy]' in a checkout of ik-layer"

try:
    from ray import serve
    from ray.serve.handle import DeploymentHandle
except ImportError as err:
    if __name__ == "__main__":  # python -m ik_layer.deploy.ray_serve: the line, not a traceback
        print(f"{_PROG}: error: {_MISSING}", file=sys.stderr)
        sys.exit(2)
    raise ImportError(_MISSING) from err

__all__ = ["build_app", "build_deployment", "cluster_gpus", "main"]


def cluster_gpus() -> int:
    """GPUs in the Ray cluster if one is connected, else GPUs torch sees on this machine."""
    import ray

    if ray.is_initialized():
        return int(ray.cluster_resources().get("GPU", 0))
    import torch

    return torch.cuda.device_count()


def build_deployment(
    settings: Settings | None = None,
    *,
    num_replicas: int | None = None,
    gpus_per_replica: float | None = None,
    cpus_per_replica: float = 1,
) -> Any:
    """A bound Ray Serve application (``serve.run`` it) serving ``create_app(settings)``.

    Args:
        settings: server settings (default: from ``IK_LAYER_*``); host and port are Ray Serve's, not these.
        num_replicas: default: one per GPU (``gpus_per_replica`` each), or 1 without GPUs.
        gpus_per_replica: ``ray_actor_options["num_gpus"]``; default 1 when the cluster has GPUs and
            ``settings.device`` is not ``cpu``, else 0 (CPU replicas).
        cpus_per_replica: ``ray_actor_options["num_cpus"]``.
    """
    settings = settings or Settings()
    fields = settings.model_dump()
    gpus = cluster_gpus()
    if gpus_per_replica is None:
        gpus_per_replica = 1 if gpus and settings.device != "cpu" else 0
    if num_replicas is None:
        num_replicas = max(1, int(gpus // gpus_per_replica)) if gpus_per_replica else 1

    def build_asgi_app():  # runs on each replica: its own app, robots, batchers and metrics
        from ik_layer.server.app import create_app

        return create_app(Settings(**fields))

    class IKLayerService:
        """The FastAPI app of ``python -m ik_layer.server``, one instance per replica."""

    # serve's decorators called, not stacked on the class: mypy keeps a decorated class's type (not a Deployment)
    deployment = serve.deployment(
        name="ik-layer",
        num_replicas=num_replicas,
        ray_actor_options={"num_gpus": gpus_per_replica, "num_cpus": cpus_per_replica},
        max_ongoing_requests=max(settings.queue_limit, 1),
        health_check_period_s=10,
    )(serve.ingress(build_asgi_app)(IKLayerService))
    return deployment.bind()


def build_app(args: dict[str, str] | None = None) -> Any:
    """Application builder for ``serve run ik_layer.deploy.ray_serve:build_app replicas=2 gpus_per_replica=1``."""
    args = args or {}
    return build_deployment(
        num_replicas=int(args["replicas"]) if "replicas" in args else None,
        gpus_per_replica=float(args["gpus_per_replica"]) if "gpus_per_replica" in args else None,
    )


def __getattr__(name: str) -> Any:  # ``serve run ik_layer.deploy.ray_serve:app``: built on first access only
    if name == "app":
        return build_app()
    raise AttributeError(name)


def main(argv: Sequence[str] | None = None) -> int:
    """Start (or connect to) Ray, run the deployment on ``--host``/``--port`` and block until Ctrl-C."""
    import ray

    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--replicas", type=int, default=None, help="default: one per GPU (1 without GPUs)")
    parser.add_argument("--gpus-per-replica", type=float, default=None, help="default: 1 with GPUs, else 0")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local one)")
    args = parser.parse_args(argv)
    ray.init(address=args.address)
    serve.start(http_options={"host": args.host, "port": args.port})
    handle: DeploymentHandle = serve.run(
        build_deployment(num_replicas=args.replicas, gpus_per_replica=args.gpus_per_replica),
        name="ik-layer",
        route_prefix="/",
    )
    del handle
    print(f"ik-layer on Ray Serve: http://{args.host}:{args.port}/health", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
