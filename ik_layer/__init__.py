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
from robots import builtin_robots

__all__ = [
    "FrameNotFound",
    "IKLayerError",
    "NonFiniteError",
    "Robot",
    "RobotNotFound",
    "ShapeError",
    "UnsupportedModelError",
    "builtin_robots",
    "load_robot",
]
