"""The solver engine: a fused Levenberg-Marquardt kernel (warp) over fixed-shape slots, on the CPU and CUDA.

* :func:`~ik_layer.engine.kernel.lm_block_kernel`: the kernel; one launch advances every RUNNING
  slot by up to ``block`` iterations, the same math as the eager solver (:mod:`ik_layer.solver`).
* :class:`~ik_layer.engine.slots.Slots`: the per-row state in torch tensors shared with warp.
* :class:`~ik_layer.engine.kernel.BlockLauncher`: the recorded launch over one set of slots.
* :func:`solve_with_kernel`: the engine's first client, one slot (one seed) per target.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ik_layer.engine.kernel import EMPTY, EXHAUSTED, RUNNING, SOLVED, BlockLauncher, lm_block_kernel
from ik_layer.engine.slots import Slots
from ik_layer.exceptions import IKLayerError
from ik_layer.kinematics import Robot
from ik_layer.lie import pose_error
from ik_layer.options import SolveOptions
from ik_layer.solver import _MAX_TARGET_DISTANCE, IKResult, _per_target, _weights

__all__ = [
    "EMPTY",
    "EXHAUSTED",
    "RUNNING",
    "SOLVED",
    "BlockLauncher",
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
    """Solve IK for a batch of targets with the fused kernel: one slot, one seed, per target.

    Arguments as :func:`ik_layer.solve` (``options.num_seeds`` is not used: one seed per target;
    no posture). Every target starts from ``warm_start`` if given, else from a random configuration
    drawn with a generator seeded by ``generator_seed``, which also seeds the in-kernel restarts.
    Blocks of ``block`` iterations are launched until no slot is RUNNING (one host sync per block).

    Returns:
        An :class:`ik_layer.IKResult`: the best configuration found, success, the errors recomputed at it
        with :func:`ik_layer.lie.pose_error` over the weighted axes, and the iterations used.
    """
    opts = SolveOptions.build(options)
    if not (isinstance(block, int) and block >= 1):
        raise IKLayerError(f"block must be an int >= 1, got {block!r}")
    if not isinstance(robot, Robot):
        raise IKLayerError(f"robot must be an ik_layer.Robot (see load_robot), got {type(robot).__name__}")
    target_t = robot.check_target(target)
    if target_t.numel() and float(target_t[..., :3, 3].abs().max()) > _MAX_TARGET_DISTANCE:
        raise IKLayerError(f"target positions must lie within {_MAX_TARGET_DISTANCE:g} m of the base")
    batch = target_t.shape[:-2]
    flat_target = target_t.reshape(-1, 4, 4)
    n = flat_target.shape[0]
    w = _weights(robot, weights, batch, n)
    q_start = _per_target(robot, warm_start, batch, n, "warm_start")
    if q_start is None:
        generator = torch.Generator(device=robot.device).manual_seed(generator_seed)
        q_start = robot.random_q((n,), generator=generator)
    else:
        q_start = robot.wrap(q_start)

    slots = Slots(robot, n)
    slots.admit(torch.arange(n, device=robot.device), flat_target, q_start, opts, weights=w, seed=generator_seed)
    launch = BlockLauncher(slots)
    while n and bool(slots.running().any()):
        launch(block)

    best_q = slots.best_q.clone()
    masked = pose_error(flat_target, robot.kinematics(best_q, jacobian=False)[0]) * (w > 0)
    return IKResult(
        q=best_q.reshape(*batch, robot.dof),
        success=(slots.status == SOLVED).reshape(batch),
        position_error=masked[:, :3].norm(dim=-1).reshape(batch),
        orientation_error=masked[:, 3:].norm(dim=-1).reshape(batch),
        iterations=slots.iterations.to(torch.int64).reshape(batch),
    )
