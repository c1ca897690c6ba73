"""Request and response bodies of the HTTP API (pydantic v2); units: metres, radians, quaternions (x, y, z, w).

Every request model is strict (numbers must be JSON numbers, booleans JSON
booleans), forbids unknown fields and rejects NaN, infinities and absurd
magnitudes, so nothing non-finite ever reaches the solver. The solver
options of :class:`IKRequest` come from :data:`ik_layer.OPTION_SPECS` (see
:mod:`ik_layer.server.options`). Checks that need the robot (its frames, the
size of a configuration) live in :mod:`ik_layer.server.decode`.

A pose is given in any of the library's forms (:data:`PoseInput`): a :class:`Pose` object, a 7-vector
``[x, y, z, qx, qy, qz, qw]`` or a 4x4 matrix (rows); each becomes a :class:`Pose` when validated, checked as
:func:`ik_layer.as_transform` checks the library's targets. Robots with several end-effector frames
(``ee_frames`` in ``/v1/robots``) take one object per target mapping each frame name to a pose (:data:`Target`);
robots with one frame take a plain pose (or that object with their one frame).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import torch
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    field_validator,
    model_validator,
)

from ik_layer import (
    MAX_BATCH_OBSTACLES,
    MAX_OBSTACLES,
    MAX_SOLUTIONS,
    Box,
    Capsule,
    Obstacle,
    Sphere,
    as_transform,
    matrix_to_pose,
)
from ik_layer.core.options import POSTURE_HELP
from ik_layer.model.host import QUATERNION_NORM_TOLERANCE, check_quaternion_norm
from ik_layer.server.options import option_model

if TYPE_CHECKING:
    from pydantic.config import JsonDict, JsonValue

__all__ = [
    "ERROR_RESPONSES",
    "MAX_GOALS",
    "ClosestPair",
    "ErrorResponse",
    "FKRequest",
    "FKResponse",
    "HealthResponse",
    "IKRequest",
    "IKResponse",
    "IKSolution",
    "Objective",
    "ObstacleInput",
    "Pose",
    "PoseInput",
    "RobotInfo",
    "RobotsResponse",
    "SceneInfo",
    "SceneRequest",
    "ScenesResponse",
    "Target",
    "Weights",
]

MAX_COORDINATE = 1e4  # [m] or [rad]: bound on positions, joint values and warm starts
MIN_QUATERNION_NORM = 1e-6  # below it a floating base's quaternion in a configuration is refused as zero

Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_COORDINATE, le=MAX_COORDINATE)]
QuaternionPart = Annotated[float, Field(allow_inf_nan=False, ge=-1e6, le=1e6)]
Configuration = Annotated[list[Coordinate], Field(min_length=1, max_length=256)]

MAX_WEIGHT = 1e6
Weight = Annotated[float, Field(allow_inf_nan=False, ge=0, le=MAX_WEIGHT)]

_EXAMPLE_POSITION: list[JsonValue] = [-0.6409, -0.1334, 0.3841]
_EXAMPLE_ORIENTATION: list[JsonValue] = [-0.707, -0.707, 0.0106, 0.01]
_EXAMPLE_POSE: JsonDict = {"position": _EXAMPLE_POSITION, "orientation": _EXAMPLE_ORIENTATION}
_EXAMPLE_Q: list[JsonValue] = [0.0, -1.2, 1.4, -1.8, -1.57, 0.0]
# talos: base upright, knees bent
_EXAMPLE_STANDING: list[JsonValue] = [*([0.0] * 6), 1.0, *([0.0, 0.0, -0.41, 0.86, -0.45, 0.0] * 2)]
_EXAMPLE_FEET: JsonDict = {  # talos on a floating base, ee_frames [left_sole_link, right_sole_link]: feet 10 cm apart
    "left_sole_link": {"position": [-0.02, 0.1, -1.05], "orientation": [0.0, 0.0, 0.0, 1.0]},
    "right_sole_link": {"position": [-0.02, -0.1, -1.05], "orientation": [0.0, 0.0, 0.0, 1.0]},
}

UNION_TAGS = ("<pose>", "<frames>", "<axes>", "<vector>", "<matrix>", "<row>", "<rows>", "<scene>", "<scenes>")
"""Tags of the union members below; :func:`ik_layer.server.decode.parse` drops them from error locations."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


