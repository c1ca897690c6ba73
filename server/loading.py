"""Robots at start-up: parse the robot specs of the settings, load each robot, warm it up."""

from __future__ import annotations

from collections.abc import Iterable

import torch

import ik_layer
from ik_layer import Robot, SolveOptions

__all__ = ["load_robots", "parse_robot_spec", "warm_up"]

_WARM_UP_ITERATIONS = 4


def parse_robot_spec(spec: str) -> tuple[str, str | None]:
    """``"ur5e"`` -> ``("ur5e", None)``; ``"arm.urdf:tool0"`` -> ``("arm.urdf", "tool0")``."""
    path, sep, frame = spec.rpartition(":")
    if sep and path.lower().endswith(".urdf") and frame:
        return path, frame
    return spec, None


def load_robots(specs: Iterable[str], device: torch.device, dtype: torch.dtype) -> dict[str, Robot]:
    """Load every robot of ``specs`` (see :func:`parse_robot_spec`), keyed by robot name.

    Raises:
        IKLayerError: a robot cannot be loaded.
        ValueError: two specs give robots of the same name.
    """
    robots: dict[str, Robot] = {}
    for spec in specs:
        source, frame = parse_robot_spec(spec)
        robot = ik_layer.load_robot(source, frame, dtype=dtype, device=device)
        if robot.name in robots:
            raise ValueError(f"two robots are named {robot.name!r} (from {spec!r}); load each name once")
        robots[robot.name] = robot
    return robots


def warm_up(robot: Robot, options: SolveOptions) -> None:
    """One tiny FK, solve and gradient, so the first request does not pay for lazy initialisation."""
    q = ((robot.lower + robot.upper) / 2)[None]
    budget = min(options.max_iterations, _WARM_UP_ITERATIONS)
    result = ik_layer.solve(robot, robot.fk(q), options.replace(max_iterations=budget))
    ik_layer.target_gradient(robot, result.q)
