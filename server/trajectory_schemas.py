"""Request and response bodies of ``POST /v1/robots/{name}/trajectory`` (pydantic v2), in the IK route's vocabulary.

A trajectory request is a clip of T frames: ``targets`` holds one target per frame, in time order, in any form the IK
route takes (:data:`ik_layer.server.schemas.Target`: a pose object, ``[x, y, z, qx, qy, qz, qw]``, a 4x4 matrix, or
with several ``ee_frames`` an object frame name -> pose). The other fields are :func:`ik_layer.solve_trajectory`'s
keyword arguments under their names there (``dt``, ``velocity_limit``, ``acceleration``, ``warm_start``,
``posture``, ``posture_weight``, ``weights``), with the IK route's solver options and ``timeout``. As in
:mod:`ik_layer.server.schemas`, every model is strict, forbids unknown fields and refuses NaN and infinities; checks
that need the robot (frames, nq, joints) and the server's limits live in :mod:`ik_layer.server.trajectory_jobs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ik_layer.server.options import option_model
from ik_layer.server.schemas import Configuration, Target, Weights

if TYPE_CHECKING:
    from pydantic.config import JsonValue

__all__ = ["MAX_DT", "MAX_VELOCITY", "MIN_DT", "MIN_VELOCITY", "TrajectoryRequest", "TrajectoryResponse"]

MAX_VELOCITY = 1e6
"""[rad/s or m/s] the largest velocity limit a request may give (as good as none)."""

MIN_VELOCITY = 1e-6
"""[rad/s or m/s] the smallest velocity limit a request may give (> 0)."""

MIN_DT, MAX_DT = 1e-6, 3600.0
"""[s] the shortest and longest time between frames a request may give (> 0)."""

Velocity = Annotated[float, Field(allow_inf_nan=False, ge=MIN_VELOCITY, le=MAX_VELOCITY)]
CostWeight = Annotated[float, Field(allow_inf_nan=False, ge=0, le=1e6)]

_EXAMPLE_CLIP: list[JsonValue] = [
    [-0.6409, -0.1334 + 0.002 * t, 0.3841, -0.707, -0.707, 0.0106, 0.01] for t in range(3)
]
_EXAMPLE_Q: list[JsonValue] = [0.0, -1.2, 1.4, -1.8, -1.57, 0.0]
_EXAMPLES: list[JsonValue] = [
    {"targets": _EXAMPLE_CLIP, "dt": 0.01},
    {
        "targets": _EXAMPLE_CLIP,
        "dt": 0.01,
        "warm_start": _EXAMPLE_Q,
        "velocity_limit": 2.0,
        "acceleration": 10.0,
        "position_tolerance": 1e-4,
        "timeout": 5.0,
    },
    {"targets": _EXAMPLE_CLIP, "dt": 0.02, "posture": _EXAMPLE_Q, "posture_weight": 0.05, "random_seed": 7},
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _TrajectoryFields(_Request):
    targets: list[Target] = Field(
        min_length=1,
        description="the clip: one end-effector target T_base_ee per frame, in time order (T frames, at most the "
        "server's max_trajectory_frames): a pose each ({position, orientation}, [x, y, z, qx, qy, qz, qw] or a 4x4 "
        "matrix by rows), or with several ee_frames an object mapping each frame name to its pose",
    )
    dt: Annotated[float, Field(allow_inf_nan=False, ge=MIN_DT, le=MAX_DT)] = Field(
        description=f"[s] time between frames (> 0: {MIN_DT:g} to {MAX_DT:g})"
    )
    velocity_limit: Velocity | Annotated[list[Velocity], Field(min_length=1, max_length=256)] | None = Field(
        None,
        description=f"joint velocity limits [rad/s or m/s], > 0 ({MIN_VELOCITY:g} to {MAX_VELOCITY:g}): one number "
        "for every joint, or one per joint in the order of joint_names; default the robot model's <limit velocity> "
        "(none where the model gives none)",
    )
    acceleration: CostWeight = Field(
        0.0, description="weight of the acceleration cost against the velocity cost (0: none)"
    )
    warm_start: Configuration | None = Field(
        None,
        description="the configuration the robot rests at before the first frame, nq values [rad or m] (with a "
        "floating base the base pose [x, y, z, qx, qy, qz, qw] first, non-zero quaternion): the first frame's seed, "
        "and its step is bounded from it; without one the first frame is solved freely",
    )
    posture: Configuration | None = Field(
        None,
        description="a preferred configuration, nq values [rad or m], every frame is pulled towards (the joints "
        "only; with a floating base the base pose first, not pulled)",
    )
    posture_weight: CostWeight = Field(
        0.01, description="weight of the posture cost against the velocity cost, per frame (with posture)"
    )
    weights: Weights | None = Field(
        None,
        description="error weights of [x, y, z, rx, ry, rz] for every frame of the clip: 6 non-negative numbers, or "
        "an object end-effector frame name -> 6 numbers (frames left out weigh ones); [1, 1, 1, 0, 0, 0]: "
        "position only. Default: ones",
    )
    timeout: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] | None = Field(
        None,
        description="time limit [s] from arrival (default: the server's trajectory_timeout, else its max_timeout); "
        "a clip not solved by then is answered 413 (too much work for its time limit)",
    )
    random_seed: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = Field(
        None, description="seed of the solver's random generator: the same request, the same answer"
    )


if TYPE_CHECKING:  # the option fields are made at run time: mypy sees the base (the decoder reads them by name)

    class _TrajectoryOptions(_Request):
        """The solver options' request fields (:func:`option_model`)."""

