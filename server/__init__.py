"""The ik-layer HTTP service: batched IK/FK over FastAPI with dynamic micro-batching.

``create_app``, ``serve`` and ``Settings`` load on first use (PEP 562), so importing one stage
(``ik_layer.server.decode``, ``ik_layer.server.encode``...) imports what that stage uses, not the app,
FastAPI's routing or uvicorn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below imports each name on first use
    from ik_layer.server.app import create_app
    from ik_layer.server.run import serve
    from ik_layer.server.settings import Settings

_HOME = {"Settings": "ik_layer.server.settings", "create_app": "ik_layer.server.app", "serve": "ik_layer.server.run"}

__all__ = ["Settings", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    """Import public name ``name`` from its module on first use."""
    if name not in _HOME:
        raise AttributeError(f"module 'ik_layer.server' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value
