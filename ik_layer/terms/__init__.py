"""Secondary cost terms of the solve, one per file (see :mod:`ik_layer.terms.base`): pursued in the null space of
the pose error, ranking the successful seeds, and part of the implicit layer's optimality condition.

:data:`TERMS` is their order in the engine's per-slot gains. ``posture`` applies where a posture is given (at the
gain :attr:`ik_layer.core.lm.LMParameters.posture_gain`); ``centring`` and ``manipulability`` are solver options
whose value is the gain (0: off).
"""

from torch import Tensor

from ik_layer.core.lm import LM
from ik_layer.core.options import SolveOptions
from ik_layer.model.robot import Robot
from ik_layer.terms.base import SecondaryTerm
from ik_layer.terms.centring import CENTRING
from ik_layer.terms.manipulability import MANIPULABILITY
from ik_layer.terms.posture import POSTURE

__all__ = [
    "CENTRING",
    "MANIPULABILITY",
    "POSTURE",
    "TERMS",
    "SecondaryTerm",
    "active_terms",
    "gains_of",
    "rank_of_cost",
    "secondary_cost",
    "secondary_gradient",
    "used_terms",
]

TERMS: tuple[SecondaryTerm, ...] = (POSTURE, CENTRING, MANIPULABILITY)
"""Every secondary term, in the order of the engine's per-slot gains."""


def gains_of(options: SolveOptions, posture: bool) -> tuple[float, ...]:
    """Each term's gain (0: off) in :data:`TERMS` order, for a solve with ``options`` and, if ``posture``, a
    posture."""
    return (LM.posture_gain if posture else 0.0, options.centring, options.manipulability)


def used_terms(gains: tuple[float, ...]) -> frozenset[int]:
    """The indices in :data:`TERMS` of the terms of non-zero gain."""
    return frozenset(k for k, gain in enumerate(gains) if gain != 0)


def active_terms(gains: tuple[float, ...]) -> list[tuple[SecondaryTerm, float]]:
    """The terms of non-zero gain, with their gains."""
    return [(term, gain) for term, gain in zip(TERMS, gains, strict=True) if gain != 0]


def secondary_cost(robot: Robot, q: Tensor, jac: Tensor, posture: Tensor | None, gains: tuple[float, ...]) -> Tensor:
    """The gain-weighted sum of the terms' costs (...,) at ``q`` (..., nq) with its pose Jacobian ``jac``."""
    total = q.new_zeros(q.shape[:-1])
    for term, gain in active_terms(gains):
        total = total + gain * term.cost(robot, q, jac, posture)
    return total


def secondary_gradient(
    robot: Robot, q: Tensor, jac: Tensor, posture: Tensor | None, gains: tuple[float, ...]
) -> Tensor:
    """The gain-weighted sum of the terms' gradients (..., dof) at ``q`` (..., nq)."""
    total = q.new_zeros(*q.shape[:-1], robot.dof)
    for term, gain in active_terms(gains):
        total = total + gain * term.gradient(robot, q, jac, posture)
    return total


def rank_of_cost(cost: Tensor) -> Tensor:
    """The rank of a success of secondary cost ``cost``: in (0.25, 0.75), increasing with it, so below every
    failure's score (above 1) and below 1 even rounded to float32. The engine's kernel ranks as this."""
    return 0.5 + 0.25 * cost / (1 + cost.abs())
