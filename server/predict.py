"""Stage 2, predict: jobs -> one batched solver call (IK), or configurations -> poses (FK); tensors in, tensors out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor

import ik_layer
from ik_layer import IKResult, NonFiniteError, Robot
from ik_layer.lie import matrix_to_pose
from ik_layer.server.decode import IKJob

__all__ = ["Prediction", "fk_poses", "predict"]


@dataclass(frozen=True)
class Prediction:
    """Solutions of some rows on the CPU, and dq/d(target twist) of the rows that asked for it.

    Attributes:
        result: the solutions, one row per target.
        asked: (n,) bool, the rows that asked for their gradient.
        gradient: (number of rows asked, dof, 6) the gradients of the rows that asked, in row order.
    """

    result: IKResult
    asked: Tensor
    gradient: Tensor


def predict(robot: Robot, jobs: Sequence[IKJob], generator: torch.Generator | None = None) -> Prediction:
    """Solve the rows of ``jobs`` (equal solver options) in one :func:`ik_layer.solve` call.

    When some jobs have warm starts, jobs without get random ones in the joint limits (what the solver
    would draw for them anyway). Gradients are computed for the rows of the jobs that asked only.

    Args:
        robot: the robot of every job.
        jobs: the jobs, rows concatenated in this order.
        generator: random generator on the robot's device (reproducible results); default: torch's.

    Raises:
        NonFiniteError: the solver produced NaN or infinite values, which JSON cannot carry.
        ValueError: the jobs have different solver options.
    """
    options = jobs[0].options
    if any(job.options != options for job in jobs):
        raise ValueError("predict takes jobs with equal solver options only")
    device = robot.device
    targets = torch.cat([job.targets for job in jobs]).to(device)
    warm_start = None
    if any(job.warm_start is not None for job in jobs):
        parts = [robot.random_q((job.rows,), generator) if job.warm_start is None else job.warm_start for job in jobs]
        warm_start = torch.cat([part.to(device) for part in parts])
    result = ik_layer.solve(robot, targets, options, warm_start=warm_start, generator=generator)
    _check_finite("solutions", result.q, result.position_error, result.orientation_error)
    asked = torch.cat([torch.full((job.rows,), job.gradient, dtype=torch.bool) for job in jobs])
    gradient = result.q.new_zeros(0, robot.dof, 6)
    if bool(asked.any()):
        gradient = ik_layer.target_gradient(robot, result.q[asked.to(device)])
        _check_finite("gradients", gradient)
    cpu = IKResult(**{f.name: getattr(result, f.name).cpu() for f in fields(IKResult)})
    return Prediction(result=cpu, asked=asked, gradient=gradient.cpu())


def fk_poses(robot: Robot, q: Tensor) -> Tensor:
    """(n, 7) end-effector poses ``[x, y, z, qx, qy, qz, qw]`` of configurations ``q`` (n, dof), on the CPU."""
    return matrix_to_pose(robot.fk(q.to(robot.device))).cpu()


def _check_finite(what: str, *tensors: Tensor) -> None:
    """JSON has no NaN: refuse (422) rather than answer with numbers it cannot carry."""
    if not all(bool(torch.isfinite(t).all()) for t in tensors):
        raise NonFiniteError(f"the solver produced non-finite {what} (singular or extreme targets)")
