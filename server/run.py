"""``serve(argv)``: parse settings from flags and the environment, then run uvicorn until interrupted."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Sequence
from types import FrameType

import uvicorn
from pydantic import ValidationError

from ik_layer.server.app import create_app
from ik_layer.server.protocol import header_timeout_protocol
from ik_layer.server.settings import parse_settings
from ik_layer.server.state import ServerState

__all__ = ["serve"]

EXIT_USAGE = 2


def serve(argv: Sequence[str] | None = None) -> int:
    """Run the HTTP service with settings from ``argv`` (flags such as ``--port 8080``; default:
    ``sys.argv[1:]``) over ``IK_LAYER_*`` variables; usable as a console-script entry point.

    Returns:
        The exit status: 0 after a clean shutdown, 2 for invalid settings.
    """
    try:
        settings = parse_settings(argv)
    except ValidationError as err:
        lines = [f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()]
        print("python -m ik_layer.server: invalid settings\n" + "\n".join(lines), file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s:%(name)s: %(message)s")
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        http=header_timeout_protocol(settings.read_timeout),
        limit_concurrency=settings.max_connections,
        timeout_graceful_shutdown=settings.shutdown_grace,
    )
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the SIGINT it shut down for
        _GracefulServer(config, app.state.ik).run()
    return 0


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
