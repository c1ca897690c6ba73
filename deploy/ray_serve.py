"""Ray Serve deployment of the same FastAPI app as ``python -m ik_layer.server``: one replica per GPU.

Each replica builds the app with :func:`ik_layer.server.app.create_app` from the driver's
:class:`ik_layer.server.settings.Settings` (``IK_LAYER_*`` variables and defaults), runs its lifespan (load + warm
up its robots: Ray routes nothing to a replica before that ends), and serves every route (``/health``,
``/v1/robots/{name}/ik``, ``/metrics``...) unchanged; continuous batching happens inside each replica. Every
answer carries ``x-ik-layer-replica: <replica id> <pid>``, so a client (and ``bench/scale_out.py``) can tell which
replica answered.

Routing: one Ray Serve application per robot. With several robots (:func:`build_applications`), robot ``r`` gets
an application ``ik-layer-r`` of its own at route prefix ``/v1/robots/r`` whose replicas load only ``r``; Ray's HTTP
proxy routes by the longest prefix, so every request for ``r`` lands on a replica that holds ``r``'s engine and
all of ``r``'s traffic shares those engines' batches. A small application ``ik-layer`` at ``/`` (one replica, all
robots, no CPU reserved) answers the rest: ``/health``, ``/v1/robots``. Per robot, ``/v1/robots/r/metrics`` and
``/v1/robots/r/health`` reach that robot's replicas (the proxy picks one; the header names it). Why not Ray
Serve's model multiplexing: its proxy routes on a ``serve_multiplexed_model_id`` header, which neither
``ik_layer.client`` nor curl sends (routing on the path would need a router deployment in front: a second hop per
request), and it loads a model inside the request that first asks for it, on a replica that may then evict
another robot's engine with its batch in flight: a miss costs the robot's load and warm-up (0.5-1 s from warp's
kernel cache, about a minute cold) in some client's latency. Prefix routing costs nothing per request and loads
every engine before traffic arrives; the price is one process per robot and replica, sized per robot
(``num_replicas``). One robot: a single application at ``/`` (nothing to route). ``per_robot=False`` keeps the
old layout (every replica holds every robot). Measured (``bench/scale_out.py --routing``: ur5e and panda, 2 clients
of 256-target requests each, 2 CPUs shared with other work): one replica per robot served 0.95x, 1.76x, 1.06x and
1.12x the solved targets/s of two shared replicas holding both, in four runs, every request for a robot answered by
its replica, and each replica's ``/metrics`` counted exactly the requests sent to its robot.

Ray's per-request cost: through Ray 2.60's Python HTTP proxy a single-pose request at one client took 8-12 ms more
(p50) than the plain server on the same 2 cores (a no-op FastAPI route alone: 6 ms); behind Ray's HAProxy ingress
(``--haproxy``: ``RAY_SERVE_ENABLE_HA_PROXY=1``, a feature flag of Ray 2.60) 1.6 ms more. With HAProxy, a killed
replica's requests in flight are closed without an answer (the proxy middleware below is not on that path): a
client must retry connection errors.

    # on a Ray cluster (or locally; starts one): replicas = GPUs, 1 GPU each; 0 GPUs: 1 CPU replica
    python -m ik_layer.deploy.ray_serve --port 8000
    IK_LAYER_ROBOTS=panda IK_LAYER_DTYPE=float32 python -m ik_layer.deploy.ray_serve --replicas 4 --gpus-per-replica 1
    # or with Ray's own CLI (settings from the environment; one application holding every robot):
    RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=ik_layer.deploy.ray_serve.proxy_middlewares \
        serve run ik_layer.deploy.ray_serve:app

A replica that dies (its process killed, the node lost) fails the requests it held: Ray's proxy logs ``The actor
died unexpectedly`` and answers nothing, so its uvicorn sends a bare 500 with ``Connection: close``, which a
client does not know to retry. :func:`proxy_middlewares`, installed in the proxy through
``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` (``main`` sets it before it starts Ray; on a cluster, set it where
Ray starts), turns a failure that no replica answered (no :data:`REPLICA_HEADER`) into the server's own
retryable answer, 503 with ``Retry-After`` (``IK_LAYER_RETRY_AFTER_S``), which ``ik_layer.client`` retries. The
proxy stops routing to the dead replica at once; requests arriving while no replica is up wait in the proxy; the
controller starts a replacement (health checks every 2 s), which takes its load and warm-up time before it
serves. ``bench/scale_out.py --faults`` counts what clients get.

State that lives in one replica stays there: a scene registered with ``PUT /v1/robots/r/scenes/s`` reaches one
replica, and an IK request naming it on another gets 404. With more than one replica per robot, send obstacles
in the request (``obstacles``) rather than as a registered scene.

Needs the ``deploy`` extra (``ray[serve]``, not a dependency of the project); without it, importing this module
raises an ImportError saying so, and ``python -m`` prints that one line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
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

__all__ = ["REPLICA_HEADER", "Application", "build_app", "build_applications", "build_deployment", "cluster_gpus"]
__all__ += ["PROXY_CALLBACK", "RetryableProxyErrors", "main", "proxy_middlewares", "run_applications"]

REPLICA_HEADER = "x-ik-layer-replica"
"""Response header naming the replica that answered: ``<replica id> <pid>``."""

ROOT_CPUS = 0.0
"""CPUs Ray reserves for the root application's replica: none (it answers ``/health`` and ``/v1/robots``; its
warm-up is once, at deploy), so that ``n`` robots of one CPU replica each fit ``n`` CPUs."""


PROXY_CALLBACK = ("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", "ik_layer.deploy.ray_serve.proxy_middlewares")
"""The environment variable (read by Ray's proxy when it starts) that installs :func:`proxy_middlewares`."""


class RetryableProxyErrors:
    """ASGI middleware of Ray's HTTP proxy: a failure that no replica answered becomes a 503 with ``Retry-After``.

    Ray 2.60's proxy, when the replica of a request dies, logs a 500 and returns without answering (it answers
    only 408, 429 and 503 itself), so uvicorn sends a bare ``500 Internal Server Error`` and closes the
    connection. Here: no answer started, an exception, or a 5xx without :data:`REPLICA_HEADER` (the proxy's own)
    -> 503 with ``Retry-After``. The replicas' own answers (tagged), their 500s included, pass unchanged, and so does
    anything after a response has started.
    """

    BODY = b'{"detail":"the replica serving this request is unavailable; retry"}'

    def __init__(self, app: Any, retry_after_s: int = 1) -> None:
        self.app = app
        self.retry_after = str(retry_after_s).encode()

    async def _unavailable(self, send: Any) -> None:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self.BODY)).encode()),
            (b"retry-after", self.retry_after),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": self.BODY, "more_body": False})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = replaced = False

        async def retryable(message: Any) -> None:
            nonlocal started, replaced
            if message["type"] == "http.response.start":
                headers = {k.lower() for k, _ in message.get("headers", [])}
                if message["status"] >= 500 and REPLICA_HEADER.encode() not in headers:
                    replaced = started = True
                    await self._unavailable(send)
                    return
                started = True
            elif replaced:  # the body of the proxy's own answer: already answered
                return
            await send(message)

        try:
            await self.app(scope, receive, retryable)
        except Exception:
            if started:
                raise
        if not started:
            await self._unavailable(send)


