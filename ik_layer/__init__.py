"""ik-layer: differentiable batched inverse kinematics for PyTorch."""

from ik_layer.exceptions import (
    FrameNotFound,
    IKLayerError,
    NonFiniteError,
    RobotNotFound,
    ShapeError,
    UnsupportedModelError,
)
from ik_layer.kinematics import Robot, load_robot
from ik_layer.solver import IKResult, solve
from robots import builtin_robots

__all__ = [
    "FrameNotFound",
    "IKLayerError",
    "IKResult",
    "NonFiniteError",
    "Robot",
    "RobotNotFound",
    "ShapeError",
    "UnsupportedModelError",
    "builtin_robots",
    "load_robot",
    "solve",
]
