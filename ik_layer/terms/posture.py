"""The posture term: ``s = 1/2 |q_joints - posture_joints|^2``, towards a preferred configuration per target (its
data: the posture, nq reals).

Its gain is :attr:`ik_layer.core.lm.LMParameters.posture_gain` (the fraction of the distance pulled per step); a
floating base goes where the frames take it (joints only).
"""

# No `from __future__ import annotations`: warp reads the function's annotations as live types.
import functools
from typing import Any

import torch
import warp as wp
from torch import Tensor

from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.robot import Robot
from ik_layer.terms.base import SecondaryTerm, data_vector, joint_gradient, joints_of

__all__ = ["POSTURE", "Posture"]


class Posture(SecondaryTerm):
    """Half the squared distance of the joints to the posture."""

    name = "posture"

    def data_size(self, layout: Layout) -> int:
        return layout.nq

    def cost(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        assert data is not None, "the posture term needs a posture"
        return 0.5 * joints_of(robot, q - data).square().sum(-1)

    def gradient(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        assert data is not None, "the posture term needs a posture"
        return joint_gradient(robot, joints_of(robot, q - data))

    def warp_function(self, layout: Layout, dtype: torch.dtype) -> Any:
        return _posture_function(layout, dtype, data_vector(self, layout, dtype))


@functools.cache
def _posture_function(layout: Layout, dtype: torch.dtype, vecd: Any) -> Any:
    t = kernel_types(layout, dtype)
    f, vecq, vect, jac_t, Chain, joints, bq, bv = t.f, t.vecq, t.vect, t.jac_t, t.Chain, layout.joints, t.bq, t.bv

    @wp.func
    def posture(q: vecq, jac: jac_t, goal: vecd, chain: Chain):
        """Gradient and cost of :class:`Posture` at ``q``."""
        grad = vect()
        s = f(0.0)
        for a in range(joints):
            d = q[bq + a] - goal[bq + a]
            grad[bv + a] = d
            s = s + d * d
        return grad, f(0.5) * s

    return posture


POSTURE = Posture()
