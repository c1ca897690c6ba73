"""The ik-layer HTTP service: batched IK/FK over FastAPI with dynamic micro-batching."""

from server.app import create_app
from server.run import serve
from server.settings import Settings

__all__ = ["Settings", "create_app", "serve"]