else:
    _TrajectoryOptions = option_model("TrajectoryOptions", _Request, optional=True)


class TrajectoryRequest(_TrajectoryOptions, _TrajectoryFields):  # fields: targets, dt, ..., the solver options
    """A clip of T targets solved frame after frame, no joint stepping more than ``velocity_limit * dt``, as
    :func:`ik_layer.solve_trajectory` solves it.

    The solver options are the fields of :data:`ik_layer.OPTION_SPECS` (``num_seeds``, ``max_iterations``,
    ``position_tolerance``...), each optional and checked against its bounds; the secondary terms (``centring``,
    ``manipulability``, ``self_collision``) do not apply to trajectories and are refused.
    """

    model_config = ConfigDict(json_schema_extra={"examples": _EXAMPLES})


class TrajectoryResponse(BaseModel):
    """The clip's answer, one entry per frame in the order of the request (``q``: one configuration per frame)."""

    robot: str
    q: list[list[float]] = Field(
        description="T configurations, nq values each [rad or m]: with a floating base the base pose [x, y, z, qx, "
        "qy, qz, qw] first, then the joints in the order of joint_names; inside the joint limits"
    )
    success: list[bool] = Field(
        description="per frame: the pose within the tolerances (at every end-effector frame) and the step within "
        "the velocity limits"
    )
    position_error: list[float] = Field(description="per frame [m] (the worst end-effector frame's)")
    orientation_error: list[float] = Field(description="per frame [rad] (the worst end-effector frame's)")
    max_step: list[float] = Field(
        description="per frame [rad or m]: the largest joint motion from the previous frame (from warm_start for "
        "the first frame; 0 there without one); a floating base's motion is not counted"
    )
    velocity_ratio: list[float] = Field(
        description="per frame: the largest |step| / (velocity_limit * dt) of its joints, at most 1"
    )
    bounded: list[bool] = Field(
        description="per frame: solved again inside its velocity box (the unconstrained answer stepped too far, "
        "or failed)"
    )
    status: list[Literal["solved", "exhausted", "deadline"]] = Field(
        description='per frame, why it stopped: "solved" (its success), "deadline" (the timeout ran out during '
        "the frame or before it: from there on every frame holds the last configuration reached), "
        '"exhausted" (no solution within the budget and the velocity box)'
    )