_UNIT = f"norm 1 to within {QUATERNION_NORM_TOLERANCE:g}, normalised"


def _unit(quaternion: list[float], name: str) -> list[float]:
    """``quaternion`` normalised, if its norm is within the library's bound (:func:`check_quaternion_norm`)."""
    norm = math.sqrt(sum(x * x for x in quaternion))
    check_quaternion_norm(norm, name)
    return [x / norm for x in quaternion]


class Pose(_Request):
    """A pose ``T_base_ee``: position [m] and unit quaternion (x, y, z, w), normalised on input."""

    model_config = ConfigDict(json_schema_extra={"examples": [_EXAMPLE_POSE]})

    position: Annotated[list[Coordinate], Field(min_length=3, max_length=3, description="x, y, z [m]")]
    orientation: Annotated[
        list[QuaternionPart], Field(min_length=4, max_length=4, description=f"quaternion x, y, z, w ({_UNIT})")
    ]

    @field_validator("orientation")
    @classmethod
    def _normalise(cls, value: list[float]) -> list[float]:
        return _unit(value, "orientation")


def _vector_pose(value: list[float]) -> Pose:
    return Pose.model_construct(position=value[:3], orientation=_unit(value[3:], "the quaternion (entries 3:7)"))


def _matrix_pose(value: list[list[float]]) -> Pose:
    pose = matrix_to_pose(as_transform(torch.tensor(value, dtype=torch.float64), "transform")).tolist()
    return Pose.model_construct(position=pose[:3], orientation=pose[3:])


PoseVector = Annotated[
    list[Coordinate],
    Field(min_length=7, max_length=7, description=f"[x, y, z, qx, qy, qz, qw]: position [m], quaternion ({_UNIT})"),
    AfterValidator(_vector_pose),
]
PoseMatrix = Annotated[
    list[Annotated[list[Coordinate], Field(min_length=4, max_length=4)]],
    Field(
        min_length=4,
        max_length=4,
        description="4x4 homogeneous transform, by rows: a rotation orthonormal with determinant +1 to 1e-6 (write "
        "it in full precision), translation [m], bottom row [0, 0, 0, 1]",
    ),
    AfterValidator(_matrix_pose),
]


def _pose_form(value: Any) -> str:
    """The tag of a pose in one of its forms: ``<matrix>`` (a list of lists), ``<vector>`` (a list), ``<pose>``."""
    if isinstance(value, list):
        return UNION_TAGS[4] if value and isinstance(value[0], list) else UNION_TAGS[3]
    return UNION_TAGS[0]


def _target_form(value: Any) -> str:
    """``<frames>`` for an object without ``position`` and ``orientation``, else the tag of its pose form."""
    if isinstance(value, dict) and "position" not in value and "orientation" not in value:
        return UNION_TAGS[1]
    return _pose_form(value)


_POSE_FORMS = (
    Annotated[Pose, Tag(UNION_TAGS[0])]
    | Annotated[PoseVector, Tag(UNION_TAGS[3])]
    | Annotated[PoseMatrix, Tag(UNION_TAGS[4])]
)
PoseInput = Annotated[_POSE_FORMS, Discriminator(_pose_form)]
"""A pose in any of the library's forms: a :class:`Pose` object, a 7-vector or a 4x4 matrix; a :class:`Pose`
once validated."""

FramePoses = Annotated[
    dict[str, PoseInput],
    Field(description="end-effector frame name -> its pose; every frame of the robot's ee_frames, no other"),
]
Target = Annotated[_POSE_FORMS | Annotated[FramePoses, Tag(UNION_TAGS[1])], Discriminator(_target_form)]
"""One target: a pose (one-frame robots; see :data:`PoseInput`), or an object frame name -> pose (any robot;
robots with several ``ee_frames`` need it, with every frame). Validated, every pose is a :class:`Pose`."""


def _some_axis(value: list[float]) -> list[float]:
    if not any(value):
        raise ValueError("weights must have at least one non-zero entry (all zero would ignore the frame)")
    return value


Axes = Annotated[
    list[Weight],
    Field(min_length=6, max_length=6, description="weights of [x, y, z, rx, ry, rz], non-negative, not all zero"),
    AfterValidator(_some_axis),
]


def _axes_or_frames(value: Any) -> str:
    return UNION_TAGS[1] if isinstance(value, dict) else UNION_TAGS[2]


