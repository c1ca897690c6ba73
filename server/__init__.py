"""The ik-layer HTTP service: batched IK/FK over FastAPI with dynamic micro-batching."""

from ik_layer.server.app import create_app
from ik_layer.server.run import serve
from ik_layer.server.settings import Settings

__all__ = ["Settings", "create_app", "serve"]
