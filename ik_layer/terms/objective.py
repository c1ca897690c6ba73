"""The solve's secondary objective, assembled in one place for torch: every secondary term at its gain plus the
collision term at :attr:`~ik_layer.core.lm.LMParameters.collision_gain`.

The pose error is the primary term (its rows must reach the tolerances); this objective is what the solve pursues in
its null space and ranks successes by. The reference solver (:mod:`ik_layer.reference`) and the implicit layer
(:mod:`ik_layer.layer.ik`: the optimality condition ``P grad S = 0``) both evaluate it here; the engine's kernel
compiles the same sum (:mod:`ik_layer.terms.kernel_sum`, :mod:`ik_layer.engine.device.collision_step`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ik_layer.collision.cost import CollisionCost
from ik_layer.core.lm import LM
from ik_layer.core.options import SolveOptions
from ik_layer.model.robot import Robot
from ik_layer.terms import (
    SecondaryTerm,
    TermInput,
    active_terms,
    gains_of,
    registered_terms,
    term_data,
    used_terms,
)

__all__ = ["Objective"]


@dataclass(frozen=True)
class Objective:
    """The secondary objective of a solve.

    Attributes:
        robot: the robot.
        terms: the secondary terms (the registered ones).
        gains: each term's gain, in ``terms`` order (0: off).
        data: the per-row data (broadcast against the configurations) of the terms that take some, by name (the
            posture's: the posture).
        collision: the collision term of the rows (their obstacles, self-collision), or None.
    """

    robot: Robot
    terms: tuple[SecondaryTerm, ...]
    gains: tuple[float, ...]
    data: Mapping[str, Tensor] = field(default_factory=dict)
    collision: CollisionCost | None = None

    @classmethod
    def of(
        cls,
        robot: Robot,
        options: SolveOptions,
        posture: Tensor | None,
        collision: CollisionCost | None,
        given: Mapping[str, TermInput] | None = None,
    ) -> Objective:
        """The objective of a solve with ``options``, ``posture`` (its term on where given), ``collision`` and the
        added terms ``given`` (their data per row)."""
        terms = registered_terms()
        gains = gains_of(options, posture is not None, given, terms)
        return cls(robot, terms, gains, term_data(posture, given), collision)

    @property
    def with_terms(self) -> bool:
        """Whether a secondary term is on (successes then polish down its gradient)."""
        return bool(used_terms(self.gains))

    @property
    def active(self) -> bool:
        """Whether there is anything to pursue: a secondary term or the collision term."""
        return self.with_terms or self.collision is not None

    def take(self, rows: Tensor) -> Objective:
        """The objective of the rows ``rows``, their configurations (A, S, nq) seeds of each."""
        data = {name: x[rows, None] for name, x in self.data.items()}
        collision = None if self.collision is None else self.collision.take(rows)
        return Objective(self.robot, self.terms, self.gains, data, collision)

    def terms_cost(self, q: Tensor, jac: Tensor) -> Tensor:
        """The gain-weighted sum of the secondary terms' costs (...,) at ``q`` (..., nq) with its pose Jacobian
        ``jac``."""
        costs = (gain * term.cost(self.robot, q, jac, self.data.get(term.name)) for term, gain in self._active)
        return sum(costs, q.new_zeros(q.shape[:-1]))

    def terms_gradient(self, q: Tensor, jac: Tensor) -> Tensor:
        """The gain-weighted sum of the secondary terms' gradients (..., dof) at ``q`` (..., nq)."""
        gradients = (gain * term.gradient(self.robot, q, jac, self.data.get(term.name)) for term, gain in self._active)
        return sum(gradients, q.new_zeros(*q.shape[:-1], self.robot.dof))

    @property
    def _active(self) -> list[tuple[SecondaryTerm, float]]:
        return active_terms(self.terms, self.gains)

    def gradient(self, q: Tensor, jac: Tensor) -> Tensor:
        """The objective's gradient (..., dof) at ``q`` (differentiable: the implicit layer's condition)."""
        gradient = self.terms_gradient(q, jac)
        if self.collision is not None:
            gradient = gradient + LM.collision_gain * self.collision.gradient(self.robot, q)
        return gradient

    def evaluate(self, q: Tensor, jac: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """At ``q`` with its pose Jacobian: the objective's cost (...), its gradient (..., dof), the least
        collision distance (...) (+inf without collision) and whether the terms' gradient alone is zero (...) (the
        collision term gates and repairs; it leaves nothing to polish)."""
        cost = self.terms_cost(q, jac)
        gradient = self.terms_gradient(q, jac)
        still = (gradient == 0).all(dim=-1)
        if self.collision is None:
            return cost, gradient, torch.full_like(cost, torch.inf), still
        collision_cost, collision_gradient, least = self.collision.cost_and_gradient(self.robot, q)
        cost, gradient = cost + LM.collision_gain * collision_cost, gradient + LM.collision_gain * collision_gradient
        return cost, gradient, least, still
