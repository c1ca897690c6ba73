"""The API's routers, one module per resource."""

from ik_layer.server.routes import fk, health, ik, metrics, robots, scenes, trajectory

__all__ = ["fk", "health", "ik", "metrics", "robots", "scenes", "trajectory"]
