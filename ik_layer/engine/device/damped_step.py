"""The damped step of the LM kernel: ``(J^T W J + damping I) dq = J^T W e`` by ``L D L^T``, a null-space pull, and
one active-set pass for the joints the step pushes past a limit (as :mod:`ik_layer.reference`'s step)."""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
from types import SimpleNamespace

import torch
import warp as wp

from ik_layer.engine.device.configuration import configuration_functions
from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types

__all__ = ["step_functions"]


@functools.cache
def step_functions(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """``damped_solve`` and ``candidate`` for a robot of ``layout`` in ``dtype`` floats."""
    t = kernel_types(layout, dtype)
    f, Chain, vecq, vect, vecr, joints = t.f, t.Chain, t.vecq, t.vect, t.vecr, layout.joints
    dof, rows, bq, bv = layout.dof, t.rows, t.bq, t.bv
    jac_t, hess_t = t.jac_t, t.hess_t
    config = configuration_functions(layout, dtype)
    integrate, wrap = config.integrate, config.wrap

    @wp.func
    def damped_solve(jac: jac_t, e: vecr, w: vecr, damping: f, free: vect, pull: vect, use_pull: wp.int32):
        """``(H + damping I)^-1 J_f^T W e`` with ``H = J_f^T W J_f``, ``J_f`` the columns where ``free`` is 1
        (the others 0), by ``L D L^T``, plus ``pull - (H + damping I)^-1 H pull`` if ``use_pull`` (as
        ``ik_layer.reference._damped_step``); and 1 if every pivot was positive, else 0 (a rejected step)."""
        h = hess_t()
        y = vect()
        z = vect()  # H pull, then its damped solve
        for a in range(dof):
            t = f(0.0)
            for k in range(rows):
                t = t + jac[k, a] * w[k] * e[k]
            y[a] = t * free[a]
            for b in range(a + 1):
                s = f(0.0)
                for k in range(rows):
                    s = s + jac[k, a] * w[k] * jac[k, b]
                h[a, b] = s * free[a] * free[b]
        if use_pull != 0:
            for a in range(dof):
                t = f(0.0)
                for b in range(a + 1):  # H is stored in its lower triangle
                    t = t + h[a, b] * pull[b]
                for b in range(a + 1, dof):
                    t = t + h[b, a] * pull[b]
                z[a] = t
        for a in range(dof):
            h[a, a] = h[a, a] + damping
        ok = wp.int32(1)
        for a in range(dof):  # L D L^T, row by row in place: L below the diagonal, D^-1 on it (no square roots)
            for b in range(a):  # h[a, b] <- (L D)[a, b]
                t = h[a, b]
                for c in range(b):
                    t = t - h[a, c] * h[b, c]
                h[a, b] = t
            s = h[a, a]
            for b in range(a):  # L[a, b] = (L D)[a, b] / D_b, and D_a -= L[a, b] (L D)[a, b]
                ld = h[a, b]
                lab = ld * h[b, b]
                h[a, b] = lab
                s = s - lab * ld
            if not (s > f(0.0)):
                ok = 0
                s = f(1.0)
            h[a, a] = f(1.0) / s
        # (L D L^T)^-1 y and (L D L^T)^-1 z together, in place (z is zero without a pull: independent work, which
        # costs little beside y's chain of dependent steps; a helper would copy the factor at each call)
        for a in range(dof):
            ty = y[a]
            tz = z[a]
            for c in range(a):
                ty = ty - h[a, c] * y[c]
                tz = tz - h[a, c] * z[c]
            y[a] = ty
            z[a] = tz
        for a in range(dof - 1, -1, -1):
            ty = y[a] * h[a, a]
            tz = z[a] * h[a, a]
            for c in range(a + 1, dof):
                ty = ty - h[c, a] * y[c]
                tz = tz - h[c, a] * z[c]
            y[a] = ty
            z[a] = tz
        if use_pull != 0:
            y = y + pull - z
        return y, ok

    @wp.func
    def candidate(
        q: vecq,
        e: vecr,
        jac: jac_t,
        w: vecr,
        damping: f,
        pull: vect,
        use_pull: wp.int32,
        chain: Chain,
    ):
        """The configuration one damped step leads to (one active-set pass for the joints it pushes past a limit,
        as ``ik_layer.reference._LMState._candidate``), and 1 if its solves succeeded, else 0."""
        ones = vect()
        for a in range(dof):
            ones[a] = f(1.0)
        dq, ok = damped_solve(jac, e, w, damping, ones, pull, use_pull)
        if ok == 0:
            return q, ok
        free = ones
        dq_blocked = vect()
        any_blocked = wp.int32(0)
        for a in range(joints):
            target_q = q[bq + a] + dq[bv + a]
            stops = chain.continuous[a] == 0 and chain.full_turn[a] == 0
            if stops and (target_q < chain.lower[a] or target_q > chain.upper[a]):
                free[bv + a] = f(0.0)
                dq_blocked[bv + a] = wrap(target_q, a, chain) - q[bq + a]
                any_blocked = 1
        if any_blocked != 0:
            dq_free, ok = damped_solve(jac, e - jac * dq_blocked, w, damping, free, pull, use_pull)
            for a in range(dof):
                dq[a] = dq_blocked[a] + free[a] * dq_free[a]
        q_new = integrate(q, dq)
        for a in range(joints):
            q_new[bq + a] = wrap(q_new[bq + a], a, chain)
        return q_new, ok

    return SimpleNamespace(
        damped_solve=damped_solve,
        candidate=candidate,
    )