def proxy_middlewares() -> list[Any]:
    """The middlewares of Ray's HTTP proxy (:data:`PROXY_CALLBACK`): :class:`RetryableProxyErrors`."""
    from starlette.middleware import Middleware

    retry_after = int(os.environ.get("IK_LAYER_RETRY_AFTER_S", Settings.model_fields["retry_after_s"].default))
    return [Middleware(RetryableProxyErrors, retry_after_s=retry_after)]


class _ReplicaRoutes:
    """ASGI middleware of a replica: tags each answer with :data:`REPLICA_HEADER`; under a robot's route prefix,
    hands the app the full path (``/v1/robots/r/ik``, not ``/ik``) and maps ``<prefix>/metrics`` and
    ``<prefix>/health`` to the replica's ``/metrics`` and ``/health``."""

    def __init__(self, app: Any, prefix: str = "") -> None:
        self.app = app
        self.prefix = prefix
        self.tag: bytes | None = None

    def _tag(self) -> bytes:
        if self.tag is None:
            try:
                replica = serve.get_replica_context().replica_id.unique_id
            except Exception:  # outside a replica (tests of the app alone)
                replica = "-"
            self.tag = f"{replica} {os.getpid()}".encode()
        return self.tag

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.prefix:  # the proxy set root_path to the route prefix; the app's routes are absolute
            scope = dict(scope, root_path="")
            if scope["path"] in (f"{self.prefix}/metrics", f"{self.prefix}/health"):
                scope["path"] = scope["path"][len(self.prefix) :]
                scope["raw_path"] = scope["path"].encode()
        tag = self._tag()

        async def tagged(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=[*message.get("headers", []), (REPLICA_HEADER.encode(), tag)])
            await send(message)

        await self.app(scope, receive, tagged)


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
    name: str = "ik-layer",
    route_prefix: str = "",
) -> Any:
    """A bound Ray Serve application (``serve.run`` it) serving ``create_app(settings)``.

    Args:
        settings: server settings (default: from ``IK_LAYER_*``); host and port are Ray Serve's, not these.
        num_replicas: default: one per GPU (``gpus_per_replica`` each), or 1 without GPUs.
        gpus_per_replica: ``ray_actor_options["num_gpus"]``; default 1 when the cluster has GPUs and
            ``settings.device`` is not ``cpu``, else 0 (CPU replicas).
        cpus_per_replica: ``ray_actor_options["num_cpus"]``.
        name: the deployment's name.
        route_prefix: the route prefix it will be run at, when not ``/`` (a robot's application).
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

        app = create_app(Settings(**fields))
        app.add_middleware(_ReplicaRoutes, prefix=route_prefix)
        return app

    class IKLayerService:
        """The FastAPI app of ``python -m ik_layer.server``, one instance per replica."""

    # serve's decorators called, not stacked on the class: mypy keeps a decorated class's type (not a Deployment)
    deployment = serve.deployment(
        name=name,
        num_replicas=num_replicas,
        ray_actor_options={"num_gpus": gpus_per_replica, "num_cpus": cpus_per_replica},
        max_ongoing_requests=max(settings.queue_limit, 1),
        health_check_period_s=2,
        health_check_timeout_s=30,
    )(serve.ingress(build_asgi_app)(IKLayerService))
    return deployment.bind()


@dataclass(frozen=True)
class Application:
    """One Ray Serve application: ``serve.run(app, name=name, route_prefix=route_prefix)``."""

    name: str
    route_prefix: str
    app: Any
    robots: tuple[str, ...]


def build_applications(
    settings: Settings | None = None,
    *,
    per_robot: bool | None = None,
    num_replicas: int | None = None,
    gpus_per_replica: float | None = None,
    cpus_per_replica: float = 1,
) -> list[Application]:
    """The applications serving ``settings.robots``: one per robot at ``/v1/robots/<name>`` plus the root one at
    ``/`` (``per_robot``, the default with several robots), or one at ``/`` holding every robot.

    ``num_replicas``, ``gpus_per_replica`` and ``cpus_per_replica`` are each robot's (as :func:`build_deployment`);
    the root application then has one replica with :data:`ROOT_CPUS` and no GPU. Robots are named as the server
    names them: built-in names, or a model file's stem (``path/arm.urdf:tool0`` -> ``arm``).
    """
    settings = settings or Settings()
    from_file = any(spec.startswith("@") for spec in settings.robots)
    if per_robot is None:
        per_robot = len(settings.robots) > 1 and not from_file
    if not per_robot:
        app = build_deployment(
            settings, num_replicas=num_replicas, gpus_per_replica=gpus_per_replica, cpus_per_replica=cpus_per_replica
        )
        return [Application("ik-layer", "/", app, tuple(settings.robots))]
    if from_file:
        raise ValueError("per-robot applications need robots given one by one, not an @robots.json file")
    names = _robot_names(settings.robots)
    applications = [Application("ik-layer", "/", _root(settings), tuple(names))]
    for name, spec in zip(names, settings.robots, strict=True):
        prefix = f"/v1/robots/{name}"
        app = build_deployment(
            settings.model_copy(update={"robots": [spec]}),
            num_replicas=num_replicas,
            gpus_per_replica=gpus_per_replica,
            cpus_per_replica=cpus_per_replica,
            name=f"ik-layer-{name}",
            route_prefix=prefix,
        )
        applications.append(Application(f"ik-layer-{name}", prefix, app, (name,)))
    return applications


def _root(settings: Settings) -> Any:
    """The root application: every robot, one replica, few solver slots (it answers listings, not IK)."""
    small = settings.model_copy(update={"max_slots": max(256, Settings.model_fields["max_slots"].default // 16)})
    return build_deployment(small, num_replicas=1, gpus_per_replica=0, cpus_per_replica=ROOT_CPUS)


def _robot_names(specs: Sequence[str]) -> list[str]:
    """The API names of the robots ``specs`` (one each), as the server names them: loaded here (kinematics only,
    no engine), so that a bad spec stops the driver before any replica starts."""
    import torch

    from ik_layer import builtin_robots
    from ik_layer.server.served_robots import load_robots

    if all(spec in builtin_robots() for spec in specs):
        return list(specs)
    names = list(load_robots(specs, torch.device("cpu"), torch.float64))
    assert len(names) == len(specs)
    return names


def run_applications(applications: Sequence[Application], *, blocking: bool = False) -> DeploymentHandle:
    """``serve.run`` each application (robots' first, the root last); the root application's handle."""
    handle = None
    for application in sorted(applications, key=lambda a: a.route_prefix == "/"):
        handle = serve.run(
            application.app, name=application.name, route_prefix=application.route_prefix, blocking=blocking
        )
    assert handle is not None
    return handle


def build_app(args: dict[str, str] | None = None) -> Any:
    """Application builder for ``serve run ik_layer.deploy.ray_serve:build_app replicas=2 gpus_per_replica=1``
    (one application at ``/`` holding every robot)."""
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
    """Start (or connect to) Ray, run the applications on ``--host``/``--port`` and block until Ctrl-C."""
    import ray

    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--replicas", type=int, default=None, help="per robot; default: one per GPU (1 without)")
    parser.add_argument("--gpus-per-replica", type=float, default=None, help="default: 1 with GPUs, else 0")
    parser.add_argument("--cpus-per-replica", type=float, default=1)
    parser.add_argument("--shared", action="store_true", help="every replica holds every robot (no per-robot apps)")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local one)")
    parser.add_argument(
        "--haproxy", action="store_true", help="HAProxy ingress (RAY_SERVE_ENABLE_HA_PROXY=1, Ray's feature flag)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault(*PROXY_CALLBACK)  # a local cluster's proxy inherits it (on a cluster: set it there)
    if args.haproxy:
        os.environ["RAY_SERVE_ENABLE_HA_PROXY"] = "1"
    ray.init(address=args.address)
    serve.start(http_options={"host": args.host, "port": args.port})
    applications = build_applications(
        per_robot=False if args.shared else None,
        num_replicas=args.replicas,
        gpus_per_replica=args.gpus_per_replica,
        cpus_per_replica=args.cpus_per_replica,
    )
    run_applications(applications)
    print(f"ik-layer on Ray Serve: http://{args.host}:{args.port}/health", flush=True)
    for application in applications:
        print(f"  {application.name} at {application.route_prefix}: {', '.join(application.robots)}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
