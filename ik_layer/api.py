"""``ik_layer.solve``: check the inputs once, then run the fused engine or the eager reference path.

The engine (:mod:`ik_layer.engine`: one warp kernel per block of LM iterations over a pool of
slots, more seeds only for targets that stall) is the default. The eager torch solver
(:func:`ik_layer.reference.solve_reference`) is the readable reference the engine is tested against;
``reference=True`` picks it. Both solve every robot the library loads: several end-effector frames,
mimic joints and a floating base included. Only the engine gives up early on targets provably out of
reach (:mod:`ik_layer.engine.reach`: one seed of ``restart_after`` iterations); the eager path spends
the whole budget on them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from ik_layer.collision.shapes import Obstacle
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.core.result import IKResult
from ik_layer.core.solutions import best_goals, check_objective, objective_problem, solve_set
from ik_layer.engine import Engine
from ik_layer.exceptions import IKLayerError
from ik_layer.model.robot import Robot
from ik_layer.reference import solve_reference
from ik_layer.terms import registered_terms

__all__ = ["EngineCache", "check_timeout", "engines", "solve", "solve_problem"]

_MAX_POOL = 1 << 16  # slots of one robot's engine at most; larger solves queue through it
_BLOCK = 32  # iterations per launch (rows join and leave between blocks): fewer steps, less Python per solve


def solve(
    robot: Robot,
    target: Tensor,
    options: SolveOptions | None = None,
    *,
    warm_start: Tensor | None = None,
    weights: Tensor | None = None,
    posture: Tensor | None = None,
    obstacles: Sequence[Obstacle] | Sequence[Sequence[Obstacle]] = (),
    generator: torch.Generator | None = None,
    reference: bool = False,
    engine: Engine | None = None,
    timeout: float | None = None,
    num_solutions: int = 1,
    objective: str = "first",
    goal_set: bool = False,
    terms: Mapping[str, Any] | None = None,
    **option_changes: Any,
) -> IKResult:
    """Solve IK for a batch of end-effector targets.

    Args:
        robot: the robot; its dtype and device are used throughout.
        target: ``T_base_ee`` targets, (..., 4, 4) or poses (..., 7) ``[x, y, z, qx, qy, qz, qw]``;
            with F end-effector frames (``load_robot(..., ee_frames=[...])``) one per frame, (..., F, 4, 4)
            or (..., F, 7).
        options: the solver's options (default: :class:`SolveOptions` defaults).
        warm_start: optional configuration (..., nq) (or (nq,) for all targets), the first seed; ``nq`` is
            ``dof`` except with a floating base (its pose first, 7 values).
        weights: (6,) or (..., 6) non-negative weights of the error ``[x, y, z, rx, ry, rz]``
            ((..., F, 6) per frame with F frames: zero rotation weights make a frame position-only);
            a zero weight drops that axis from the cost and from the reported errors.
        posture: optional preferred configuration (nq,) or (..., nq): pulled towards in the
            Jacobian's null space, used as a seed, and preferred among successful seeds (the joints
            only: with a floating base the base goes where the frames take it).
        obstacles: :class:`~ik_layer.Sphere`, :class:`~ik_layer.Box` and :class:`~ik_layer.Capsule` obstacles in
            the base frame (the world with a floating base) that every answer keeps ``collision_margin`` clear of,
            as it does its own links with ``self_collision=1``; both need the robot's collision spheres
            (``load_robot(..., collision="auto")``). A success is then within the tolerances and collision-free,
            and ``IKResult.min_distance`` gives each answer's least distance. A list of shapes is one scene shared
            by every target; a list of lists, one per target (in the targets' flattened order), gives each target
            its own scene (at most :data:`~ik_layer.MAX_OBSTACLES` shapes each,
            :data:`~ik_layer.MAX_BATCH_OBSTACLES` in all).
        generator: random generator of the seeds, on the robot's device (reproducible results).
        reference: run the eager torch reference path instead of the fused engine.
        engine: the :class:`~ik_layer.engine.Engine` of ``robot`` to solve on (its store, capacity and block
            as built: ``Engine(robot, store="tensor")``), stepped by this call; one thread at a time. Default:
            the robot's engine in :data:`ik_layer.engines`, built at its first solve.
        timeout: the most seconds the solve may take (as TRAC-IK's per-solve timeout; None: its iteration
            budgets alone bound it): targets unsolved then stop with their best configuration so far and
            ``status == ik_layer.DEADLINE``. The clock starts once the inputs are checked and the robot's engine
            has room for the targets (built or grown); the solve and the result's assembly count. The engine
            reads it between launches, which it keeps short under a deadline (:mod:`ik_layer.engine.pace`: a
            few ms of work each on the CPU); the reference path between its progress checks.
        num_solutions: up to this many distinct solutions per target (joint distance at least
            :data:`~ik_layer.core.solutions.SEPARATION`, angles of full-turn joints modulo a turn), found over
            rounds of random starts (:mod:`ik_layer.core.solutions`); above 1 every field gains a dimension of that
            size after the targets' batch: ``q`` (..., k, nq), ``success`` (..., k) (False in a slot without a
            distinct solution).
        objective: how solutions rank, best first: ``"first"`` (as found, the warm start's first), ``"closest"``
            (nearest ``warm_start``, TRAC-IK's Distance), ``"manipulability"`` (TRAC-IK's Manip1) or
            ``"posture"`` (nearest ``posture``); other than ``"first"`` the best of several answers is returned
            even for one solution.
        goal_set: the targets' last batch dimension holds G candidate poses per row, (..., G, [F,] 4, 4): each
            row's answer reaches one of them (cuRobo's goal sets: any of these grasps), the first solved by
            ``objective``, and ``result.goal`` (...) tells which; the result has the rows' shape (...).
            ``warm_start``, ``posture`` and a scene per target are per row; ``weights`` broadcast against
            (..., G). One solution per row.
        terms: secondary cost terms added with :func:`~ik_layer.terms.register_term`, by name: a gain, or
            ``(gain, data)`` for a term that takes per-target data ((D,) or broadcasting to the targets' batch
            (..., D)); pursued in the pose's null space and ranking successes, as ``posture`` and ``centring`` are.
        **option_changes: options to change for this call, by name (``num_seeds=8``), over ``options``.

    Returns:
        An :class:`IKResult`; unreachable targets come back with ``success=False`` (on the engine, those
        provably out of reach after ``restart_after`` iterations of one seed). With several
        frames, success needs every frame within tolerance and the errors are the worst frame's.
    """
    problem = Problem.prepare(
        robot,
        target,
        options,
        warm_start=warm_start,
        weights=weights,
        posture=posture,
        obstacles=obstacles,
        goal_set=goal_set,
        terms=terms,
        **option_changes,
    )
    return solve_problem(
        robot,
        problem,
        generator=generator,
        reference=reference,
        engine=engine,
        timeout=timeout,
        num_solutions=num_solutions,
        objective=objective,
    )


def solve_problem(
    robot: Robot,
    problem: Problem,
    *,
    generator: torch.Generator | None = None,
    reference: bool = False,
    engine: Engine | None = None,
    timeout: float | None = None,
    num_solutions: int = 1,
    objective: str = "first",
) -> IKResult:
    """:func:`solve` of a checked ``problem`` (:meth:`Problem.prepare` of ``robot``), taken as it is; the other
    arguments as :func:`solve`'s.

    Raises:
        IKLayerError: an argument is invalid; the message names it.
    """
    if not isinstance(reference, bool):
        raise IKLayerError(f"reference must be True or False, got {reference!r}")
    if engine is not None and not (isinstance(engine, Engine) and engine.serves(robot)):
        raise IKLayerError(
            f"engine must be an ik_layer.Engine built for this robot on its current device and dtype, got {engine!r}"
        )
    if reference and engine is not None:
        raise IKLayerError("engine and reference=True exclude each other: the reference path runs no engine")
    seconds = None if timeout is None else check_timeout(timeout)
    robot.check_generator(generator)
    if problem.goals and num_solutions != 1:
        raise IKLayerError(f"goal_set gives one answer per row: num_solutions must be 1, got {num_solutions!r}")
    k = check_objective(num_solutions, objective, problem.warm_start, problem.posture)
    if seconds is not None and not reference and engine is None:  # built or grown before the clock starts
        engines.get(robot, problem.rows * problem.options.num_seeds)
    deadline = None if seconds is None else time.monotonic() + seconds

    def run(part: Problem) -> IKResult:
        if reference:
            return solve_reference(robot, part, generator, deadline)
        seed = _draw_seed(robot.device, generator)
        if engine is not None:
            return engine.solve(part, seed, deadline)
        shared, lock = engines.get(robot, part.rows * part.options.num_seeds)
        with lock:
            return shared.solve(part, seed, deadline)

    if problem.goals:
        return _best_of_goals(robot, run(problem), problem, objective)
    if k == 1 and objective == "first":
        return run(problem)
    flat = solve_set(robot, objective_problem(robot, problem, objective), k, objective, run, deadline, generator)
    return flat.reshaped((*problem.batch, k) if k > 1 else problem.batch)


def _draw_seed(device: torch.device, generator: torch.Generator | None) -> int:
    """A seed in [0, 2**31 - 1) for the engine's random starts, from ``generator`` (torch's default one if None):
    one uniform draw into this thread's buffer on ``device`` (no tensor made: on the CPU a lone solve's heaviest
    torch call was its seed's)."""
    buffers: dict[torch.device, Tensor] = _seed_buffers.__dict__.setdefault("by_device", {})
    buffer = buffers.get(device)
    if buffer is None:
        buffer = buffers[device] = torch.empty(1, dtype=torch.float64, device=device)
    return int(buffer.uniform_(generator=generator).tolist()[0] * (2**31 - 1))