Weights = Annotated[
    Annotated[Axes, Tag(UNION_TAGS[2])] | Annotated[dict[str, Axes], Tag(UNION_TAGS[1])],
    Discriminator(_axes_or_frames),
]
"""Error weights: 6 numbers for every frame, or an object frame name -> 6 numbers (frames left out weigh ones)."""


Point = Annotated[list[Coordinate], Field(min_length=3, max_length=3, description="x, y, z [m]")]
Length = Annotated[float, Field(allow_inf_nan=False, gt=0, le=MAX_COORDINATE)]


class SphereObstacle(_Request):
    """A ball in the base frame."""

    type: Literal["sphere"]
    center: Point
    radius: Length = Field(description="[m], > 0")

    @staticmethod
    def shapes(run: Sequence[SphereObstacle]) -> Obstacle:
        """The library's obstacle of a ``run`` of spheres: one batch of them, in order."""
        return Sphere([e.center for e in run], [e.radius for e in run])


class BoxObstacle(_Request):
    """An oriented box in the base frame: its centre's pose and its full side lengths along its own axes."""

    type: Literal["box"]
    pose: PoseInput
    size: Annotated[list[Length], Field(min_length=3, max_length=3, description="full side lengths [m], > 0")]

    @staticmethod
    def shapes(run: Sequence[BoxObstacle]) -> Obstacle:
        """The library's obstacle of a ``run`` of boxes: one batch of them, in order."""
        poses = [cast("Pose", e.pose) for e in run]  # validated, every pose form is a Pose
        return Box([p.position + p.orientation for p in poses], [e.size for e in run])


class CapsuleObstacle(_Request):
    """The points within ``radius`` of the segment from ``a`` to ``b``, in the base frame."""

    type: Literal["capsule"]
    a: Point
    b: Point
    radius: Length = Field(description="[m], > 0")

    @staticmethod
    def shapes(run: Sequence[CapsuleObstacle]) -> Obstacle:
        """The library's obstacle of a ``run`` of capsules: one batch of them, in order."""
        return Capsule([e.a for e in run], [e.b for e in run], [e.radius for e in run])


ObstacleInput = Annotated[SphereObstacle | BoxObstacle | CapsuleObstacle, Field(discriminator="type")]
"""An obstacle in the base frame (the world with a floating base), by its ``type``: sphere, box or capsule."""

Obstacles = Annotated[list[ObstacleInput], Field(max_length=MAX_OBSTACLES)]


def _scene_or_scenes(value: Any) -> str:
    return UNION_TAGS[8] if isinstance(value, list) and value and isinstance(value[0], list) else UNION_TAGS[7]


SceneObstacles = Annotated[
    Annotated[Obstacles, Tag(UNION_TAGS[7])] | Annotated[list[Obstacles], Tag(UNION_TAGS[8])],
    Discriminator(_scene_or_scenes),
]
"""Obstacles for every target (a list of obstacles), or one list of them per target."""
SceneName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="a registered scene's name")]

_EXAMPLE_OBSTACLES: list[JsonValue] = [
    {"type": "box", "pose": [0.5, 0.0, -0.02, 0.0, 0.0, 0.0, 1.0], "size": [1.0, 1.0, 0.04]},
    {"type": "sphere", "center": [0.4, 0.2, 0.3], "radius": 0.05},
]


def _row_or_rows(value: Any) -> str:
    return UNION_TAGS[6] if isinstance(value, list) and value and isinstance(value[0], list) else UNION_TAGS[5]


MAX_TERMS = 16
"""Added terms in one request at most."""

TermName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", description="an added term's name")]
TermRow = Annotated[list[Coordinate], Field(min_length=1, max_length=1024)]


class TermRequest(_Request):
    """An added secondary cost term's part in a request: its gain and its data."""

    gain: float = Field(ge=0, le=1e6, allow_inf_nan=False, description="the term's gain (0: off)")
    data: (
        Annotated[
            Annotated[TermRow, Tag(UNION_TAGS[5])] | Annotated[list[TermRow], Tag(UNION_TAGS[6])],
            Discriminator(_row_or_rows),
        ]
        | None
    ) = Field(
        None,
        description="the term's per-target data: its data_size numbers (GET /v1/robots lists them) for every "
        "target, or one list per target; omitted for a term without data",
    )


