"""The warp types the LM kernel's functions share for one robot shape and dtype."""

import functools
from types import SimpleNamespace

import torch
import warp as wp

from ik_layer.model.chain import Layout
from ik_layer.model.warp_chain import chain_struct, warp_types

__all__ = ["kernel_types"]


@functools.cache
def kernel_types(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """Scalars ``f``, ``vec2``, ``vec3``, ``mat33``; a configuration ``vecq`` (nq), a tangent ``vect`` (dof), a
    residual ``vecr`` (6F), the Jacobian ``jac_t`` (6F, dof), the poses ``poses_t`` (3F, 4), the normal matrix
    ``hess_t`` (dof, dof), the ``Chain`` struct, ``rows`` = 6F, and where the joints start in q (``bq``) and in a
    tangent (``bv``), for a robot of ``layout`` in ``dtype`` floats."""
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout, got {type(layout).__name__}")
    f, vec2, vec3, _, mat33 = warp_types(dtype)
    rows, nq, dof = 6 * layout.frames, layout.nq, layout.dof
    return SimpleNamespace(
        f=f,
        vec2=vec2,
        vec3=vec3,
        mat33=mat33,
        vecq=wp.types.vector(nq, f),
        vect=wp.types.vector(dof, f),
        vecr=wp.types.vector(rows, f),
        jac_t=wp.types.matrix((rows, dof), f),
        poses_t=wp.types.matrix((3 * layout.frames, 4), f),
        hess_t=wp.types.matrix((dof, dof), f),
        Chain=chain_struct(dtype),
        rows=rows,
        bq=nq - layout.joints,
        bv=dof - layout.joints,
    )
