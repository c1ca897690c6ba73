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

import threading
from typing import Any

import torch
from torch import Tensor

from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.core.result import IKResult
from ik_layer.engine import Engine
from ik_layer.exceptions import IKLayerError
from ik_layer.model.robot import Robot
from ik_layer.reference import solve_reference

__all__ = ["solve"]

_MAX_POOL = 1 << 16  # slots of one robot's engine at most; larger solves queue through it
_BLOCK = 32  # iterations per launch (rows join and leave between blocks): fewer steps, less Python per solve

_ENGINE = "_solve_engine"  # the robot's attribute holding its (engine, lock): they live and die together
_engines_lock = threading.Lock()


def solve(
    robot: Robot,
    target: Tensor,
    options: SolveOptions | None = None,
    *,
    warm_start: Tensor | None = None,
    weights: Tensor | None = None,
    posture: Tensor | None = None,
    generator: torch.Generator | None = None,
    reference: bool = False,
    engine: Engine | None = None,
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
        generator: random generator of the seeds, on the robot's device (reproducible results).
        reference: run the eager torch reference path instead of the fused engine.
        engine: the :class:`~ik_layer.engine.Engine` of ``robot`` to solve on (its store, capacity and block
            as built: ``Engine(robot, store="tensor")``), stepped by this call; one thread at a time. Default:
            the robot's own engine, built at the first call.
        **option_changes: options to change for this call, by name (``num_seeds=8``), over ``options``.

    Returns:
        An :class:`IKResult`; unreachable targets come back with ``success=False`` (on the engine, those
        provably out of reach after ``restart_after`` iterations of one seed). With several
        frames, success needs every frame within tolerance and the errors are the worst frame's.
    """
    if not isinstance(reference, bool):
        raise IKLayerError(f"reference must be True or False, got {reference!r}")
    if engine is not None and not (isinstance(engine, Engine) and engine.serves(robot)):
        raise IKLayerError(
            f"engine must be an ik_layer.Engine built for this robot on its current device and dtype, got {engine!r}"
        )
    if reference and engine is not None:
        raise IKLayerError("engine and reference=True exclude each other: the reference path runs no engine")
    problem = Problem.prepare(
        robot, target, options, warm_start=warm_start, weights=weights, posture=posture, **option_changes
    )
    robot.check_generator(generator)
    if reference:
        return solve_reference(robot, problem, generator)
    draw = {"generator": generator} if generator is not None else {}
    seed = int(torch.randint(0, 2**31 - 1, (1,), device=robot.device, **draw))
    if engine is not None:
        return engine.solve(problem, seed)
    shared, lock = _engine_for(robot, problem.rows * problem.options.num_seeds)
    with lock:
        return shared.solve(problem, seed)


def _engine_for(robot: Robot, rows: int) -> tuple[Engine, threading.Lock]:
    """The robot's engine (one per robot, rebuilt when the robot moved or a larger pool is needed) and its lock."""
    capacity = min(max(rows, 1), _MAX_POOL)
    with _engines_lock:
        held = robot.__dict__.get(_ENGINE)
        if held is not None:
            engine = held[0]
            moved = not engine.serves(robot)
            if not moved and engine.slots.capacity >= capacity:
                return held
            capacity = max(capacity, 0 if moved else engine.slots.capacity)
        held = (Engine(robot, capacity=capacity, block=_BLOCK), threading.Lock())
        robot.__dict__[_ENGINE] = held
        return held
