"""The pose cost of the LM kernel: each frame's error ``[p_t - p; log(R_t R^T)]`` towards its target, weighted, and
the errors and score that success is judged by (as :mod:`ik_layer.reference` and :mod:`ik_layer.core.result`)."""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
from types import SimpleNamespace

import torch
import warp as wp

from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.warp_chain import chain_functions

__all__ = ["pose_cost_functions"]


@functools.cache
def pose_cost_functions(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """``so3_log``, ``errors_at``, ``evaluate`` (error, Jacobian, weighted cost), ``residual`` (without the Jacobian),
    ``errors_of`` and ``score_of`` for a robot of ``layout`` in ``dtype`` floats."""
    t = kernel_types(layout, dtype)
    f, vec2, vec3, mat33, Chain, vecq = t.f, t.vec2, t.vec3, t.mat33, t.Chain, t.vecq
    vecr, frames, rows = t.vecr, layout.frames, t.rows
    poses_t = t.poses_t
    walk = chain_functions(layout, dtype)
    kinematics, poses = walk.kinematics, walk.poses

    @wp.func
    def so3_log(r: mat33) -> vec3:
        """Rotation vector of ``r``, exactly as :func:`ik_layer.model.lie.so3_log` (axis from the symmetric part
        beyond pi/2)."""
        v = vec3(r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]) * f(0.5)
        c = wp.clamp((r[0, 0] + r[1, 1] + r[2, 2] - f(1.0)) * f(0.5), f(-1.0), f(1.0))
        s2 = wp.dot(v, v)
        theta = wp.atan2(wp.sqrt(s2), c)
        if c >= f(0.0):
            scale = f(1.0) + s2 / f(6.0)
            if s2 >= f(1e-8):
                scale = theta / wp.sqrt(s2)
            return v * scale
        sym = (r + wp.transpose(r)) * f(0.5) - wp.identity(3, f) * c
        col = 0
        if sym[1, 1] > sym[col, col]:
            col = 1
        if sym[2, 2] > sym[col, col]:
            col = 2
        a = vec3(sym[0, col], sym[1, col], sym[2, col])
        a = a / wp.max(wp.length(a), f(1e-30))
        if wp.dot(a, v) < f(0.0):
            a = -a
        return a * theta

    @wp.func
    def errors_at(
        poses: poses_t,
        i: int,
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        w: vecr,
    ):
        """Error ``[p_t - p; log(R_t R^T)]`` (6F) of the frames' ``poses`` (as :func:`kinematics` gives them)
        towards slot ``i``'s targets, and its weighted cost."""
        e = vecr()
        for fr in range(frames):
            r = 3 * fr
            tip_r = mat33(
                poses[r, 0], poses[r, 1], poses[r, 2],
                poses[r + 1, 0], poses[r + 1, 1], poses[r + 1, 2],
                poses[r + 2, 0], poses[r + 2, 1], poses[r + 2, 2],
            )  # fmt: skip
            dp = target_pos[i, fr] - vec3(poses[r, 3], poses[r + 1, 3], poses[r + 2, 3])
            dr = so3_log(target_rot[i, fr] * wp.transpose(tip_r))
            for k in range(3):
                e[6 * fr + k] = dp[k]
                e[6 * fr + 3 + k] = dr[k]
        cost = f(0.0)
        for k in range(rows):
            cost = cost + w[k] * e[k] * e[k]
        return e, cost

    @wp.func
    def evaluate(
        q: vecq,
        i: int,
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        w: vecr,
        chain: Chain,
    ):
        """Error (6F), Jacobian (6F, dof) and weighted cost at ``q`` towards slot ``i``'s targets, as
        ``ik_layer.reference._evaluate``."""
        poses, jac = kinematics(q, chain)
        e, cost = errors_at(poses, i, target_rot, target_pos, w)
        return e, jac, cost

    @wp.func
    def residual(
        q: vecq,
        i: int,
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        w: vecr,
        chain: Chain,
    ):
        """:func:`evaluate`'s error and cost without the Jacobian (forward kinematics only; the same bits)."""
        return errors_at(poses(q, chain), i, target_rot, target_pos, w)

    @wp.func
    def errors_of(e: vecr, w: vecr) -> vec2:
        """Position [m] and orientation [rad] error norms over the weighted axes, the worst frame's."""
        worst = vec2()
        for fr in range(frames):
            pos = f(0.0)
            ori = f(0.0)
            for k in range(3):
                p, r = 6 * fr + k, 6 * fr + 3 + k
                if w[p] > f(0.0):
                    pos = pos + e[p] * e[p]
                if w[r] > f(0.0):
                    ori = ori + e[r] * e[r]
            worst = vec2(wp.max(worst[0], wp.sqrt(pos)), wp.max(worst[1], wp.sqrt(ori)))
        return worst

    @wp.func
    def score_of(e: vecr, w: vecr, tolerance: vec2) -> f:
        """Error over tolerance, on the weighted axes: ``max(|e_p| / tol_p, |e_r| / tol_o)``; <= 1 is success."""
        err = errors_of(e, w)
        return wp.max(err[0] / tolerance[0], err[1] / tolerance[1])

    return SimpleNamespace(
        so3_log=so3_log,
        errors_at=errors_at,
        evaluate=evaluate,
        residual=residual,
        errors_of=errors_of,
        score_of=score_of,
    )
