"""``serve(argv)``: parse settings from flags and the environment, check the address is free, load the robots,
then run uvicorn until SIGINT (Ctrl-C) or SIGTERM, which stop it gracefully (see :class:`_GracefulServer`) with
exit status 0."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

import uvicorn
from pydantic import ValidationError

from ik_layer import IKLayerError
from ik_layer.server.added_terms import register_terms
from ik_layer.server.app import create_app
from ik_layer.server.protocol import header_timeout_protocol
from ik_layer.server.served_robots import load_robots
from ik_layer.server.settings import parse_settings
from ik_layer.server.state import ServerState

__all__ = ["serve"]

EXIT_USAGE = 2
_PROG = "python -m ik_layer.server"


def serve(argv: Sequence[str] | None = None) -> int:
    """Run the HTTP service with settings from ``argv`` (flags such as ``--port 8080``; default:
    ``sys.argv[1:]``) over ``IK_LAYER_*`` variables; usable as a console-script entry point.

    Returns:
        The exit status: 0 after a graceful stop (SIGINT or SIGTERM), 2 for invalid settings, an address that
        cannot be bound (a port in use: found before any robot loads) or a robot spec that does not load (one line
        on stderr naming the flag or the entry).
    """
    try:
        settings = parse_settings(argv)
    except ValidationError as err:
        lines = [f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()]
        print(f"{_PROG}: invalid settings\n" + "\n".join(lines), file=sys.stderr)
        return EXIT_USAGE
    try:
        _check_address(settings.host, settings.port)
    except OSError as err:
        print(f"{_PROG}: --host {settings.host} --port {settings.port}: {err.strerror}", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s:%(name)s: %(message)s")
    try:
        register_terms(settings.terms)
        robots = load_robots(settings.robots, settings.torch_device(), settings.torch_dtype())
    except IKLayerError as err:
        print(f"{_PROG}: " + " ".join(line.strip() for line in str(err).splitlines()), file=sys.stderr)
        return EXIT_USAGE
    app = create_app(settings, robots)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        http=header_timeout_protocol(settings.read_timeout),
        limit_concurrency=settings.max_connections,
        timeout_graceful_shutdown=settings.shutdown_grace,  # type: ignore[arg-type]  # uvicorn says int; a float works
    )
    with _terminate_raises(), contextlib.suppress(KeyboardInterrupt, _Terminated):
        _GracefulServer(config, app.state.ik).run()
    return 0


def _check_address(host: str, port: int) -> None:
    """Bind ``host``:``port`` as uvicorn will (asyncio's ``create_server``), without listening, and let it go.

    Raises:
        OSError: the address cannot be bound (the port is in use or privileged, the host is not this machine's).
    """

    async def bind() -> None:
        server = await asyncio.get_running_loop().create_server(asyncio.Protocol, host, port, start_serving=False)
        server.close()
        await server.wait_closed()

    asyncio.run(bind())


class _Terminated(Exception):
    """SIGTERM, raised where uvicorn re-raises the signal it stopped for."""


@contextlib.contextmanager
def _terminate_raises() -> Iterator[None]:
    """Make SIGTERM raise :class:`_Terminated` (in the main thread; elsewhere signals are not ours to handle).

    uvicorn handles SIGINT and SIGTERM itself while it serves, then restores the handlers it found and raises
    the signal again for the program around it: SIGINT's default handler raises KeyboardInterrupt, SIGTERM's
    would end the process with status -15 (143). With this handler the stop is an exception ``serve`` expects.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


class _GracefulServer(uvicorn.Server):
    """uvicorn's server that, on the first SIGTERM or SIGINT, tells the app to answer everything within the grace.

    uvicorn then waits up to ``shutdown_grace`` for the requests in flight; the app retires their rows earlier
    (:meth:`ServerState.begin_shutdown`), so that each is answered rather than cut.
    """

    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self._state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            self._state.begin_shutdown()
        super().handle_exit(sig, frame)
