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
    dof, frames, bq, bv = layout.dof, layout.frames, t.bq, t.bv
    jac_t, hess_t = t.jac_t, t.hess_t
    config = configuration_functions(layout, dtype)
    integrate, wrap = config.integrate, config.wrap

    # One frame couples every coordinate on its chain: its loops keep the dense bounds the compiler unrolls (through
    # the pattern's lookups, 1k cold panda solves took ~15 % longer, ad hoc); several frames follow the sparsity.
    sparse = layout.frames > 1

    @wp.func
    def held_by(fr: int, chain: Chain) -> int:
        """How many positions frame ``fr``'s rows touch."""
        if wp.static(sparse):
            return chain.frame_count[fr]
        return dof

    @wp.func
    def slot(fr: int, i: int, chain: Chain) -> int:
        """The ``i``-th position frame ``fr``'s rows touch, ascending."""
        if wp.static(sparse):
            return chain.frame_slots[fr * dof + i]
        return i

    @wp.func
    def coordinate(p: int, chain: Chain) -> int:
        """The tangent coordinate at position ``p`` of the order."""
        if wp.static(sparse):
            return chain.order[p]
        return p

    @wp.func
    def envelope(p: int, chain: Chain) -> int:
        """The first position row ``p`` of ``H`` (and of its factor) may hold a non-zero at."""
        if wp.static(sparse):
            return chain.first[p]
        return 0

    @wp.func
    def damped_solve(
        jac: jac_t, e: vecr, w: vecr, damping: f, free: vect, pull: vect, use_pull: wp.int32, chain: Chain
    ):
        """``(H + damping I)^-1 J_f^T W e`` with ``H = J_f^T W J_f``, ``J_f`` the columns where ``free`` is 1
        (the others 0), by ``L D L^T``, plus ``pull - (H + damping I)^-1 H pull`` if ``use_pull`` (as
        ``ik_layer.reference._damped_step``); and 1 if every pivot was positive, else 0 (a rejected step).

        ``H`` is built, factored and solved in ``chain``'s order (:func:`ik_layer.model.sparsity.normal_pattern`):
        a frame's rows add to the coordinates on its chain only, the factor lives in each row's envelope."""
        h = hess_t()  # position p, q of the order: coordinates chain.order[p], chain.order[q]
        y = vect()
        z = vect()  # H pull, then its damped solve
        for fr in range(frames):
            for i in range(held_by(fr, chain)):
                p = slot(fr, i, chain)
                a = coordinate(p, chain)
                if free[a] != f(0.0):
                    t = y[p]
                    for k in range(6):  # (constant bounds: the compiler unrolls them)
                        r = 6 * fr + k
                        t = t + jac[r, a] * w[r] * e[r]
                    y[p] = t
                    for j in range(i + 1):
                        q = slot(fr, j, chain)
                        b = coordinate(q, chain)
                        if free[b] != f(0.0):
                            s = h[p, q]
                            for k in range(6):
                                r = 6 * fr + k
                                s = s + jac[r, a] * w[r] * jac[r, b]
                            h[p, q] = s
        if use_pull != 0:
            for p in range(dof):
                pull_p = pull[coordinate(p, chain)]
                t = h[p, p] * pull_p
                for q in range(envelope(p, chain), p):  # H is stored in its lower triangle
                    t = t + h[p, q] * pull[coordinate(q, chain)]
                    z[q] = z[q] + h[p, q] * pull_p
                z[p] = z[p] + t
        for p in range(dof):
            h[p, p] = h[p, p] + damping
        ok = wp.int32(1)
        for p in range(dof):  # L D L^T, row by row in place: L below the diagonal, D^-1 on it (no square roots)
            first_p = envelope(p, chain)
            for q in range(first_p, p):  # h[p, q] <- (L D)[p, q]
                t = h[p, q]
                for c in range(wp.max(first_p, envelope(q, chain)), q):
                    t = t - h[p, c] * h[q, c]
                h[p, q] = t
            s = h[p, p]
            for q in range(first_p, p):  # L[p, q] = (L D)[p, q] / D_q, and D_p -= L[p, q] (L D)[p, q]
                ld = h[p, q]
                lpq = ld * h[q, q]
                h[p, q] = lpq
                s = s - lpq * ld
            if not (s > f(0.0)):
                ok = 0
                s = f(1.0)
            h[p, p] = f(1.0) / s
        # (L D L^T)^-1 y and (L D L^T)^-1 z together, in place (z is zero without a pull: independent work, which
        # costs little beside y's chain of dependent steps; a helper would copy the factor at each call)
        for p in range(dof):
            ty = y[p]
            tz = z[p]
            for c in range(envelope(p, chain), p):
                ty = ty - h[p, c] * y[c]
                tz = tz - h[p, c] * z[c]
            y[p] = ty
            z[p] = tz
        for p in range(dof):
            y[p] = y[p] * h[p, p]
            z[p] = z[p] * h[p, p]
        for p in range(dof - 1, -1, -1):  # L^T x = D^-1 y: x[p] is final once every later row is taken out of it
            ty = y[p]
            tz = z[p]
            for c in range(envelope(p, chain), p):
                y[c] = y[c] - h[p, c] * ty
                z[c] = z[c] - h[p, c] * tz
        step = vect()
        for p in range(dof):
            a = coordinate(p, chain)
            step[a] = y[p]
            if use_pull != 0:
                step[a] = step[a] + pull[a] - z[p]
        return step, ok

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
        dq, ok = damped_solve(jac, e, w, damping, ones, pull, use_pull, chain)
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
            dq_free, ok = damped_solve(jac, e - jac * dq_blocked, w, damping, free, pull, use_pull, chain)
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
