"""Stage 1, decode: a request body -> a validated model -> CPU tensors in the robot's dtype -> a checked problem.

:func:`parse` runs pydantic (:mod:`ik_layer.server.schemas`: strict JSON types, bounds) and reports at most
:data:`MAX_REPORTED_ERRORS` errors, without echoing the input. What is left needs the robot (its end-effector
frames, the size of a configuration) or the server's limits (rows per request, time limits).

Frames: a robot with several end-effector frames (:func:`frame_keys`) takes each target as an object mapping
every frame name to a pose, and weights as 6 numbers or an object frame -> 6 numbers; its targets become
(n, F, 7) tensors in the robot's frame order. A robot with one frame takes a pose (or an object holding its one
frame) and gives (n, 7) tensors.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

import numpy as np
import torch
from pydantic import BaseModel, ValidationError
from torch import Tensor

from ik_layer import OPTION_SPECS, IKLayerError, NoCollisionModel, Obstacle, Problem, Robot, SolveOptions
from ik_layer.collision.shapes import Scenes, check_obstacles, check_scenes
from ik_layer.core.solutions import SolutionSearch, check_objective
from ik_layer.model.robot import NUMPY_DTYPES
from ik_layer.server.exceptions import FieldError, InvalidBody, NoCollisionSpheres, TooManyRows
from ik_layer.server.schemas import (
    MIN_QUATERNION_NORM,
    UNION_TAGS,
    FKRequest,
    IKRequest,
    ObstacleInput,
    Pose,
)
from ik_layer.server.settings import Settings
from ik_layer.terms import TermInput

__all__ = [
    "MAX_REPORTED_ERRORS",
    "IKJob",
    "configurations",
    "error_weights",
    "fk_configurations",
    "frame_keys",
    "frames_of",
    "ik_job",
    "obstacle_shapes",
    "parse",
    "pose_targets",
    "prepare",
]


MAX_REPORTED_ERRORS = 10
"""Validation errors listed in a 422 answer at most (the answer says how many there were)."""


M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], body: bytes) -> M:
    """``body`` (JSON) validated as ``model``, strictly typed.

    Raises:
        InvalidBody: malformed JSON or invalid values; holds the first :data:`MAX_REPORTED_ERRORS` errors.
    """
    try:
        return model.model_validate_json(body, strict=True)
    except ValidationError as err:
        errors = err.errors(include_url=False, include_context=False, include_input=False)
        first = [{**e, "loc": tuple(x for x in e["loc"] if x not in UNION_TAGS)} for e in errors[:MAX_REPORTED_ERRORS]]
        raise InvalidBody(first, err.error_count()) from None


def frames_of(robot: Robot) -> tuple[str, ...]:
    """The robot's end-effector frames, in order (one-frame robots: ``(ee_frame,)``)."""
    return tuple(robot.ee_frames) if robot.ee_frames is not None else (robot.ee_frame,)


def frame_keys(robot: Robot) -> tuple[str, ...] | None:
    """The frames that key targets, weights, FK poses and gradients in the API: the robot's ``ee_frames`` when it
    has several; None for one frame (plain poses), however it was loaded."""
    frames = frames_of(robot)
    return frames if len(frames) > 1 else None


