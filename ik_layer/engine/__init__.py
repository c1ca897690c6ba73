"""The solver engine: a fused Levenberg-Marquardt kernel (warp) over fixed-shape slots, on the CPU and CUDA.

* :func:`~ik_layer.engine.kernel.lm_block_kernel`: the kernel; one launch advances every RUNNING
  slot by up to ``block`` iterations, the same math as the eager solver (:mod:`ik_layer.solver`).
* :class:`~ik_layer.engine.slots.Slots`: the per-row state in torch tensors shared with warp.
* :class:`~ik_layer.engine.kernel.BlockLauncher`: the recorded launch over one set of slots.
* :class:`~ik_layer.engine.scheduler.Engine`: a slot pool and its scheduler (submit, step, cancel, deadlines).
* :func:`solve_with_kernel`: the engine's first client: admit every target, run until all retired.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ik_layer.engine.kernel import EMPTY, EXHAUSTED, RUNNING, SOLVED, BlockLauncher, lm_block_kernel
from ik_layer.engine.scheduler import CANCELLED, DEADLINE, ROW_STATUS, Engine, Request
from ik_layer.engine.slots import Slots
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
    "BlockLauncher",
    "Engine",
    "Request",
    "Slots",
    "lm_block_kernel",
    "solve_with_kernel",
]


def solve_with_kernel(
    robot: Robot,
    target: Tensor,
    options: SolveOptions | None = None,
    *,
    warm_start: Tensor | None = None,
    weights: Tensor | None = None,
    generator_seed: int = 0,
    block: int = 16,
) -> IKResult:
    """Solve IK for a batch of targets on a fresh :class:`Engine`: admit every target, run until all retired.

    Arguments as :func:`ik_layer.solve` (no posture). Every target's first seed starts from ``warm_start``
    if given, else from a random configuration drawn with a generator seeded by ``generator_seed``, which
    also seeds the later seeds and the in-kernel restarts; a target gets another seed (up to
    ``options.num_seeds``) when its newest one stalls. Blocks of ``block`` iterations run until every
    target retired (one host sync per block).

    Returns:
        An :class:`ik_layer.IKResult`: the best configuration found, success, the errors recomputed at it
        with :func:`ik_layer.lie.pose_error` over the weighted axes, and the iterations used.
    """
    if not (isinstance(block, int) and block >= 1):
        raise IKLayerError(f"block must be an int >= 1, got {block!r}")
    problem = Problem.prepare(robot, target, options, warm_start, weights, None, None, {})
    n = problem.target.shape[0]
    if problem.warm_start is None:
        generator = torch.Generator(device=robot.device).manual_seed(generator_seed)
        start = robot.random_q((n,), generator=generator)
    else:
        start = robot.wrap(problem.warm_start)
    engine = Engine(robot, capacity=max(n * problem.options.num_seeds, 1), block=block)
    request = engine.submit(problem.target, start, problem.options, weights=problem.weights, seed=generator_seed)
    engine.run(request)
    return problem.unflatten(request.result())
