"""ik-layer: differentiable batched inverse kinematics for PyTorch.

The public names load on first use (PEP 562): ``import ik_layer`` and ``import ik_layer.client`` import
neither torch nor Pinocchio nor warp; ``ik_layer.solve`` (or ``from ik_layer import solve``) imports the
solver. In a client-only install (the ``ik-layer-client`` distribution) the solver's names raise an
ImportError that says how to install the full package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below imports each name on first use
    from ik_layer.api import EngineCache, engines, solve
    from ik_layer.collision.shapes import MAX_BATCH_OBSTACLES, MAX_OBSTACLES, Box, Capsule, Obstacle, Sphere
    from ik_layer.core.options import OPTION_SPECS, SolveOptions
    from ik_layer.core.problem import Problem
    from ik_layer.core.result import CANCELLED, DEADLINE, EXHAUSTED, ROW_STATUS, SOLVED, IKResult
    from ik_layer.core.solutions import MAX_SOLUTIONS, OBJECTIVES
    from ik_layer.engine import Engine
    from ik_layer.exceptions import (
        CLIError,
        DeviceError,
        DTypeError,
        FrameNotFound,
        IKLayerError,
        InputFileError,
        JointNotFound,
        NoCollisionModel,
        NonFiniteError,
        RobotNotFound,
        ShapeError,
        UnsupportedModelError,
    )
    from ik_layer.layer.ik import IKLayer, ik, ik_solve, target_gradient
    from ik_layer.layer.implicit import damped_pseudo_inverse, implicit_inverse, implicit_root
    from ik_layer.layer.jacobian import batch_jacobian, jacobian_rules, register_jacobian, sequential_jacobian
    from ik_layer.loading import load_robot
    from ik_layer.model.lie import as_transform, matrix_to_pose
    from ik_layer.model.robot import Robot
    from ik_layer.robots import builtin_robots
    from ik_layer.trajectory.gradient import ik_trajectory
    from ik_layer.trajectory.problem import velocity_limits
    from ik_layer.trajectory.solve import TrajectoryResult, solve_trajectory

__version__ = "0.1.0"

# module -> the public names it defines (tests: the same as __all__). The face holds what a user calls; what only
# the server needs (the solution search's stages, the checks of its decode stage, OptionSpec) stays in its module.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "ik_layer.exceptions": (
        "CLIError",
        "DTypeError",
        "DeviceError",
        "FrameNotFound",
        "IKLayerError",
        "InputFileError",
        "JointNotFound",
        "NoCollisionModel",
        "NonFiniteError",
        "RobotNotFound",
        "ShapeError",
        "UnsupportedModelError",
    ),
    "ik_layer.engine": ("Engine",),
    "ik_layer.layer.implicit": ("damped_pseudo_inverse", "implicit_inverse", "implicit_root"),
    "ik_layer.layer.jacobian": ("batch_jacobian", "jacobian_rules", "register_jacobian", "sequential_jacobian"),
    "ik_layer.model.lie": ("as_transform", "matrix_to_pose"),
    "ik_layer.model.robot": ("Robot",),
    "ik_layer.loading": ("load_robot",),
    "ik_layer.layer.ik": ("IKLayer", "ik", "ik_solve", "target_gradient"),
    "ik_layer.core.options": ("OPTION_SPECS", "SolveOptions"),
    "ik_layer.robots": ("builtin_robots",),
    "ik_layer.core.problem": ("Problem",),
    "ik_layer.core.result": ("CANCELLED", "DEADLINE", "EXHAUSTED", "ROW_STATUS", "SOLVED", "IKResult"),
    "ik_layer.core.solutions": ("MAX_SOLUTIONS", "OBJECTIVES"),
    "ik_layer.api": ("EngineCache", "engines", "solve"),
    "ik_layer.trajectory.gradient": ("ik_trajectory",),
    "ik_layer.trajectory.problem": ("velocity_limits",),
    "ik_layer.trajectory.solve": ("TrajectoryResult", "solve_trajectory"),
    "ik_layer.collision.shapes": ("MAX_BATCH_OBSTACLES", "MAX_OBSTACLES", "Box", "Capsule", "Obstacle", "Sphere"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
_SOLVER_IMPORTS = ("torch", "pinocchio", "warp", "ik_layer")  # missing in a client-only install

__all__ = [
    "Box",
    "CANCELLED",
    "CLIError",
    "Capsule",
    "DEADLINE",
    "DTypeError",
    "DeviceError",
    "EXHAUSTED",
    "Engine",
    "EngineCache",
    "FrameNotFound",
    "IKLayer",
    "IKLayerError",
    "IKResult",
    "InputFileError",
    "JointNotFound",
    "MAX_BATCH_OBSTACLES",
    "MAX_OBSTACLES",
    "MAX_SOLUTIONS",
    "NoCollisionModel",
    "NonFiniteError",
    "OBJECTIVES",
    "OPTION_SPECS",
    "Obstacle",
    "Problem",
    "ROW_STATUS",
    "Robot",
    "RobotNotFound",
    "SOLVED",
    "ShapeError",
    "SolveOptions",
    "Sphere",
    "TrajectoryResult",
    "UnsupportedModelError",
    "as_transform",
    "batch_jacobian",
    "builtin_robots",
    "damped_pseudo_inverse",
    "engines",
    "ik",
    "ik_solve",
    "ik_trajectory",
    "implicit_inverse",
    "implicit_root",
    "jacobian_rules",
    "load_robot",
    "matrix_to_pose",
    "register_jacobian",
    "sequential_jacobian",
    "solve",
    "solve_trajectory",
    "target_gradient",
    "velocity_limits",
]


def __getattr__(name: str) -> Any:
    """Import public name ``name`` from its module on first use (then it is a plain module attribute)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'ik_layer' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in _SOLVER_IMPORTS:
            raise
        missing = "this is the client-only install" if err.name == module else f"{err.name!r} is not installed"
        raise ImportError(
            f"ik_layer.{name} needs the full ik-layer package (torch, Pinocchio, warp) and {missing}: install "
            "ik-layer from its repository (pip install -e . in a checkout, or 'ik-layer @ git+<repository URL>')",
            name=err.name,
        ) from err
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
