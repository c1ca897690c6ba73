"""Forward kinematics and Jacobian in one warp kernel, from the chain description the LM kernel reads.

:meth:`ik_layer.Robot.fk` and :meth:`ik_layer.Robot.fk_jacobian` take this path when no caller needs autograd
through it (``q`` does not require grad, or grad mode is off) and ``q`` is a plain tensor (not one of
``torch.func``'s wrappers, not traced by ``torch.compile``); else they run the eager torch kinematics
(:meth:`ik_layer.Robot.kinematics`), the reference this path is tested against. One thread per configuration walks
each frame's chain once (:func:`~ik_layer.model.warp_chain.chain_functions`' ``kinematics``, the LM kernel's own) and
writes the pose and the Jacobian rows: no temporaries, one launch, on the CPU and CUDA.
"""

# No `from __future__ import annotations`: warp reads the kernel's annotations as live types.
import functools
from typing import Literal, overload

import torch
import warp as wp
from torch import Tensor

from ik_layer.model.chain import ChainDescription, Layout
from ik_layer.model.warp_chain import KERNEL_OPTIONS, bind_chain, chain_functions, chain_struct, warp_types
from ik_layer.model.warp_runtime import quiet_warp, torch_stream

__all__ = ["fk_kernel", "forward", "takes"]

_is_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", lambda x: False)


def takes(q: Tensor) -> bool:
    """Whether ``q`` may take the fused path: no autograd through it, a plain tensor on the CPU or CUDA, and no
    ``torch.compile`` tracing (which traces the torch kinematics instead)."""
    if (torch.is_grad_enabled() and q.requires_grad) or torch.compiler.is_compiling():
        return False
    return q.device.type in ("cpu", "cuda") and not _is_wrapped(q)


@functools.cache
def fk_kernel(layout: Layout, dtype: torch.dtype, jacobian: bool) -> wp.Kernel:
    """The kernel writing ``pose`` (n, 4F, 4) and, if ``jacobian``, ``jac`` (n, 6F, dof) of ``q`` (n, nq), one
    thread a row (without the Jacobian the compiler drops its arithmetic; the poses are the same bits)."""
    kinematics = chain_functions(layout, dtype).kinematics
    f = warp_types(dtype)[0]
    frames, nq, rows, dof = layout.frames, layout.nq, 6 * layout.frames, layout.dof
    jacobian_out = jacobian
    vecq = wp.types.vector(nq, f)
    Chain = chain_struct(dtype)

    @wp.kernel(**KERNEL_OPTIONS)
    def fk_rows(
        chain: Chain,
        q_in: wp.array2d(dtype=f),
        pose: wp.array3d(dtype=f),
        jac: wp.array3d(dtype=f),
    ):
        i = wp.tid()
        q = vecq()
        for a in range(nq):
            q[a] = q_in[i, a]
        poses, jacobian = kinematics(q, chain)
        for fr in range(frames):
            for k in range(3):
                for m in range(4):
                    pose[i, 4 * fr + k, m] = poses[3 * fr + k, m]
            pose[i, 4 * fr + 3, 0] = f(0.0)
            pose[i, 4 * fr + 3, 1] = f(0.0)
            pose[i, 4 * fr + 3, 2] = f(0.0)
            pose[i, 4 * fr + 3, 3] = f(1.0)
        if wp.static(jacobian_out):
            for r in range(rows):
                for c in range(dof):
                    jac[i, r, c] = jacobian[r, c]

    return fk_rows


@overload
def forward(
    chains: ChainDescription, q: Tensor, frames: tuple[int, ...], *, jacobian: Literal[True]
) -> tuple[Tensor, Tensor]: ...
@overload
def forward(
    chains: ChainDescription, q: Tensor, frames: tuple[int, ...], *, jacobian: bool
) -> tuple[Tensor, Tensor | None]: ...
def forward(
    chains: ChainDescription, q: Tensor, frames: tuple[int, ...], *, jacobian: bool
) -> tuple[Tensor, Tensor | None]:
    """:meth:`ik_layer.Robot.kinematics`'s values for a checked ``q`` (..., nq) that :func:`takes` the fused path, on
    the robot's ``chains`` (``frames``: ``()`` for one end-effector frame, ``(F,)`` for a list of them): pose
    (..., [F,] 4, 4) and, if asked, Jacobian (..., [F,] 6, dof), new tensors on ``q``'s device."""
    layout = chains.layout
    batch = q.shape[:-1]
    flat = q.detach().reshape(-1, layout.nq).contiguous()
    n = flat.shape[0]
    pose = torch.empty(n, 4 * layout.frames, 4, dtype=q.dtype, device=q.device)
    jac = torch.empty(n, 6 * layout.frames, layout.dof if jacobian else 0, dtype=q.dtype, device=q.device)
    if n:
        with quiet_warp():  # the first launch compiles or loads the module
            wp.launch(
                fk_kernel(layout, chains.dtype, jacobian),
                dim=n,
                inputs=[bind_chain(chains), wp.from_torch(flat), wp.from_torch(pose), wp.from_torch(jac)],
                device=wp.device_from_torch(q.device),
                stream=torch_stream(q.device),
            )
    pose = pose.reshape(*batch, *frames, 4, 4)
    return pose, jac.reshape(*batch, *frames, 6, layout.dof) if jacobian else None
