"""The solver engine: a fused Levenberg-Marquardt kernel (warp) over fixed-shape slots, on the CPU and CUDA.

* :func:`~ik_layer.engine.kernel.lm_block_kernel`: the kernel; one launch advances every RUNNING
  slot by up to ``block`` iterations, the same math as the eager solver (:mod:`ik_layer.solver`);
  its joint sines and cosines come from :mod:`ik_layer.engine.trig`.
* :class:`~ik_layer.engine.slots.Slots`: the per-row state in torch tensors shared with warp, and the host-side
  writes and reads of it, the same for every store.
* :mod:`~ik_layer.engine.store`: how the host reaches that memory, chosen once per engine: numpy views
  (:class:`~ik_layer.engine.store.HostStore`, the CPU's default) or torch indexing
  (:class:`~ik_layer.engine.store.TensorStore`, any device).
* :class:`~ik_layer.engine.launch.BlockLauncher`: the recorded launch over one set of slots.
* :class:`~ik_layer.engine.scheduler.Engine`: a slot pool and its scheduler (submit, step, cancel, deadlines).
* :func:`solve_with_kernel`: the engine's first client: admit every target, run until all retired.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ik_layer.engine.kernel import EMPTY, EXHAUSTED, RUNNING, SOLVED, lm_block_kernel
from ik_layer.engine.launch import BlockLauncher
from ik_layer.engine.scheduler import CANCELLED, DEADLINE, ROW_STATUS, Engine, Request
from ik_layer.engine.slots import Slots
from ik_layer.engine.store import STORES, HostStore, TensorStore, open_store
from ik_layer.exceptions import IKLayerError
from ik_layer.kinematics import Robot
from ik_layer.options import SolveOptions
from ik_layer.solver import IKResult, Problem

__all__ = [
    "CANCELLED",
    "DEADLINE",
    "EMPTY",
    "EXHAUSTED",
    "ROW_STATUS",
    "RUNNING",
    "SOLVED",
    "STORES",
    "BlockLauncher",
    "Engine",
    "HostStore",
    "Request",
    "Slots",
    "TensorStore",
    "lm_block_kernel",
    "open_store",
    "solve_problem",
    "submit_problem",
    "solve_with_kernel",
]


def submit_problem(
    engine: Engine, problem: Problem, seed: int, rows: slice = slice(None), deadline: float | None = None
) -> Request:
    """Queue the targets ``rows`` of a checked :class:`~ik_layer.solver.Problem` on ``engine`` (any thread).

    A target's first seeds start at its warm start, then its posture (when given), else uniform in the
    limits, drawn on the device by the kernel; every random start and restart comes from ``seed``. Another
    seed starts (up to ``options.num_seeds``) when a target's newest one stalls. ``deadline`` as
    :meth:`Engine.submit`'s.
    """
    given = [x[rows] for x in (problem.warm_start, problem.posture) if x is not None]  # the kernel wraps them
    return engine.submit(
        problem.target[rows],
        torch.stack(given, dim=1) if given else None,  # None: random starts drawn by the kernel
        problem.options,
        weights=problem.weights[rows],
        posture=None if problem.posture is None else problem.posture[rows],
        seed=seed,
        deadline=deadline,
    )


def solve_problem(engine: Engine, problem: Problem, seed: int) -> IKResult:
    """Solve a checked :class:`~ik_layer.solver.Problem` on ``engine``: admit every target (as
    :func:`submit_problem`), run until all retired. The caller owns ``engine`` (one worker at a time)."""
    request = submit_problem(engine, problem, seed)
    engine.run(request)
    return request.result(problem.batch)


def solve_with_kernel(
    robot: Robot,
    target: Tensor,
    options: SolveOptions | None = None,
    *,
    warm_start: Tensor | None = None,
    weights: Tensor | None = None,
    generator_seed: int = 0,
    block: int = 16,
    store: str | None = None,
) -> IKResult:
    """Solve IK for a batch of targets on a fresh :class:`Engine` of ``block`` iterations per launch.

    Arguments as :func:`ik_layer.solve` (no posture); ``generator_seed`` seeds every random start and
    restart (see :func:`solve_problem`); ``store`` as :class:`Engine`'s. One host sync per block.
    """
    if not (isinstance(block, int) and block >= 1):
        raise IKLayerError(f"block must be an int >= 1, got {block!r}")
    problem = Problem.prepare(robot, target, options, warm_start, weights, None, None, {})
    capacity = max(problem.target.shape[0] * problem.options.num_seeds, 1)
    engine = Engine(robot, capacity=capacity, block=block, store=store)
    return solve_problem(engine, problem, generator_seed)