@dataclass(frozen=True)
class IKJob:
    """One IK request as CPU tensors in the robot's dtype (its targets as a numpy array, which the library checks in
    plain floats for one pose: :meth:`Problem.of_host_targets`).

    Attributes:
        targets: (n, 7) poses ``[x, y, z, qx, qy, qz, qw]``, quaternions normalised; (n, F, 7) for a robot
            with F end-effector frames (``robot.target_shape``), in its frame order.
        warm_start: (n, nq) warm starts, or None.
        options: the solver options, the server's defaults for those the request left out; jobs with equal
            options may share a batch.
        gradient: whether the request asked for dq/d(target twist).
        timeout: time limit of the request [s], from its arrival.
        weights: error weights of every target, (6,) or (F, 6) (broadcast to the targets); None: ones.
        posture: (n, nq) preferred configurations (one given for all targets repeated), or None.
        terms: the added secondary terms by name: their gain and data (n, D) (one given for all repeated), as
            :meth:`Problem.prepare` takes them (it checks them).
        obstacles: the obstacles of the named scene, then the request's own: one scene for every target, or one
            per target.
        num_solutions: the distinct solutions asked per target; objective: how they rank (``ik_layer.OBJECTIVES``).
        goal_counts: with goal sets, the (r,) goals of each row: the targets (and warm starts, postures, scenes) are
            then every row's goals, one row after the other; else None.
    """

    targets: np.ndarray
    warm_start: Tensor | None
    options: SolveOptions
    gradient: bool
    timeout: float
    weights: Tensor | None = None
    posture: Tensor | None = None
    obstacles: Scenes = ((),)
    num_solutions: int = 1
    objective: str = "first"
    goal_counts: Tensor | None = None
    terms: dict[str, TermInput] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """Number of targets (with goal sets, of goals)."""
        return self.targets.shape[0]

    @property
    def frames(self) -> int:
        """End-effector frames per target (1 for one-frame robots)."""
        return self.targets.shape[1] if self.targets.ndim == 3 else 1

    @property
    def searches(self) -> bool:
        """Whether the job runs a search of several rounds (:class:`ik_layer.core.solutions.SolutionSearch`) rather
        than one solve: it asks for several solutions or ranks them by an objective (goal sets rank their goals'
        answers instead, as :func:`ik_layer.solve` does)."""
        return (self.num_solutions > 1 or self.objective != "first") and self.goal_counts is None

    @property
    def most_rows(self) -> int:
        """The most rows the job solves, all rounds together."""
        if not self.searches:
            return self.rows
        return SolutionSearch.most_rows(self.rows, self.num_solutions)


def ik_job(
    robot: Robot, request: IKRequest, settings: Settings, scenes: Mapping[str, tuple[Obstacle, ...]] | None = None
) -> IKJob:
    """The job of an IK request: targets, warm starts, options, obstacles and time limit.

    ``scenes``: the scenes registered for the robot, by name.

    Raises:
        TooManyRows: more targets than ``settings.max_targets``.
        FieldError: a target or weights not keyed by the robot's frames, a warm-start or posture row of the wrong
            length (or a floating base's zero quaternion), a timeout over ``settings.max_timeout``, an unknown
            scene, too many obstacles, or an objective without the warm start or posture it ranks by.
    """
    places = _places(request)
    _check_rows("targets" if request.goals is None else "goals", len(places), settings.max_targets)
    timeout = settings.timeout if request.timeout is None else request.timeout
    if timeout > settings.max_timeout:
        raise FieldError(
            ("body", "timeout"), f"timeout is {timeout:g} s; this server allows at most {settings.max_timeout:g} s"
        )
    asked = request.model_fields_set.intersection(OPTION_SPECS)  # the options the request sets (most: none)
    options = SolveOptions.build(settings.solve_options(), **{name: getattr(request, name) for name in asked})
    # validated, every target is a Pose or frame -> Pose (the schema's validators turn vectors and matrices into Poses)
    given = request.targets if request.goals is None else [goal for row in request.goals for goal in row]
    targets = pose_targets(robot, cast("list[Pose | dict[str, Pose]]", given), places)
    warm_start = None if request.warm_start is None else configurations(robot, request.warm_start, "warm_start")
    weights = None if request.weights is None else error_weights(robot, request.weights)
    posture = None if request.posture is None else _posture(robot, request.posture, request.rows)
    terms = _terms(robot, request)
    obstacles = _obstacles(robot, request, scenes or {})
    try:
        check_objective(request.num_solutions, request.objective, warm_start, posture)
    except IKLayerError as err:
        raise FieldError(("body", "objective"), str(err)) from None
    goal_counts = None
    if request.goals is not None:  # every goal a target of its own, with its row's warm start, posture and scene
        if request.num_solutions != 1:
            raise FieldError(("body", "num_solutions"), "goals give one answer per row: num_solutions must be 1")
        goal_counts = torch.tensor([len(row) for row in request.goals])
        warm_start = None if warm_start is None else warm_start.repeat_interleave(goal_counts, 0)
        posture = None if posture is None else posture.repeat_interleave(goal_counts, 0)
        terms = {name: replace(term, data=None if term.data is None else term.data.repeat_interleave(goal_counts, 0))
                 for name, term in terms.items()}  # fmt: skip
        if len(obstacles) > 1:
            obstacles = tuple(scene for scene, count in zip(obstacles, goal_counts.tolist(), strict=True)
                              for _ in range(count))  # fmt: skip
    return IKJob(
        targets,
        warm_start,
        options,
        request.return_gradient,
        timeout,
        weights,
        posture,
        obstacles=obstacles,
        num_solutions=request.num_solutions,
        objective=request.objective,
        goal_counts=goal_counts,
        terms=terms,
    )


