"""Request and response bodies of the HTTP API (pydantic v2); units: metres, radians, quaternions (x, y, z, w).

Every request model is strict (numbers must be JSON numbers, booleans JSON
booleans), forbids unknown fields and rejects NaN, infinities and absurd
magnitudes, so nothing non-finite ever reaches the solver. The solver
options of :class:`IKRequest` come from :data:`ik_layer.OPTION_SPECS` (see
:mod:`ik_layer.server.options`). Checks that need the robot (the number of
joints) live in :mod:`ik_layer.server.decode`.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from ik_layer.server.options import option_model

__all__ = [
    "ERROR_RESPONSES",
    "ErrorResponse",
    "FKRequest",
    "FKResponse",
    "HealthResponse",
    "IKRequest",
    "IKResponse",
    "IKSolution",
    "Pose",
    "RobotInfo",
    "RobotsResponse",
]

MAX_COORDINATE = 1e4  # [m] or [rad]: bound on positions, joint values and warm starts
_MIN_QUATERNION_NORM = 1e-6

Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_COORDINATE, le=MAX_COORDINATE)]
QuaternionPart = Annotated[float, Field(allow_inf_nan=False, ge=-1e6, le=1e6)]
Configuration = Annotated[list[Coordinate], Field(min_length=1, max_length=256)]

_EXAMPLE_POSE = {"position": [-0.6409, -0.1334, 0.3841], "orientation": [-0.707, -0.707, 0.0106, 0.01]}
_EXAMPLE_Q = [0.0, -1.2, 1.4, -1.8, -1.57, 0.0]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Pose(_Request):
    """A pose ``T_base_ee``: position [m] and unit quaternion (x, y, z, w), normalised on input."""

    model_config = ConfigDict(json_schema_extra={"examples": [_EXAMPLE_POSE]})

    position: Annotated[list[Coordinate], Field(min_length=3, max_length=3, description="x, y, z [m]")]
    orientation: Annotated[
        list[QuaternionPart], Field(min_length=4, max_length=4, description="quaternion x, y, z, w (any non-zero norm)")
    ]

    @field_validator("orientation")
    @classmethod
    def _normalise(cls, value: list[float]) -> list[float]:
        norm = math.sqrt(sum(x * x for x in value))
        if norm <= _MIN_QUATERNION_NORM:
            raise ValueError(f"orientation quaternion has norm {norm:.3g}; it must be above {_MIN_QUATERNION_NORM:g}")
        return [x / norm for x in value]


class _IKTargets(_Request):
    targets: list[Pose] = Field(min_length=1, description="end-effector targets T_base_ee")
    warm_start: list[Configuration] | None = Field(
        None, description="one warm-start configuration per target (dof values each) [rad or m]"
    )

    @model_validator(mode="after")
    def _one_warm_start_per_target(self) -> _IKTargets:
        if self.warm_start is not None and len(self.warm_start) != len(self.targets):
            raise ValueError(
                f"warm_start has {len(self.warm_start)} rows but there are {len(self.targets)} targets; "
                "give one per target"
            )
        return self


_IKOptions = option_model("IKOptions", _Request, optional=True)


class IKRequest(_IKOptions, _IKTargets):  # fields in order: targets, warm_start, the solver options, return_gradient
    """Targets to solve, optional warm starts and solver options (omitted: the server's defaults).

    The solver options are the fields of :data:`ik_layer.OPTION_SPECS` (``num_seeds``, ``max_iterations``,
    ``position_tolerance``...), each optional and checked against its bounds.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"targets": [_EXAMPLE_POSE]},
                {
                    "targets": [_EXAMPLE_POSE],
                    "warm_start": [_EXAMPLE_Q],
                    "position_tolerance": 1e-4,
                    "orientation_tolerance": 1e-3,
                    "max_iterations": 100,
                    "timeout": 0.5,
                    "return_gradient": True,
                },
            ]
        }
    )

    return_gradient: StrictBool = Field(False, description="also return dq/d(target twist), dof x 6, per solution")
    timeout: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] | None = Field(
        None,
        description="time limit [s] from arrival (default: the server's); unfinished rows then come back with "
        "their best configuration, success false and status 'deadline'",
    )


class IKSolution(BaseModel):
    """The solution of one target."""

    q: list[float] = Field(description="joint configuration [rad or m], in the robot's joint order")
    success: bool = Field(description="both errors within their tolerances")
    position_error: float = Field(description="[m]")
    orientation_error: float = Field(description="[rad]")
    iterations: int
    status: str = Field(
        description="why the row stopped: 'solved', 'exhausted' (iteration budget spent), 'deadline' or 'cancelled'"
    )
    gradient: list[list[float]] | None = Field(
        None,
        description="dof x 6 Jacobian dq/d(target twist [dp; dw]), world-aligned left perturbation; only if asked "
        "(zero on rows that failed)",
    )


class IKResponse(BaseModel):
    """One solution per target, in the order of the request."""

    robot: str
    solutions: list[IKSolution]


class FKRequest(_Request):
    """Joint configurations whose end-effector poses to compute."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"q": [_EXAMPLE_Q]}]})

    q: list[Configuration] = Field(min_length=1, description="configurations, dof values each [rad or m]")


class FKResponse(BaseModel):
    """One pose per configuration, in the order of the request."""

    robot: str
    poses: list[Pose]


class RobotInfo(BaseModel):
    """A loaded robot."""

    name: str
    dof: int
    joint_names: list[str]
    lower: list[float] = Field(description="joint lower limits [rad or m]")
    upper: list[float] = Field(description="joint upper limits [rad or m]")
    ee_frame: str
    locked: dict[str, float] = Field(
        default_factory=dict, description="joints of the model the solver does not move, at their values [rad or m]"
    )


class RobotsResponse(BaseModel):
    """The robots this server solves for."""

    robots: list[RobotInfo]


class HealthResponse(BaseModel):
    """Readiness: robots loaded and warmed up."""

    status: str
    device: str
    dtype: str
    robots: list[str]


class ErrorResponse(BaseModel):
    """A refused request: ``detail`` says why (a list in FastAPI's validation format for 422)."""

    detail: str | list[dict[str, object]]
    available: list[str] | None = Field(None, description="loaded robots, for unknown-robot errors")
    error_count: int | None = Field(None, description="422: validation errors in all (detail lists the first few)")
    limit: int | None = Field(None, description="413 for too many rows: the most this server takes per request")


ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    404: {"model": ErrorResponse, "description": "unknown robot; `available` lists the loaded ones"},
    413: {"model": ErrorResponse, "description": "too many targets, too much work, or body over the size limit"},
    415: {"model": ErrorResponse, "description": "the body is not declared as application/json"},
    422: {"model": ErrorResponse, "description": "invalid body: the first few errors and their count"},
    503: {"model": ErrorResponse, "description": "queue full, starting or stopping; see Retry-After"},
}
