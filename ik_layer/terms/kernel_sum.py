"""The secondary terms in the engine's kernel: one warp function for the gain-weighted sum of a set of terms."""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
from typing import Any

import torch
import warp as wp

from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.warp_chain import warp_types
from ik_layer.terms import TERMS

__all__ = ["gains_type", "secondary_function"]


@functools.cache
def gains_type(dtype: torch.dtype) -> Any:
    """The warp vector of one slot's gains, in :data:`TERMS` order."""
    return wp.types.vector(len(TERMS), warp_types(dtype)[0])


@functools.cache
def secondary_function(layout: Layout, dtype: torch.dtype, used: frozenset[int]) -> Any:
    """The kernel's ``(q: vecq, jac: jac_t, goal: vecq, gains, chain: Chain) -> (vect, f)``: the gain-weighted sum
    of the gradients and of the costs of the terms ``used`` (indices in :data:`TERMS`; a term of gain 0 is
    skipped), for a robot of ``layout`` in ``dtype`` floats.

    Built one term at a time, each function calling the sum of the terms before it: every term a closure
    constant of its own function, which warp's module hash sees (an unrolled ``wp.static`` over the terms would
    be resolved after the hash, so two sets of terms would share a cached binary).
    """
    t = kernel_types(layout, dtype)
    f, vecq, vect, jac_t, Chain, vecg = t.f, t.vecq, t.vect, t.jac_t, t.Chain, gains_type(dtype)
    if not used:

        @wp.func
        def no_term(q: vecq, jac: jac_t, goal: vecq, gains: vecg, chain: Chain):
            """No secondary term: a zero gradient and cost."""
            return vect(), f(0.0)

        return no_term
    k = max(used)
    before = secondary_function(layout, dtype, used - {k})
    term = TERMS[k].warp_function(layout, dtype)

    @wp.func
    def with_term(q: vecq, jac: jac_t, goal: vecq, gains: vecg, chain: Chain):
        """The terms before term ``k``, plus term ``k`` at its gain."""
        grad, s = before(q, jac, goal, gains, chain)
        gain = gains[k]
        if gain != f(0.0):
            term_grad, term_cost = term(q, jac, goal, chain)
            grad = grad + gain * term_grad
            s = s + gain * term_cost
        return grad, s

    return with_term