Objective = Literal["first", "closest", "manipulability", "posture"]
"""How solutions rank: ``ik_layer.OBJECTIVES`` (a test keeps the two equal)."""


MAX_GOALS = 256
"""Candidate poses in one row of ``goals`` at most."""

GoalRow = Annotated[list[Target], Field(min_length=1, max_length=MAX_GOALS)]


class _IKTargets(_Request):
    targets: list[Target] | None = Field(
        None,
        min_length=1,
        description="end-effector targets T_base_ee: a pose each ({position, orientation}, [x, y, z, qx, qy, qz, "
        "qw] or a 4x4 matrix by rows), or with several ee_frames an object mapping each frame name to its pose; "
        "give targets or goals",
    )
    goals: list[GoalRow] | None = Field(
        None,
        min_length=1,
        description="instead of targets, goal sets: per row, its candidate poses (say the grasps of one object, "
        f"at most {MAX_GOALS}; every pose counts against the server's targets limit); each row's answer reaches "
        "one of them, the first solved by objective, and its solution's goal tells which",
    )
    warm_start: list[Configuration] | None = Field(
        None,
        description="one warm-start configuration per target, nq values each [rad or m]; with a floating base "
        "the base pose [x, y, z, qx, qy, qz, qw] first (non-zero quaternion), then the joints",
    )
    posture: (
        Annotated[
            Annotated[Configuration, Tag(UNION_TAGS[5])] | Annotated[list[Configuration], Tag(UNION_TAGS[6])],
            Discriminator(_row_or_rows),
        ]
        | None
    ) = Field(
        None,
        description=f"{POSTURE_HELP}: one configuration of nq values for every target, or one per target [rad or "
        "m]; with a floating base the base pose [x, y, z, qx, qy, qz, qw] first (non-zero quaternion; it is not "
        "pulled), then the joints",
    )
    weights: Weights | None = Field(
        None,
        description="error weights of [x, y, z, rx, ry, rz] for every target: 6 non-negative numbers for every "
        "frame, or an object frame name -> 6 numbers (frames left out weigh ones); zeros drop an axis "
        "([1, 1, 1, 0, 0, 0]: position only). Default: ones",
    )
    obstacles: SceneObstacles | None = Field(
        None,
        description="obstacles every answer keeps collision_margin clear of (with the scene's, if one is named): "
        "{type: sphere, center, radius}, {type: box, pose, size (full side lengths)} or {type: capsule, a, b, "
        "radius}, in the base frame [m]; a list of them for every target, or one list per target (each target "
        f"keeps clear of its own; at most {MAX_OBSTACLES} each, {MAX_BATCH_OBSTACLES} in all); the robot needs "
        "collision spheres (collision_spheres in /v1/robots)",
    )
    scene: SceneName | None = Field(
        None, description="a scene registered with PUT /v1/robots/{name}/scenes/{scene}: its obstacles apply too"
    )
    terms: dict[TermName, TermRequest] | None = Field(
        None,
        max_length=MAX_TERMS,
        description="secondary cost terms the server added (its --terms; GET /v1/robots lists each robot's, with "
        "the size of their data), by name: {gain, data}; pursued in the pose's null space and ranking successes, "
        "as posture and centring are",
    )

    @property
    def rows(self) -> int:
        """The targets, or the rows of goals."""
        return len(self.targets if self.targets is not None else self.goals or [])

    @model_validator(mode="after")
    def _one_row_per_target(self) -> _IKTargets:
        if (self.targets is None) == (self.goals is None):
            raise ValueError("give either targets (a pose per row) or goals (candidate poses per row)")
        per_target: dict[str, list[Any] | None] = {"warm_start": self.warm_start}
        if self.posture and isinstance(self.posture[0], list):
            per_target["posture"] = self.posture
        if self.obstacles and isinstance(self.obstacles[0], list):
            per_target["obstacles"] = self.obstacles
        for name, term in (self.terms or {}).items():
            if term.data and isinstance(term.data[0], list):
                per_target[f"terms.{name}.data"] = term.data
        for name, rows in per_target.items():
            if rows is not None and len(rows) != self.rows:
                noun = "targets" if self.targets is not None else "rows of goals"
                raise ValueError(
                    f"{name} has {len(rows)} rows but there are {self.rows} {noun}; give one per target"
                    + (" (or one configuration for all)" if name == "posture" else "")
                    + (" (or one list for all)" if name.startswith("terms.") else "")
                    + (" (or one list of obstacles for all)" if name == "obstacles" else "")
                )
        return self