_seed_buffers = threading.local()


def _best_of_goals(robot: Robot, every: IKResult, problem: Problem, objective: str) -> IKResult:
    """The answer of each row of a goal-set ``problem`` from the answers of ``every`` goal: its best goal's
    (:func:`~ik_layer.core.solutions.best_goals`), with ``goal`` (rows...) telling which."""
    rows, goals = problem.batch[:-1], problem.goals
    reference = {"closest": problem.warm_start, "posture": problem.posture}.get(objective)
    if reference is not None:
        reference = reference.reshape(-1, goals, robot.nq)
    flat = every.reshaped((math.prod(rows), goals))
    picked, goal = best_goals(robot, flat, objective, reference)
    return replace(picked, goal=goal).reshaped(rows)


def check_timeout(timeout: object) -> float:
    """``timeout`` checked: a positive finite number of seconds."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise IKLayerError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


class EngineCache:
    """The engines :func:`solve` runs on by default: one per robot, the ``max_robots`` most recently used.

    ``ik_layer.engines`` is the one instance. ``len(engines)`` and ``robot in engines`` show what it holds; an
    engine holds its robot, so :meth:`drop` (one robot) or :meth:`clear` frees both (the next solve builds anew).
    """

    def __init__(self, max_robots: int = 8) -> None:
        self.max_robots = max_robots
        self._held: OrderedDict[int, tuple[Engine, threading.Lock]] = OrderedDict()  # by id(robot), oldest first
        self._lock = threading.Lock()

    def get(self, robot: Robot, rows: int) -> tuple[Engine, threading.Lock]:
        """The engine of ``robot`` with room for ``rows`` seeds (up to a pool of 65,536; larger solves queue
        through it), and the lock its users take: rebuilt when the robot moved, a term was registered or removed,
        or a larger pool is needed."""
        capacity = min(max(rows, 1), _MAX_POOL)
        with self._lock:
            held = self._held.get(id(robot))
            if held is not None and held[0].robot is robot:
                self._held.move_to_end(id(robot))
                engine = held[0]
                moved = not engine.serves(robot) or engine.slots.terms != registered_terms()  # (a term added)
                if not moved and engine.slots.capacity >= capacity:
                    return held
                capacity = max(capacity, 0 if moved else engine.slots.capacity)
            held = self._held[id(robot)] = (Engine(robot, capacity=capacity, block=_BLOCK), threading.Lock())
            self._held.move_to_end(id(robot))
            while len(self._held) > self.max_robots:
                self._held.popitem(last=False)
            return held

    def drop(self, robot: Robot) -> None:
        """Free ``robot``'s engine, if any."""
        with self._lock:
            held = self._held.get(id(robot))
            if held is not None and held[0].robot is robot:
                del self._held[id(robot)]

    def clear(self) -> None:
        """Free every engine."""
        with self._lock:
            self._held.clear()

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, robot: object) -> bool:
        held = self._held.get(id(robot))
        return held is not None and held[0].robot is robot


engines = EngineCache()
"""The default engines of :func:`solve`, one per robot (see :class:`EngineCache`)."""
