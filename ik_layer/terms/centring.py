"""The joint-centring term: ``s = 1/2 sum_j (q_j - m_j)^2`` over the joints that stop at their limits (``m_j`` the
middle of joint ``j``'s limits): a pull towards the middle of the limits, in radians (metres for a prismatic joint).

At gain ``g`` a step pulls each such joint by ``g`` times its offset (in the pose's null space), as the posture
pulls: stable for every gain in [0, 1], whatever the joints' ranges. Continuous joints and joints a whole turn
brings back to the same pose have no middle to keep to and add nothing.
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

__all__ = ["CENTRING", "Centring"]


class Centring(SecondaryTerm):
    """Half the squared distance of the joints with stops to the middle of their limits."""

    name = "centring"

    def cost(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        return 0.5 * _offset(robot, joints_of(robot, q)).square().sum(-1)

    def gradient(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        return joint_gradient(robot, _offset(robot, joints_of(robot, q)))

    def warp_function(self, layout: Layout, dtype: torch.dtype) -> Any:
        return _centring_function(layout, dtype, data_vector(self, layout, dtype))


def _offset(robot: Robot, joints: Tensor) -> Tensor:
    """Each joint's offset from the middle of its limits; 0 for the joints without stops."""
    stops = ~(robot.continuous | robot.full_turn)
    return torch.where(stops, joints - 0.5 * (robot.lower + robot.upper), 0.0)


@functools.cache
def _centring_function(layout: Layout, dtype: torch.dtype, vecd: Any) -> Any:
    t = kernel_types(layout, dtype)
    f, vecq, vect, jac_t, Chain, joints, bq, bv = t.f, t.vecq, t.vect, t.jac_t, t.Chain, layout.joints, t.bq, t.bv

    @wp.func
    def centring(q: vecq, jac: jac_t, data: vecd, chain: Chain):
        """Gradient and cost of :class:`Centring` at ``q``."""
        grad = vect()
        s = f(0.0)
        for a in range(joints):
            if chain.continuous[a] == 0 and chain.full_turn[a] == 0:
                d = q[bq + a] - f(0.5) * (chain.lower[a] + chain.upper[a])
                grad[bv + a] = d
                s = s + d * d
        return grad, f(0.5) * s

    return centring


CENTRING = Centring()