def _places(request: IKRequest) -> list[tuple[int, ...]]:
    """Where each pose of ``request`` is: ``(i,)`` in its targets, or ``(row, j)`` in its goals."""
    if request.goals is None:
        return [(i,) for i in range(request.rows)]
    return [(row, j) for row, goals in enumerate(request.goals) for j in range(len(goals))]


def obstacle_shapes(given: Sequence[ObstacleInput], field: tuple[str | int, ...]) -> tuple[Obstacle, ...]:
    """The library's obstacles of validated ``given`` ones (``field``: where they are in the body): each run of one
    type one batched shape, in order (a shape's index in its scene stays its index in ``given``; one batch is built
    far faster than as many shapes).

    Raises:
        FieldError: more than :data:`ik_layer.MAX_OBSTACLES` in all.
    """
    try:
        return check_obstacles([type(run[0]).shapes(cast("Any", run)) for run in _runs(given)])  # one type a run
    except IKLayerError as err:
        raise FieldError(field, str(err)) from None


def _runs(given: Sequence[ObstacleInput]) -> list[list[ObstacleInput]]:
    """``given`` cut into runs of consecutive entries of one type."""
    return [list(run) for _, run in itertools.groupby(given, key=type)]


_NO_OBSTACLES: Scenes = check_scenes([], 1)  # what a request without obstacles or a scene gets


def _obstacles(robot: Robot, request: IKRequest, scenes: Mapping[str, tuple[Obstacle, ...]]) -> Scenes:
    """The named scene's obstacles, then the request's own (one list for every target, or one per target), checked
    in number (the robot's collision model takes them in :func:`prepare`)."""
    if request.scene is None and not request.obstacles:  # most requests: the checks' answer, without their cost
        return _NO_OBSTACLES
    shared: tuple[Obstacle, ...] = ()
    if request.scene is not None:
        if request.scene not in scenes:
            known = f"registered: {_names(sorted(scenes))}" if scenes else "none is registered"
            raise FieldError(("body", "scene"), f"{robot.name} has no scene {request.scene!r}; {known}")
        shared = scenes[request.scene]
    given = request.obstacles or []
    field: tuple[str | int, ...] = ("body", "obstacles")
    if given and isinstance(given[0], list):  # one list per target (as many as targets: the schema checked)
        own = [obstacle_shapes(entry, (*field, k)) for k, entry in enumerate(given)]
        obstacles: list[tuple[Obstacle, ...]] = [shared + entry for entry in own]
    else:
        obstacles = [shared + obstacle_shapes(given, field)]
    try:
        return check_scenes(obstacles, request.rows)  # the robot's collision model: by the problem (prepare)
    except IKLayerError as err:
        raise FieldError(field, str(err)) from None


