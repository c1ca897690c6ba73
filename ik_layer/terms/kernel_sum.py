"""The secondary terms in the engine's kernel: one warp function for the gain-weighted sum of a set of terms."""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
from typing import Any, NamedTuple

import torch
import warp as wp

from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.terms.base import SecondaryTerm, data_vector

__all__ = ["KernelTerm", "secondary_function"]


class KernelTerm(NamedTuple):
    """A term as the kernel compiles it in: its ``index`` in the slots' gains and the ``first`` of its columns in
    their data."""

    index: int
    term: SecondaryTerm
    first: int


@functools.cache
def secondary_function(layout: Layout, dtype: torch.dtype, terms: tuple[KernelTerm, ...]) -> Any:
    """The kernel's ``(q: vecq, jac: jac_t, data: array2d, gains: array2d, i: int, chain: Chain) -> (vect, f)``:
    the gain-weighted sum of the gradients and of the costs of ``terms``
    (:meth:`~ik_layer.engine.slots.Slots.kernel_terms`; a term of gain 0 skipped) at slot ``i``, for a robot of
    ``layout`` in ``dtype`` floats, each term handed its columns of the slot's ``data`` row.

    Built one term at a time, each function calling the sum of the terms before it: every term a closure
    constant of its own function, which warp's module hash sees (an unrolled ``wp.static`` over the terms would
    be resolved after the hash, so two sets of terms would share a cached binary).
    """
    t = kernel_types(layout, dtype)
    f, vecq, vect, jac_t, Chain = t.f, t.vecq, t.vect, t.jac_t, t.Chain
    if not terms:

        @wp.func
        def no_term(q: vecq, jac: jac_t, data: wp.array2d(dtype=f), gains: wp.array2d(dtype=f), i: int, chain: Chain):
            """No secondary term: a zero gradient and cost."""
            return vect(), f(0.0)

        return no_term
    k, added, first = terms[-1]
    before = secondary_function(layout, dtype, terms[:-1])
    term = added.warp_function(layout, dtype)
    vecd = data_vector(added, layout, dtype)
    size = added.data_size(layout)

    @wp.func
    def with_term(q: vecq, jac: jac_t, data: wp.array2d(dtype=f), gains: wp.array2d(dtype=f), i: int, chain: Chain):
        """The terms before term ``k``, plus term ``k`` at its gain, on its columns of the slot's data."""
        grad, s = before(q, jac, data, gains, i, chain)
        gain = gains[i, k]
        if gain != f(0.0):
            own = vecd()
            for a in range(size):
                own[a] = data[i, first + a]
            term_grad, term_cost = term(q, jac, own, chain)
            grad = grad + gain * term_grad
            s = s + gain * term_cost
        return grad, s

    return with_term
