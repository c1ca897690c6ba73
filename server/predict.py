"""Stage 3, collect: the answers of an IK job -> one prediction; FK of configurations.

A job is solved in parts (consecutive rows) so that the worker can share the engine's slots between requests
(see :mod:`ik_layer.server.worker`); :func:`joined` joins the parts' answers in row order (a search's round, or
the job's answer), and :func:`assemble` adds the gradients of the rows that asked for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
from torch import Tensor

import ik_layer
from ik_layer import IKResult, NonFiniteError, Robot, matrix_to_pose
from ik_layer.core.solutions import best_goals
from ik_layer.engine import ROW_STATUS, Request
from ik_layer.server.decode import IKJob

__all__ = ["Prediction", "assemble", "fk_poses", "joined"]


@dataclass(frozen=True)
class Prediction:
    """The answer to one job, on the CPU.

    Attributes:
        result: the m solutions, flat: one per target, or ``per_target`` of each target's after one another.
        status: why each row stopped: ``solved``, ``exhausted`` (budget spent), ``deadline`` or ``cancelled``.
        gradient: (m, dof, 6) dq/d(target twist) if the job asked for it (zero on rows that failed), else None;
            (m, dof, F, 6) for a robot with F end-effector frames (:func:`ik_layer.target_gradient`).
        per_target: the solutions asked per target (``num_solutions``): above 1, answered as lists of that many.
    """

    result: IKResult
    status: list[str]
    gradient: Tensor | None
    per_target: int = 1


def joined(parts: Sequence[Request]) -> IKResult:
    """The answers of finished ``parts`` (rows in order), on the CPU."""
    results = [part.result() for part in parts]
    if len(results) == 1:  # most requests: one part
        return results[0].map(Tensor.cpu)
    given = [f.name for f in fields(IKResult) if getattr(results[0], f.name) is not None]  # (None: not measured)
    return IKResult(**{name: torch.cat([getattr(r, name) for r in results]).cpu() for name in given})


def assemble(robot: Robot, job: IKJob, answers: IKResult) -> Prediction:
    """The prediction of ``job`` from its ``answers``: (n,) rows, (n, k) from a search of k solutions, or with goal
    sets one per goal (each row's answer then the best of its goals', :func:`ik_layer.core.solutions.best_goals`).

    Raises:
        NonFiniteError: the solver produced NaN or infinite values, which JSON cannot carry.
    """
    flat = answers if answers.success.dim() == 1 else answers.reshaped((answers.success.numel(),))
    result = flat.map(Tensor.cpu)  # (a search's: on the robot's device)
    if job.goal_counts is not None:
        result = _best_goals(robot, job, result, job.goal_counts)
    _check_finite("solutions", result.q, result.position_error, result.orientation_error)
    assert result.status is not None  # the engine's and a search's answers say why each row stopped
    status = [ROW_STATUS[code] for code in result.status.tolist()]
    gradient = None
    if job.gradient:
        weights = None if job.weights is None else job.weights.to(robot.device)
        gradient = ik_layer.target_gradient(robot, result.q.to(robot.device), weights).cpu()
        gradient[~result.success] = 0  # as the library's ik(): no gradient through a failed solve
        _check_finite("gradients", gradient)
    return Prediction(result=result, status=status, gradient=gradient, per_target=job.num_solutions)


def _best_goals(robot: Robot, job: IKJob, answers: IKResult, counts: Tensor) -> IKResult:
    """Per row of goal sets (``counts`` goals each, one row after the other in ``answers``), the answer for its best
    goal and that goal's index in the row (:func:`ik_layer.core.solutions.best_goals` over rows padded by their last
    goal's answer, which ties with it and never wins)."""
    width = int(counts.max())
    starts = torch.cumsum(counts, 0) - counts
    index = (starts[:, None] + torch.minimum(torch.arange(width), counts[:, None] - 1)).to(robot.device)
    reference = {"closest": job.warm_start, "posture": job.posture}.get(job.objective)
    if reference is not None:
        reference = reference.to(robot.device)[index]
    padded = answers.map(lambda x: x.to(robot.device)[index])
    picked, goal = best_goals(robot, padded, job.objective, reference)
    return replace(picked.map(Tensor.cpu), goal=goal.cpu())


def fk_poses(robot: Robot, q: Tensor) -> Tensor:
    """(n, 7) end-effector poses ``[x, y, z, qx, qy, qz, qw]`` of configurations ``q`` (n, nq), on the CPU;
    (n, F, 7) for a robot with F end-effector frames."""
    return matrix_to_pose(robot.fk(q.to(robot.device))).cpu()


def _check_finite(what: str, *tensors: Tensor) -> None:
    """JSON has no NaN: refuse (422) rather than answer with numbers it cannot carry."""
    values = (t.detach().numpy() if t.requires_grad else t.numpy() for t in tensors)  # CPU tensors: numpy is faster
    if not all(bool(np.isfinite(v).all()) for v in values):
        raise NonFiniteError(f"the solver produced non-finite {what} (singular or extreme targets)")