if TYPE_CHECKING:  # the option fields are made at run time: mypy sees the base (decode reads them by name)

    class _IKOptions(_Request):
        """The solver options' request fields (:func:`option_model`)."""

else:
    _IKOptions = option_model("IKOptions", _Request, optional=True)


class IKRequest(_IKOptions, _IKTargets):  # fields: targets, warm_start, posture, weights, the solver options, ...
    """Targets to solve, optional warm starts, posture, weights and solver options (omitted: the server's defaults).

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
                {"targets": [_EXAMPLE_POSITION + _EXAMPLE_ORIENTATION], "posture": _EXAMPLE_Q},
                {"targets": [_EXAMPLE_FEET], "posture": _EXAMPLE_STANDING, "weights": [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]},
                {"targets": [_EXAMPLE_POSE], "obstacles": _EXAMPLE_OBSTACLES, "collision_margin": 0.01},
                {"targets": [_EXAMPLE_POSE], "warm_start": [_EXAMPLE_Q], "num_solutions": 8, "objective": "closest"},
                {"goals": [[_EXAMPLE_POSE, {"position": [-0.6, -0.2, 0.4], "orientation": _EXAMPLE_ORIENTATION}]]},
            ]
        }
    )

    return_gradient: StrictBool = Field(
        False, description="also return dq/d(target twist) per solution (see IKSolution.gradient)"
    )
    timeout: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] | None = Field(
        None,
        description="time limit [s] from arrival (default: the server's); unfinished rows then come back with "
        "their best configuration, success false and status 'deadline'",
    )
    num_solutions: Annotated[int, Field(ge=1, le=MAX_SOLUTIONS)] = Field(
        1,
        description="up to this many distinct solutions per target (joint distance >= 0.1, full-turn joints "
        "modulo a turn), best first by objective; above 1 each entry of solutions is a list of that many (success "
        "false, status 'exhausted' or 'deadline', in slots without a distinct solution)",
    )
    objective: Objective = Field(
        "first",
        description="how solutions rank, best first: 'first' (as found), 'closest' (nearest warm_start, TRAC-IK's "
        "Distance), 'manipulability' (TRAC-IK's Manip1) or 'posture' (nearest posture); other than 'first', the "
        "best of several answers even for one solution",
    )


Gradient = Annotated[list[list[float]], Field(description="dof rows of 6: d q_tangent / d[dp; dw]")]


class ClosestPair(BaseModel):
    """The pair at a solution's least distance: one of the robot's collision spheres and an obstacle, or two of
    its spheres (self-collision)."""

    link: str = Field(description="the link holding the robot's sphere")
    sphere: int = Field(description="the sphere's index in the robot's collision model")
    obstacle: int | None = Field(
        None, description="the obstacle's index: the scene's obstacles first, then the request's"
    )
    other_link: str | None = Field(None, description="self-collision: the link holding the other sphere")
    other_sphere: int | None = Field(None, description="self-collision: the other sphere's index")


class IKSolution(BaseModel):
    """The solution of one target."""

    q: list[float] = Field(
        description="configuration, nq values [rad or m]: with a floating base the base pose [x, y, z, qx, qy, qz, "
        "qw] first, then the joints in the order of joint_names"
    )
    success: bool = Field(description="both errors within their tolerances (at every end-effector frame)")
    position_error: float = Field(description="[m] norm of the weighted position axes (the worst frame's)")
    orientation_error: float = Field(description="[rad] norm of the weighted rotation axes (the worst frame's)")
    iterations: int
    status: str = Field(
        description="why the row stopped: 'solved', 'exhausted' (iteration budget spent), 'deadline' or 'cancelled'"
    )
    min_distance: float | None = Field(
        None,
        description="[m] with obstacles or self_collision: the least signed distance between the robot's collision "
        "spheres and the obstacles (or each other) at q; negative: they overlap; a success is at least "
        "collision_margin clear",
    )
    closest: ClosestPair | None = Field(None, description="with min_distance: the pair at that distance")
    goal: int | None = Field(
        None,
        description="with goals: the index in its row of the goal reached (where none was, the nearest miss, with "
        "success false)",
    )
    gradient: Gradient | dict[str, Gradient] | None = Field(
        None,
        description="only if asked (return_gradient): dq/d(target twist [dp; dw]) as dof rows of 6 numbers "
        "(ik_layer.target_gradient; world-aligned left perturbation of the target, weights applied; zero on "
        "rows that failed). dq is a tangent: with a floating base the base twist (6, in the base frame) first, "
        "then the joints. With several ee_frames: an object frame name -> that frame's dof x 6 matrix (the "
        "library's (dof, F, 6) array split by frame)",
    )


class IKResponse(BaseModel):
    """One solution per target, in the order of the request (with num_solutions above 1, a list of them)."""

    robot: str
    solutions: list[IKSolution] | list[list[IKSolution]] = Field(
        description="one solution per target; with num_solutions k > 1, one list of k per target, best first"
    )


class FKRequest(_Request):
    """Joint configurations whose end-effector poses to compute."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"q": [_EXAMPLE_Q]}]})

    q: list[Configuration] = Field(
        min_length=1,
        description="configurations, nq values each [rad or m]; with a floating base the base pose [x, y, z, qx, "
        "qy, qz, qw] first (non-zero quaternion)",
    )


