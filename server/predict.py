"""Stage 3, collect: the answers of an IK job -> one prediction; FK of configurations.

A job is solved in parts (consecutive rows) so that the worker can share the engine's slots between requests
(see :mod:`ik_layer.server.worker`); :func:`joined` joins the parts' answers in row order (a search's round, or
the job's answer), and :func:`assemble` adds the gradients of the rows that asked for them.
"""

from __future__ import annotations

import itertools
import math
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
    """The answer to one job as the values its JSON carries, every one checked finite: per row, its solution's
    fields (:class:`~ik_layer.IKResult`'s, as lists: each field is read off its tensor once).

    The m rows are flat: one per target, or ``per_target`` of each target's after one another.

    Attributes:
        q: (m, nq) configurations; success, position_error, orientation_error, iterations: (m,) theirs.
        status: why each row stopped: ``solved``, ``exhausted`` (budget spent), ``deadline`` or ``cancelled``.
        min_distance, closest_pair: (m,) and (m, 2) with obstacles or self-collision (+inf, and a negative
            sphere, where there was no pair to measure), else None.
        goal: (m,) the goal each row's answer reaches, with goal sets; else None.
        gradient: (m, dof, 6) dq/d(target twist) on the CPU if the job asked for it (zero on rows that failed),
            else None; (m, dof, F, 6) for a robot with F end-effector frames (:func:`ik_layer.target_gradient`).
        per_target: the solutions asked per target (``num_solutions``): above 1, answered as lists of that many.
    """

    q: list[list[float]]
    success: list[bool]
    position_error: list[float]
    orientation_error: list[float]
    iterations: list[int]
    status: list[str]
    min_distance: list[float] | None = None
    closest_pair: list[list[int]] | None = None
    goal: list[int] | None = None
    gradient: Tensor | None = None
    per_target: int = 1


def joined(parts: Sequence[Request]) -> IKResult:
    """The answers of finished ``parts`` (rows in order), on the CPU."""
    results = [part.result() for part in parts]
    if len(results) == 1:  # most requests: one part
        return results[0].map(Tensor.cpu)
    given = [f.name for f in fields(IKResult) if getattr(results[0], f.name) is not None]  # (None: not measured)
    return IKResult(**{name: torch.cat([getattr(r, name) for r in results]).cpu() for name in given})


def assemble(robot: Robot, job: IKJob, answers: IKResult[Tensor | np.ndarray]) -> Prediction:
    """The prediction of ``job`` from its ``answers`` (fields as tensors or numpy arrays): (n,) rows, (n, k) from a
    search of k solutions, or with goal sets one per goal (each row's answer then the best of its goals',
    :func:`ik_layer.core.solutions.best_goals`).

    Raises:
        NonFiniteError: the solver produced NaN or infinite values, which JSON cannot carry.
    """
    result = answers if answers.success.ndim == 1 else answers.reshaped((math.prod(answers.success.shape),))
    if job.goal_counts is not None:
        result = _best_goals(robot, job, result.map(torch.as_tensor), job.goal_counts)
    assert result.status is not None  # the engine's and a search's answers say why each row stopped
    q, position, orientation = result.q.tolist(), result.position_error.tolist(), result.orientation_error.tolist()
    if not _finite(*q, position, orientation):
        raise NonFiniteError("the solver produced non-finite solutions (singular or extreme targets)")
    gradient = None
    if job.gradient:
        weights = None if job.weights is None else job.weights.to(robot.device)
        solution = torch.as_tensor(result.q, device=robot.device)
        gradient = ik_layer.target_gradient(robot, solution, weights).cpu()
        gradient[~torch.as_tensor(result.success).cpu()] = 0  # as the library's ik(): none through a failed solve
        if not bool(torch.isfinite(gradient).all()):
            raise NonFiniteError("the solver produced non-finite gradients (singular or extreme targets)")
    return Prediction(
        q=q,
        success=result.success.tolist(),
        position_error=position,
        orientation_error=orientation,
        iterations=result.iterations.tolist(),
        status=[ROW_STATUS[code] for code in result.status.tolist()],
        min_distance=None if result.min_distance is None else result.min_distance.tolist(),
        closest_pair=None if result.closest_pair is None else result.closest_pair.tolist(),
        goal=None if result.goal is None else result.goal.tolist(),
        gradient=gradient,
        per_target=job.num_solutions,
    )


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


def _finite(*rows: list[float]) -> bool:
    """Whether every value of ``rows`` is finite (JSON has no NaN: an answer with one is refused, 422)."""
    return all(map(math.isfinite, itertools.chain.from_iterable(rows)))
