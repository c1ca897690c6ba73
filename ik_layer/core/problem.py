"""One IK problem, checked once: :class:`Problem`, the validated inputs that every solver takes.

:meth:`Problem.prepare` checks every argument of :func:`ik_layer.solve` (an :class:`~ik_layer.IKLayerError`
naming the argument) and flattens the per-target ones to ``n`` rows; the engine, the reference solver and the
server take the result as it is.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, cast

import numpy as np
import torch
from torch import Tensor
from typing_extensions import TypeVar  # a TypeVar with a default (typing's from Python 3.13)

from ik_layer.collision.shapes import Obstacle, Scenes, check_scenes
from ik_layer.core.options import SolveOptions
from ik_layer.exceptions import IKLayerError, NoCollisionModel, NonFiniteError, ShapeError
from ik_layer.model.host import is_one_unit_pose
from ik_layer.model.host import pose_to_matrix as host_pose_to_matrix
from ik_layer.model.lie import host_values
from ik_layer.model.robot import NUMPY_DTYPES, Robot
from ik_layer.terms import BUILT_IN, TermInput, term_named

__all__ = ["MAX_TARGET_DISTANCE", "Problem", "check_collision"]

MAX_TARGET_DISTANCE = 1e6  # [m] targets farther from the base are refused: their squared errors overflow
_ONE_FRAME = (4, 4)  # the target shape of a one-frame robot
_ONE_TARGET_WEIGHTS: dict[tuple[torch.dtype, torch.device, tuple[int, ...]], Tensor] = {}  # by dtype, device, shape
_ONE_HOST_WEIGHTS = {dtype: np.ones((1, 6), dtype=NUMPY_DTYPES[dtype]) for dtype in NUMPY_DTYPES}  # likewise, host
_DEFAULTS = SolveOptions()  # of a problem's targets alone (Problem.of_targets)


RowsT = TypeVar("RowsT", bound=Tensor | np.ndarray, default=Tensor, covariant=True)
"""The kind of a :class:`Problem`'s targets and weights: tensors (``Problem``), as every solver takes them; a host
problem (``Problem[Tensor | np.ndarray]``, the server's: :meth:`Problem.of_host_targets`) may hold numpy
arrays, which the engine's solve alone reads as they are and :meth:`Problem.on_device` makes tensors."""


@dataclass(frozen=True, kw_only=True)
class Problem(Generic[RowsT]):
    """The validated inputs of one solve, flattened to ``n`` rows (the targets' batch shape kept apart).

    Build one with :meth:`prepare`, which checks them; the fields are taken as they are, and never written: they may
    be views of the caller's tensors, and one target's default weights are a row of ones shared by every problem.

    Attributes:
        batch: the targets' batch shape ``(...)``.
        target: (n, [F,] 4, 4) ``T_base_ee`` targets, F end-effector frames.
        weights: (n, [F,] 6) non-negative error weights, at least one non-zero per target (default ones).
        warm_start: (n, nq) first seeds, or None.
        posture: (n, nq) preferred configurations, or None.
        posture_seeds: whether the posture is also a first seed (after the warm start); else it only pulls.
        nearest_start: whether a target with no given first seed begins at its robot's seed table's configuration
            nearest its target (:mod:`ik_layer.core.seeding`; not with a floating base or a collision term); else
            all its seeds start at random.
        obstacles: the obstacles the targets' answers keep clear of (in the base frame): one scene shared by every
            target, or one scene per target (see :func:`~ik_layer.collision.shapes.check_scenes`).
        options: the resolved solver options.
        goals: G where the targets' last batch dimension holds each row's G candidate poses (a goal set: ``batch``
            is (..., G), every goal a target of its own, with its row's warm start, posture and scene), else 0.
        terms: the registered terms (:func:`~ik_layer.terms.register_term`) the solve adds, by name: their gain
            (> 0) and per-target data (n, D).
    """

    batch: torch.Size
    target: RowsT
    weights: RowsT
    warm_start: Tensor | None = None
    posture: Tensor | None = None
    posture_seeds: bool = True
    nearest_start: bool = True
    obstacles: Scenes = ((),)
    options: SolveOptions
    goals: int = 0
    terms: Mapping[str, TermInput] = field(default_factory=dict)

    @staticmethod
    def prepare(
        robot: Robot,
        target: Tensor,
        options: SolveOptions | None = None,
        *,
        warm_start: Tensor | None = None,
        weights: Tensor | None = None,
        posture: Tensor | None = None,
        obstacles: Sequence[Obstacle] | Sequence[Sequence[Obstacle]] = (),
        goal_set: bool = False,
        terms: Mapping[str, Any] | None = None,
        **option_changes: Any,
    ) -> Problem:
        """Check the arguments of :func:`ik_layer.solve` (same names and meaning) and flatten the per-target ones.

        ``options`` without ``option_changes`` is taken as it is (a :class:`SolveOptions` checked its fields).

        Raises:
            IKLayerError: an argument is invalid; the message names it.
        """
        if option_changes or not isinstance(options, SolveOptions):
            options = SolveOptions.build(options, **option_changes)
        targets = Problem.of_targets(robot, target, weights, options)
        goals = 0
        if goal_set is not False:
            goals = _goal_count(robot, goal_set, target.shape, targets.batch)
            warm_start = _per_goal(warm_start, targets.batch, "warm_start")
            posture = _per_goal(posture, targets.batch, "posture")
            terms = _terms_per_goal(terms, targets.batch)
            if obstacles and isinstance(obstacles[0], (list, tuple)) and len(obstacles) > 1:
                rows = cast("Sequence[Sequence[Obstacle]]", obstacles)
                obstacles = [scene for scene in rows for _ in range(goals)]  # a row's scene for each goal
        problem = targets.with_inputs(
            robot, options, warm_start=warm_start, posture=posture, obstacles=obstacles, terms=terms
        )
        return replace(problem, goals=goals) if goals else problem

    @staticmethod
    def of_targets(
        robot: Robot, target: Tensor, weights: Tensor | None = None, options: SolveOptions = _DEFAULTS
    ) -> Problem:
        """The first half of :meth:`prepare`: ``target`` and ``weights`` checked and flattened, with ``options``
        (taken as they are) and nothing else; :meth:`with_inputs` checks the rest (a caller may check the targets of
        several problems at once, then each problem's own inputs).

        Raises:
            IKLayerError: an argument is invalid; the message names it.
        """
        _check_robot(robot)
        target_t = robot.check_target(target)
        values = host_values(target_t)
        if math.prod(values.shape):
            _check_distance(float(_largest_abs(values[..., :3, 3])))
        shape = robot.target_shape
        batch = target_t.shape[: target_t.dim() - len(shape)]
        if isinstance(values, np.ndarray) and not target_t.requires_grad:  # host targets: no torch operator
            flat = torch.from_numpy(values.reshape(-1, *shape))
        else:
            flat = target_t.reshape(-1, *shape)
        n = math.prod(batch)
        return Problem(batch=batch, target=flat, weights=_weights(robot, weights, batch, n), options=options)

    @staticmethod
    def of_host_targets(
        robot: Robot, poses: np.ndarray, weights: Tensor | None = None, options: SolveOptions = _DEFAULTS
    ) -> Problem[Tensor | np.ndarray]:
        """:meth:`of_targets` of ``poses`` (..., [F,] 7), a numpy array of the robot's dtype (the server's): one pose
        of a one-frame CPU robot is checked and made a transform in plain floats and stays a host array, with host
        weights unless given (no torch call on its way to the engine's slots); other poses are checked as a tensor
        on the robot's device.

        Raises:
            IKLayerError: an argument is invalid; the message names it.
        """
        _check_robot(robot)
        one = _one_host_target(robot, poses)
        if one is None:
            return Problem.of_targets(robot, torch.from_numpy(poses).to(robot.device), weights, options)
        batch = torch.Size(poses.shape[:-1])
        ones = _ONE_HOST_WEIGHTS[robot.dtype] if weights is None else _weights(robot, weights, batch, 1)
        return Problem(batch=batch, target=one, weights=ones, options=options)

    def with_inputs(
        self: Problem[RowsT],
        robot: Robot,
        options: SolveOptions,
        *,
        warm_start: Tensor | None = None,
        posture: Tensor | None = None,
        obstacles: Sequence[Obstacle] | Sequence[Sequence[Obstacle]] = (),
        terms: Mapping[str, Any] | None = None,
    ) -> Problem[RowsT]:
        """The second half of :meth:`prepare`: this problem's targets (:meth:`of_targets`) with ``options`` (taken as
        they are), ``warm_start`` and ``posture`` ((nq,) or broadcasting to the targets' batch (..., nq)),
        ``obstacles`` and added ``terms``, checked against ``robot``.

        Raises:
            IKLayerError: an argument is invalid; the message names it.
        """
        _check_terms(robot, options)
        plain = warm_start is None and posture is None and not obstacles and not terms
        scenes = self.obstacles if plain else check_scenes(obstacles, self.rows)
        check_collision(robot, options, scenes)
        if plain and options is self.options:
            return self  # (targets and options alone: nothing to add)
        return replace(
            self,
            options=options,
            obstacles=scenes,
            warm_start=_per_target(robot, warm_start, self.batch, self.rows, "warm_start"),
            posture=_per_target(robot, posture, self.batch, self.rows, "posture"),
            terms=_given_terms(robot, terms, self.batch, self.rows),
        )

    @functools.cached_property
    def rows(self) -> int:
        """Number of targets ``n``."""
        return self.target.shape[0]

    def select(self: Problem[RowsT], rows: slice) -> Problem[RowsT]:
        """The targets ``rows`` (consecutive) as a problem of their own, flat (this problem itself where it is flat
        and ``rows`` are all of them)."""
        if len(self.batch) == 1 and range(self.rows)[rows] == range(self.rows):
            return self
        part = cast("RowsT", self.target[rows])  # (a numpy slice of a host problem's, else a tensor's)
        return replace(
            self,
            batch=torch.Size([part.shape[0]]),
            target=part,
            weights=cast("RowsT", self.weights[rows]),
            warm_start=None if self.warm_start is None else self.warm_start[rows],
            posture=None if self.posture is None else self.posture[rows],
            obstacles=self.obstacles if len(self.obstacles) == 1 else self.obstacles[rows],
            terms=self.terms_of(rows),
        )

    def on_device(self, robot: Robot) -> Problem:
        """This problem with its targets and weights as tensors on ``robot``'s device (itself where they are)."""
        target, weights = self.target, self.weights
        if isinstance(target, Tensor) and isinstance(weights, Tensor):
            return cast("Problem", self)
        return replace(cast("Problem", self), target=_tensor(target, robot), weights=_tensor(weights, robot))

    def terms_of(self, rows: slice | Tensor) -> dict[str, TermInput]:
        """The added terms of the targets ``rows``: their data's rows."""
        return {name: replace(term, data=None if term.data is None else term.data[rows])
                for name, term in self.terms.items()}  # fmt: skip


def _check_terms(robot: Robot, options: SolveOptions) -> None:
    """Refuse a secondary term that does not apply to ``robot``."""
    if options.manipulability and not robot.chains.serial_arm:
        raise IKLayerError(
            "manipulability applies to serial arms only: one end-effector frame on a fixed base, at least 6 joints, "
            "each an entry of the chain (no mimic joint)"
        )


def check_collision(robot: Robot, options: SolveOptions, scenes: Scenes) -> None:
    """Refuse obstacles or self-collision for a robot without collision spheres (:class:`NoCollisionModel`), and
    self-collision for one with too many sphere pairs."""
    if (any(scenes) or options.self_collision) and robot.collision is None:
        raise NoCollisionModel(
            f"robot {robot.name!r} has no collision spheres: load it with load_robot(..., collision=...) (a sphere "
            "file, or 'auto' for a built-in robot or a URDF with collision primitives) to solve with obstacles or "
            "self_collision"
        )
    if options.self_collision and robot.collision is not None:
        robot.collision.check_self_collision()


def _given_terms(robot: Robot, terms: object, batch: torch.Size, n: int) -> dict[str, TermInput]:
    """The added ``terms`` (name: gain, (gain, data) or a :class:`TermInput`) checked, their data broadcast to the
    targets' batch and flattened to (n, D); the terms of gain 0 left out."""
    if terms is None:
        return {}
    if not isinstance(terms, Mapping):
        raise IKLayerError(f"terms must map a registered term's name to its gain or (gain, data), got {terms!r}")
    checked = {}
    for name, given in terms.items():
        term = term_named(name)
        if term in BUILT_IN:
            how = "posture=..." if name == "posture" else f"the option {name}=gain"
            raise IKLayerError(f"terms: {name!r} is a built-in term with an argument of its own: give {how}")
        gain, data = (given.gain, given.data) if isinstance(given, TermInput) else _gain_and_data(name, given)
        if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not np.isfinite(gain) or gain < 0:
            raise IKLayerError(f"terms: {name!r}'s gain must be a finite number >= 0, got {gain!r}")
        size = term.data_size(robot.chains.layout)
        if (data is None) != (size == 0):
            need = f"data of {size} reals per target" if size else "no data"
            raise IKLayerError(f"terms: {name!r} takes {need}")
        if gain == 0:
            continue
        rows = None if data is None else _term_rows(robot, name, data, size, batch, n)
        if rows is not None:
            term.check_data(robot, rows)
        checked[name] = TermInput(float(gain), rows)
    return checked


def _gain_and_data(name: str, given: object) -> tuple[object, object]:
    """A term's gain and data from what a caller gave: a gain, or (gain, data)."""
    if isinstance(given, tuple):
        if len(given) != 2:
            raise IKLayerError(f"terms: {name!r} must be a gain or (gain, data), got a tuple of {len(given)}")
        return given
    return given, None


def _term_rows(robot: Robot, name: str, data: object, size: int, batch: torch.Size, n: int) -> Tensor:
    """A term's data (size,) or broadcasting to ``batch`` (..., size), as (n, size) rows of the robot's dtype."""
    try:
        x = torch.as_tensor(data, dtype=robot.dtype, device=robot.device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise IKLayerError(f"terms: {name!r}'s data must be an array of reals") from err
    if x.dim() < 1 or x.shape[-1] != size:
        raise ShapeError(f"terms: {name!r}'s data must have shape ({size},) or (..., {size}), got {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise NonFiniteError(f"terms: {name!r}'s data must be finite")
    try:
        return x.expand(*batch, size).reshape(n, size)
    except RuntimeError as err:
        raise ShapeError(
            f"terms: {name!r}'s data of shape {tuple(x.shape)} does not broadcast to the targets' batch {tuple(batch)}"
        ) from err


def _terms_per_goal(terms: Mapping[str, Any] | None, batch: torch.Size) -> Mapping[str, Any] | None:
    """A goal set's added terms, each one's per-row data repeated for each of the row's goals."""
    if not isinstance(terms, Mapping):
        return terms
    spread = {}
    for name, given in terms.items():
        gain, data = (given.gain, given.data) if isinstance(given, TermInput) else _gain_and_data(name, given)
        spread[name] = (gain, _per_goal(data, batch, f"terms: {name!r}'s data")) if isinstance(data, Tensor) else given
    return spread


def _goal_count(robot: Robot, goal_set: object, shape: torch.Size, batch: torch.Size) -> int:
    """G, the goals per row of goal-set targets of ``shape`` (batch shape ``batch``, its last dimension G)."""
    if goal_set is not True:
        raise IKLayerError(f"goal_set must be True or False, got {goal_set!r}")
    if len(batch) == 0 or batch[-1] == 0:
        raise IKLayerError(
            f"goal_set needs targets (..., G, {', '.join(map(str, robot.target_shape))}) with G >= 1 goals per row, "
            f"got shape {tuple(shape)}"
        )
    return batch[-1]


def _per_goal(x: Tensor | None, batch: torch.Size, name: str) -> Tensor | None:
    """A goal set's per-row ``x`` (rows..., nq) repeated for each of the row's goals ((nq,): shared, as it is)."""
    if not isinstance(x, Tensor) or x.dim() < 2:
        return x
    rows = batch[:-1]
    if tuple(x.shape[:-1]) != tuple(rows):
        raise IKLayerError(f"{name} must have shape (nq,) or {(*rows, 'nq')} (one per row), got {tuple(x.shape)}")
    return x.unsqueeze(-2).expand(*batch, x.shape[-1])


def _weights(robot: Robot, weights: Tensor | None, batch: torch.Size, n: int) -> Tensor:
    shape = (*robot.target_shape[:-2], 6)  # (6,), or (F, 6) with F end-effector frames
    if weights is None:
        if n == 1:  # one target's: made once (a lone solve's costliest tensor) and shared (fields are never written)
            key = (robot.dtype, robot.device, shape)
            ones = _ONE_TARGET_WEIGHTS.get(key)
            if ones is None:
                ones = _ONE_TARGET_WEIGHTS[key] = torch.ones((), dtype=robot.dtype, device=robot.device).expand(
                    1, *shape
                )
            return ones
        return torch.ones(n, *shape, dtype=robot.dtype, device=robot.device)
    w = torch.as_tensor(weights, dtype=robot.dtype, device=robot.device)
    if w.dim() < 1 or w.shape[-1] != 6:
        raise ShapeError(f"weights must have shape (6,) or (..., {', '.join(map(str, shape))}), got {tuple(w.shape)}")
    if not torch.isfinite(w).all() or bool((w < 0).any()):
        raise NonFiniteError("weights must be finite and non-negative")
    try:
        w = w.expand(*batch, *shape).reshape(n, *shape)
    except RuntimeError as err:
        raise ShapeError(
            f"weights of shape {tuple(w.shape)} do not broadcast to the targets' batch {tuple(batch)}"
        ) from err
    if bool((w.sum(-1) == 0).any()):
        raise IKLayerError("weights must have at least one non-zero entry per target")
    return w


def _per_target(robot: Robot, x: Tensor | None, batch: torch.Size, n: int, name: str) -> Tensor | None:
    if x is None:
        return None
    robot.check_q(x, name)
    try:
        return x.expand(*batch, robot.nq).reshape(n, robot.nq)
    except RuntimeError as err:
        raise ShapeError(
            f"{name} of shape {tuple(x.shape)} does not broadcast to the targets' batch {tuple(batch)}"
        ) from err


def _check_robot(robot: object) -> None:
    if not isinstance(robot, Robot):
        raise IKLayerError(f"robot must be an ik_layer.Robot (see load_robot), got {type(robot).__name__}")


def _tensor(x: Tensor | np.ndarray, robot: Robot) -> Tensor:
    """``x`` as a tensor on ``robot``'s device."""
    return torch.from_numpy(x).to(robot.device) if isinstance(x, np.ndarray) else x


def _one_host_target(robot: Robot, pose: np.ndarray) -> np.ndarray | None:
    """(1, 4, 4) the transform of host ``pose``, one pose (7 values, of any batch shape) of a one-frame CPU robot's
    dtype whose checks pass, made in plain floats (what :func:`~ik_layer.model.lie.as_transform` does with such a
    tensor); None for any other (the tensor checks take it, and explain a refusal)."""
    if robot.device.type != "cpu" or robot.target_shape != _ONE_FRAME or not is_one_unit_pose(pose):
        return None
    if pose.dtype != NUMPY_DTYPES[robot.dtype]:
        return None
    matrix = host_pose_to_matrix(pose.reshape(7), "target")
    _check_distance(float(_largest_abs(matrix[:3, 3])))
    return matrix.reshape(1, 4, 4)


def _check_distance(largest: float) -> None:
    """Refuse targets whose ``largest`` position coordinate [m] lies beyond :data:`MAX_TARGET_DISTANCE`."""
    if largest > MAX_TARGET_DISTANCE:
        raise IKLayerError(f"target positions must lie within {MAX_TARGET_DISTANCE:g} m of the base")


def _largest_abs(x: Tensor | np.ndarray) -> Tensor | np.ndarray | float:
    """The largest magnitude in ``x`` (a 0-d tensor or numpy value, of ``x``'s kind; a float for a few finite host
    values, without the arrays' per-call costs)."""
    if isinstance(x, np.ndarray):
        return max(map(abs, x.ravel().tolist())) if 0 < x.size <= 16 else np.abs(x).max()
    return x.abs().max()
