"""``serve(argv)``: parse settings from flags and the environment, then run uvicorn until interrupted."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import uvicorn
from pydantic import ValidationError

from ik_layer.server.app import create_app
from ik_layer.server.settings import parse_settings

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
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level)
    return 0
