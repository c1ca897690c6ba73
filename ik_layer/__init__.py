"""ik-layer: differentiable batched inverse kinematics for PyTorch."""

from ik_layer.engine import Engine
from ik_layer.exceptions import (
    CLIError,
    DeviceError,
    DTypeError,
    FrameNotFound,
    IKLayerError,
    InputFileError,
    JointNotFound,
    NonFiniteError,
    RobotNotFound,
    ShapeError,
    UnsupportedModelError,
)
from ik_layer.implicit import damped_pseudo_inverse, implicit_inverse, implicit_root
from ik_layer.jacobian import batch_jacobian, jacobian_rules, register_jacobian, sequential_jacobian
from ik_layer.kinematics import Robot, load_robot
from ik_layer.layer import IKLayer, ik, ik_solve, target_gradient
from ik_layer.options import OPTION_SPECS, OptionSpec, SolveOptions
from ik_layer.robots import builtin_robots
from ik_layer.solver import IKResult
from ik_layer.solving import solve

__all__ = [
    "CLIError",
    "DTypeError",
    "DeviceError",
    "Engine",
    "FrameNotFound",
    "IKLayer",
    "IKLayerError",
    "IKResult",
    "InputFileError",
    "JointNotFound",
    "NonFiniteError",
    "OPTION_SPECS",
    "OptionSpec",
    "Robot",
    "RobotNotFound",
    "ShapeError",
    "SolveOptions",
    "UnsupportedModelError",
    "batch_jacobian",
    "builtin_robots",
    "damped_pseudo_inverse",
    "ik",
    "ik_solve",
    "implicit_inverse",
    "implicit_root",
    "jacobian_rules",
    "load_robot",
    "register_jacobian",
    "sequential_jacobian",
    "solve",
    "target_gradient",
]