def fk_configurations(robot: Robot, request: FKRequest, settings: Settings) -> Tensor:
    """The (n, nq) configurations of an FK request.

    Raises:
        TooManyRows: more configurations than ``settings.max_targets``.
        FieldError: a configuration of the wrong length, or a floating base's zero quaternion.
    """
    _check_rows("q", len(request.q), settings.max_targets)
    return configurations(robot, request.q, "q")


def prepare(robot: Robot, jobs: Sequence[IKJob]) -> list[Problem[Tensor | np.ndarray]]:
    """The checked problems of ``jobs`` on the robot's device, one per job: every input checked once.

    The targets and weights of all the jobs are checked together (:meth:`Problem.of_targets`: a check costs about as
    much for one row as for hundreds); each job then takes its rows (:meth:`Problem.select`) with its own options
    (built once, at the edge), warm starts, postures and obstacles (:meth:`Problem.with_inputs`).

    Raises:
        NoCollisionSpheres: obstacles or self-collision for a robot served without collision spheres.
        IKLayerError: a target, weight, warm start or posture of some job is invalid.
    """
    device = robot.device
    targets = jobs[0].targets if len(jobs) == 1 else np.concatenate([job.targets for job in jobs])
    weights = None
    if any(job.weights is not None for job in jobs):
        weights = torch.cat([_row_weights(robot, job) for job in jobs]).to(device)
    checked = Problem.of_host_targets(robot, targets, weights)
    problems = []
    start = 0
    for job in jobs:
        rows = checked.select(slice(start, start + job.rows))
        start += job.rows
        try:
            problems.append(
                rows.with_inputs(
                    robot,
                    job.options,
                    warm_start=None if job.warm_start is None else job.warm_start.to(device),
                    posture=None if job.posture is None else job.posture.to(device),
                    obstacles=job.obstacles,
                    terms={name: _to(term, device) for name, term in job.terms.items()},
                )
            )
        except NoCollisionModel:  # the library's message names load_robot(), which an HTTP caller cannot call
            field = "obstacles" if any(job.obstacles) else "self_collision"
            raise NoCollisionSpheres(("body", field), robot.name) from None
    return problems


def _row_weights(robot: Robot, job: IKJob) -> Tensor:
    """(rows, 6) or (rows, F, 6) weights of ``job``'s targets (ones when it gave none)."""
    shape = (job.rows, *robot.target_shape[:-2], 6)
    if job.weights is None:
        return torch.ones(shape, dtype=robot.dtype)
    return job.weights.to(robot.dtype).expand(shape)


def _check_rows(field: str, rows: int, limit: int) -> None:
    if rows > limit:
        raise TooManyRows(f"{field} has {rows} entries; this server takes at most {limit} per request", limit)


def pose_targets(
    robot: Robot, targets: Sequence[Pose | dict[str, Pose]], places: Sequence[tuple[int, ...]]
) -> np.ndarray:
    """(n, 7) poses of a one-frame robot's targets, (n, F, 7) of a robot with F frames (in ``robot.target_shape``),
    in the robot's dtype on the host; ``places``: where each is in the body (:func:`_places`)."""
    frames = frames_of(robot)
    values: list[float] = []  # every pose's 7 after one another (numpy makes a flat list far faster than nested)
    for target, place in zip(targets, places, strict=True):
        if isinstance(target, Pose) and len(frames) == 1:
            values += target.position
            values += target.orientation
            continue
        field = "targets" if len(place) == 1 else "goals"
        loc: tuple[str | int, ...] = ("body", field, *place)
        name = field + "".join(f"[{k}]" for k in place)
        if isinstance(target, Pose):
            raise FieldError(
                loc,
                f"{name} is one pose but {robot.name} has {len(frames)} end-effector frames: give an object mapping "
                f"each of {_names(frames)} to its pose",
            )
        _check_frames(robot, frames, target, name, loc, every=True)
        for frame in frames:
            values += target[frame].position
            values += target[frame].orientation
    poses = np.array(values, dtype=NUMPY_DTYPES[robot.dtype])  # the JSON's doubles, rounded once
    return poses.reshape(len(targets), *robot.target_shape[:-2], 7)


