"""The manipulability term: ``s = -1/2 log det(J J^T + eps I)``, ``J`` the end-effector frame's Jacobian (6, dof):
minus the log of Yoshikawa's measure ``sqrt(det(J J^T))``, which vanishes at a singularity.

Its gradient needs the derivative of ``J``, which for a serial chain (columns in chain order, one joint per
column, axes and origins of ``LOCAL_WORLD_ALIGNED``) follows from ``J`` itself: with ``v_j``, ``w_j`` the linear
and angular rows of column ``j`` (``w_j = 0`` for a prismatic joint),

    dJ_j / dq_k = [w_k x v_j; w_k x w_j]   (k <= j),      [w_j x v_k; 0]   (k > j),

and ``ds / dq_k = -<A, dJ / dq_k>`` with ``A = (J J^T + eps I)^-1 J``. So the term applies to serial arms
(:attr:`ik_layer.model.chain.ChainDescription.serial_arm`, checked by :meth:`ik_layer.Problem.prepare`); ``eps`` is
the solver's damping floor.
"""

# No `from __future__ import annotations`: warp reads the function's annotations as live types.
import functools
from typing import Any

import torch
import warp as wp
from torch import Tensor

from ik_layer.core.lm import LM
from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.robot import Robot
from ik_layer.terms.base import SecondaryTerm, data_vector

__all__ = ["MANIPULABILITY", "Manipulability"]


class Manipulability(SecondaryTerm):
    """Minus the log of the end-effector frame's manipulability."""

    name = "manipulability"
    needs_jacobian = True

    def cost(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        gram = jac @ jac.mT + _eps(jac.dtype) * torch.eye(6, dtype=jac.dtype, device=jac.device)
        return -0.5 * torch.logdet(gram)

    def gradient(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        gram = jac @ jac.mT + _eps(jac.dtype) * torch.eye(6, dtype=jac.dtype, device=jac.device)
        a = torch.linalg.solve(gram, jac)
        v, w = jac[..., :3, :].mT, jac[..., 3:, :].mT  # (..., dof, 3): column j's linear and angular rows
        a_v, a_w = a[..., :3, :].mT, a[..., 3:, :].mT
        w_k = w[..., :, None, :]  # k along dim -3, j along dim -2
        later = (a_v[..., None, :, :] * torch.cross(w_k, v[..., None, :, :], dim=-1)).sum(-1)  # [k, j]
        later = later + (a_w[..., None, :, :] * torch.cross(w_k, w[..., None, :, :], dim=-1)).sum(-1)
        earlier = (a_v[..., None, :, :] * torch.cross(w[..., None, :, :], v[..., :, None, :], dim=-1)).sum(-1)
        dof = jac.shape[-1]
        j_at_least_k = torch.ones(dof, dof, dtype=torch.bool, device=jac.device).triu()
        return -torch.where(j_at_least_k, later, earlier).sum(-1)

    def warp_function(self, layout: Layout, dtype: torch.dtype) -> Any:
        return _manipulability_function(layout, dtype, data_vector(self, layout, dtype))


def _eps(dtype: torch.dtype) -> float:
    return LM.damping_floor(dtype)


@functools.cache
def _manipulability_function(layout: Layout, dtype: torch.dtype, vecd: Any) -> Any:
    t = kernel_types(layout, dtype)
    f, vec3, vecq, vect, jac_t, Chain, dof = t.f, t.vec3, t.vecq, t.vect, t.jac_t, t.Chain, layout.dof
    gram_t = wp.types.matrix((6, 6), f)
    vec6 = wp.types.vector(6, f)
    eps = _eps(dtype)

    @wp.func
    def manipulability(q: vecq, jac: jac_t, data: vecd, chain: Chain):
        """Gradient and cost of :class:`Manipulability` at ``q`` (``jac`` its Jacobian)."""
        g = gram_t()
        for r in range(6):  # J J^T + eps I, then L D L^T in place (L below the diagonal, D^-1 on it)
            for c in range(r + 1):
                s = f(0.0)
                for k in range(dof):
                    s = s + jac[r, k] * jac[c, k]
                g[r, c] = s
            g[r, r] = g[r, r] + f(eps)
        log_det = f(0.0)
        for r in range(6):
            for c in range(r):
                s = g[r, c]
                for k in range(c):
                    s = s - g[r, k] * g[c, k]
                g[r, c] = s
            d = g[r, r]
            for c in range(r):
                ld = g[r, c]
                lrc = ld * g[c, c]
                g[r, c] = lrc
                d = d - lrc * ld
            log_det = log_det + wp.log(d)
            g[r, r] = f(1.0) / d
        a = jac_t()
        for k in range(dof):  # A = (L D L^T)^-1 J, column by column
            col = vec6()
            for r in range(6):
                s = jac[r, k]
                for c in range(r):
                    s = s - g[r, c] * col[c]
                col[r] = s
            for r in range(5, -1, -1):
                s = col[r] * g[r, r]
                for c in range(r + 1, 6):
                    s = s - g[c, r] * col[c]
                col[r] = s
            for r in range(6):
                a[r, k] = col[r]
        grad = vect()
        for k in range(dof):
            w_k = vec3(jac[3, k], jac[4, k], jac[5, k])
            v_k = vec3(jac[0, k], jac[1, k], jac[2, k])
            s = f(0.0)
            for j in range(dof):
                v_j = vec3(jac[0, j], jac[1, j], jac[2, j])
                w_j = vec3(jac[3, j], jac[4, j], jac[5, j])
                a_v = vec3(a[0, j], a[1, j], a[2, j])
                if j >= k:
                    a_w = vec3(a[3, j], a[4, j], a[5, j])
                    s = s + wp.dot(a_v, wp.cross(w_k, v_j)) + wp.dot(a_w, wp.cross(w_k, w_j))
                else:
                    s = s + wp.dot(a_v, wp.cross(w_j, v_k))
            grad[k] = -s
        return grad, f(-0.5) * log_det

    return manipulability


MANIPULABILITY = Manipulability()
