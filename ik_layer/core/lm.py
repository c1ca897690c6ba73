"""The Levenberg-Marquardt parameters that the eager reference solver and the fused kernel share."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LM", "LMParameters"]


@dataclass(frozen=True)
class LMParameters:
    """Damping, posture pull and restart constants of the LM step (:mod:`ik_layer.reference`,
    :mod:`ik_layer.engine.device.kernel`).

    Attributes:
        mu_init: initial damping relative to the weighted squared error.
        mu_min, mu_max: bounds of the relative damping; a seed at ``mu_max`` has stalled.
        mu_decrease, mu_increase: damping factors after an accepted / a rejected step.
        lambda_min: absolute damping floor, raised to ``eps_floor`` machine epsilons for low-precision dtypes.
        eps_floor: see ``lambda_min``.
        posture_gain: fraction of the distance to the posture pulled per step, in the null space.
        collision_gain: the gain of the collision term (:mod:`ik_layer.collision.cost`) among the secondary terms.
        progress: a seed whose cost fell by less than this factor over one check restarts.
        polish_progress, polish_iterations, polish_slack, polish_min_scale, polish_max_scale: with secondary terms a
            successful seed polishes: within tolerance it takes the pulled step at a scale (from 1), kept iff the
            terms' cost falls and the errors stay within ``polish_slack`` times the tolerances (the scale then
            doubled up to ``polish_max_scale``, else quartered); out of tolerance, the plain step, kept iff it lowers
            the pose's cost. Only configurations within tolerance are recorded. It stops when a step within
            tolerance at a scale of 1 or less lowers the terms' cost by ``polish_progress`` of it (of 1 + its
            magnitude) or less, when the scale falls below ``polish_min_scale``, when a correction is refused, or
            ``polish_iterations`` after its first success. With collision a seed polishes from the pose's tolerances,
            in collision or not, and one that stops polishing in collision restarts; one that has recorded no
            success (still in collision) ``polish_in_collision`` iterations after its first success stops then
            (restarts from another target's free answer, mostly: cheaper than a long walk out of an obstacle).
        pooled_restarts: the share of the restarts of a seed that stopped in collision that start from another
            target's collision-free answer in the same solve (where one exists), instead of at random: neighbouring
            targets' free answers tend to lie on a free branch, where random starts often converge to a colliding
            one (``bench/collision.py`` measures the rate with and without collision).
        float32_margin: in float32 the solvers hold their errors to ``1 - float32_margin`` of the tolerances, so
            that a reported success still meets them in float64 (float32 kinematics round a target's error by
            about 1e-7 m per metre of reach: covered for position tolerances from 2e-5 m).
    """

    mu_init: float = 3e-2
    mu_min: float = 1e-6
    mu_max: float = 1e6
    mu_decrease: float = 0.85
    mu_increase: float = 4.0
    lambda_min: float = 1e-9
    eps_floor: float = 100
    posture_gain: float = 0.2
    collision_gain: float = 1.0
    progress: float = 0.5
    polish_progress: float = 1e-12
    polish_iterations: int = 32
    polish_in_collision: int = 2
    polish_slack: float = 10.0
    polish_min_scale: float = 1 / 64
    polish_max_scale: float = 16.0
    pooled_restarts: float = 0.9
    float32_margin: float = 0.01

    def damping_floor(self, dtype: torch.dtype) -> float:
        """The absolute damping added to ``mu * cost`` for ``dtype``: ``max(lambda_min, eps_floor * eps)``."""
        return max(self.lambda_min, self.eps_floor * torch.finfo(dtype).eps)

    def tolerance_scale(self, dtype: torch.dtype) -> float:
        """The factor of the user's tolerances that the solvers' success test takes in ``dtype``."""
        return 1.0 if dtype == torch.float64 else 1.0 - self.float32_margin


LM = LMParameters()
"""The parameters both solvers use."""