def _to(term: TermInput, device: torch.device) -> TermInput:
    """``term`` with its data on ``device``."""
    return term if term.data is None else replace(term, data=term.data.to(device))


def _terms(robot: Robot, request: IKRequest) -> dict[str, TermInput]:
    """The request's added terms: each one's gain and data (rows, D), one row given for all repeated."""
    terms = {}
    for name, term in (request.terms or {}).items():
        try:
            data = None if term.data is None else torch.tensor(term.data, dtype=robot.dtype)
        except ValueError:
            raise FieldError(("body", "terms", name, "data"), "every row of data must have the same length") from None
        terms[name] = TermInput(term.gain, None if data is None else data.expand(request.rows, -1))
    return terms


def _posture(robot: Robot, posture: list[float] | list[list[float]], rows: int) -> Tensor:
    """(rows, nq) postures: one per target, or one configuration repeated for every target."""
    if isinstance(posture[0], list):
        return configurations(robot, posture, "posture")
    return configurations(robot, [posture], "posture", one=True).expand(rows, robot.nq)


def error_weights(robot: Robot, weights: list[float] | dict[str, list[float]]) -> Tensor:
    """(6,) weights for every frame, or (F, 6) from an object frame -> 6 numbers (frames left out: ones)."""
    if isinstance(weights, list):
        return torch.tensor(weights, dtype=robot.dtype)
    frames = frames_of(robot)
    _check_frames(robot, frames, weights, "weights", ("body", "weights"), every=False)
    rows = torch.tensor([weights.get(frame, [1.0] * 6) for frame in frames], dtype=robot.dtype)
    return rows.reshape(*robot.target_shape[:-2], 6)


def _check_frames(
    robot: Robot,
    frames: tuple[str, ...],
    given: Mapping[str, object],
    field: str,
    loc: tuple[str | int, ...],
    every: bool,
) -> None:
    """Refuse frame names that are not the robot's, and (``every``) frames left out, naming them."""
    unknown = [name for name in given if name not in frames]
    missing = [name for name in frames if name not in given] if every else []
    if unknown or missing:
        problems = ([f"unknown frame(s) {_names(unknown)}"] if unknown else []) + (
            [f"no pose for {_names(missing)}"] if missing else []
        )
        raise FieldError(loc, f"{field} has {' and '.join(problems)}; {robot.name}'s frames are {_names(frames)}")


def _names(names: Sequence[str], most: int = 8) -> str:
    shown = ", ".join(repr(name[:64]) for name in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def configurations(robot: Robot, rows: list[list[float]], field: str, one: bool = False) -> Tensor:
    """(n, nq) tensor of ``rows``, each checked to hold ``robot.nq`` values (and a non-zero base quaternion);
    ``one``: ``rows`` holds the field's one configuration (named ``field``, not ``field[0]``)."""
    joints = len(robot.joint_names)
    base = robot.nq - joints  # a floating base's pose [x, y, z, qx, qy, qz, qw] first, else none
    size = f"{robot.nq} values ({base} base + {joints} joints)" if robot.floating_base else f"{robot.nq} joints"
    for i, row in enumerate(rows):
        loc, name = (("body", field), field) if one else (("body", field, i), f"{field}[{i}]")
        if len(row) != robot.nq:
            raise FieldError(loc, f"{name} has {len(row)} values but {robot.name} has {size}")
        if robot.floating_base and sum(x * x for x in row[3:base]) <= MIN_QUATERNION_NORM**2:
            raise FieldError(
                loc, f"{name} has a zero base quaternion (values 3:7, [qx, qy, qz, qw]); it must be non-zero"
            )
    return torch.tensor(rows, dtype=robot.dtype)
