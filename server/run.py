"""``serve(argv)``: parse settings from flags and the environment, then run uvicorn until interrupted."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import uvicorn

from server.app import create_app
from server.settings import parse_settings

__all__ = ["serve"]


def serve(argv: Sequence[str] | None = None) -> None:
    """Run the HTTP service with settings from ``argv`` (flags such as ``--port 8080``) over ``IK_LAYER_*``."""
    settings = parse_settings(argv)
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s:%(name)s: %(message)s")
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level)