class FKResponse(BaseModel):
    """One pose per configuration, in the order of the request: with several ee_frames an object frame -> pose."""

    robot: str
    poses: list[Pose | dict[str, Pose]] = Field(
        description="T_base_ee of each configuration (T_world_ee with a floating base); with several ee_frames an "
        "object mapping each frame name to its pose"
    )


class RobotInfo(BaseModel):
    """A loaded robot."""

    name: str
    nq: int = Field(description="values in a configuration q: 7 base values (floating base) + the joints")
    dof: int = Field(description="degrees of freedom: rows of a gradient; 6 (floating base twist) + the joints")
    joint_names: list[str] = Field(description="the joints the solver moves, in the order of q (after the base)")
    lower: list[float] = Field(description="joint lower limits [rad or m], one per joint name (the base has none)")
    upper: list[float] = Field(description="joint upper limits [rad or m], one per joint name")
    ee_frame: str = Field(description="the end-effector frame (the first of ee_frames)")
    ee_frames: list[str] = Field(
        description="the end-effector frames, in order; with several, targets, weights, FK poses and gradients "
        "are objects keyed by these names"
    )
    floating_base: bool = Field(description="q starts with the base pose [x, y, z, qx, qy, qz, qw] in the world")
    locked: dict[str, float] = Field(
        default_factory=dict, description="joints of the model the solver does not move, at their values [rad or m]"
    )
    collision: str | None = Field(
        "auto",
        description="where the collision spheres come from: the \"collision\" of the robot's entry in the server's "
        '--robots @robots.json ("auto", "fit", a sphere file, or null: none)',
    )
    collision_spheres: int = Field(
        0,
        description="collision spheres of the robot's collision model; 0: none (obstacles and self_collision "
        "are refused)",
    )
    terms: dict[str, int] = Field(
        default_factory=dict,
        description="the secondary cost terms the server added, which IK requests may name in terms: each one's "
        "data size (numbers per target; 0: none)",
    )


class RobotsResponse(BaseModel):
    """The robots this server solves for."""

    robots: list[RobotInfo]


class SceneRequest(_Request):
    """The obstacles of a scene to register under a name, for IK requests to name as their ``scene``."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"obstacles": _EXAMPLE_OBSTACLES}]})

    obstacles: Obstacles = Field(description="the scene's obstacles, in the base frame (see IKRequest.obstacles)")


class SceneInfo(BaseModel):
    """A registered scene."""

    name: str
    obstacles: int = Field(description="how many obstacles it holds")


class ScenesResponse(BaseModel):
    """The scenes registered for a robot."""

    robot: str
    scenes: list[SceneInfo]


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
    limit: int | None = Field(
        None, description="413 for too many rows: the most this server takes per request; 409: the most scenes"
    )


ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    404: {"model": ErrorResponse, "description": "unknown robot; `available` lists the loaded ones"},
    413: {"model": ErrorResponse, "description": "too many targets, too much work, or body over the size limit"},
    415: {"model": ErrorResponse, "description": "the body is not declared as application/json"},
    422: {"model": ErrorResponse, "description": "invalid body: the first few errors and their count"},
    503: {"model": ErrorResponse, "description": "queue full, starting or stopping; see Retry-After"},
}
