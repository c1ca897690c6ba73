"""Starts, restarts and records of the LM kernel: random configurations from a slot's restart stream (a floating base
placed where the first frame meets its target), the seed table's configuration nearest a slot's targets
(:mod:`ik_layer.core.seeding`), and the best configuration so far, of the lowest rank (as :mod:`ik_layer.reference`
ranks seeds)."""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
from types import SimpleNamespace

import torch
import warp as wp

from ik_layer.core.seeding import ROTATION_WEIGHT
from ik_layer.engine.device.configuration import configuration_functions
from ik_layer.engine.device.pose_cost import pose_cost_functions
from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.warp_chain import chain_functions

__all__ = ["restart_functions"]


@functools.cache
def restart_functions(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """``aligned``, ``draw_start``, ``nearest_start`` and ``record`` for a robot of ``layout`` in ``dtype`` floats."""
    t = kernel_types(layout, dtype)
    f, vec2, vec3, mat33, Chain, vecq = t.f, t.vec2, t.vec3, t.mat33, t.Chain, t.vecq
    vecr, joints, floating, bq = t.vecr, layout.joints, layout.floating, t.bq
    frames, nq = layout.frames, layout.nq
    rotation_factor = -2.0 * ROTATION_WEIGHT / 3.0  # times a frame's summed rotation weights: -2 c mean(w_rot)
    walk = chain_functions(layout, dtype)
    base_pose, chain_pose = walk.base_pose, walk.chain_pose
    config = configuration_functions(layout, dtype)
    neutral, wrap = config.neutral, config.wrap
    errors_of = pose_cost_functions(layout, dtype).errors_of

    @wp.func
    def aligned(
        q: vecq,
        i: int,
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        w: vecr,
        chain: Chain,
    ) -> vecq:
        """``q`` (its base at the origin) with a floating base placed where the first frame meets its target at
        ``q``'s joints, as :meth:`ik_layer.reference._Solve.random_starts`: its pose if that frame weighs a
        rotation axis, else its position."""
        out = q
        if wp.static(floating):
            tip_r, tip_p, _, _ = chain_pose(q, 0, chain)
            base_rot, base_pos = base_pose(q)
            if w[3] > f(0.0) or w[4] > f(0.0) or w[5] > f(0.0):
                base_rot = target_rot[i, 0] * wp.transpose(tip_r)
            base_pos = target_pos[i, 0] - base_rot * tip_p
            quat = wp.quat_from_matrix(base_rot)
            for k in range(3):
                out[k] = base_pos[k]
            for k in range(4):
                out[3 + k] = quat[k]
        return out

    @wp.func
    def draw_start(
        q: vecq,
        state: wp.uint32,
        i: int,
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        w: vecr,
        chain: Chain,
    ):
        """A configuration drawn from the restart stream ``state``: joints uniform in the limits, then wrapped (as
        :meth:`Robot.random_q`), a floating base placed by :func:`aligned`; and the stream after the draws."""
        out = neutral(q)
        s = state
        for a in range(joints):
            u = f(wp.randf(s))
            out[bq + a] = wrap(chain.lower[a] * (f(1.0) - u) + chain.upper[a] * u, a, chain)
        return aligned(out, i, target_rot, target_pos, w, chain), s

    @wp.func
    def nearest_start(
        q: vecq,
        i: int,
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        w: vecr,
        table_q: wp.array2d(dtype=f),
        table_pose: wp.array3d(dtype=f),
    ) -> vecq:
        """The configuration of the seed table (``table_q`` (M, nq), its frames' poses ``table_pose`` (M, F, 12))
        nearest slot ``i``'s targets under weights ``w``, as :func:`ik_layer.core.seeding.table_distance` ranks them
        (the first of equals); ``q`` with an empty table."""
        best = f(wp.inf)
        pick = wp.int32(-1)
        for m in range(table_q.shape[0]):
            d = f(0.0)
            for fr in range(frames):
                tr = target_rot[i, fr]
                tp = target_pos[i, fr]
                c = f(rotation_factor) * (w[6 * fr + 3] + w[6 * fr + 4] + w[6 * fr + 5])
                for a in range(3):
                    p = table_pose[m, fr, 9 + a]
                    d += w[6 * fr + a] * (p * p - f(2.0) * tp[a] * p)
                dot = f(0.0)
                for r in range(3):
                    for col in range(3):
                        dot += tr[r, col] * table_pose[m, fr, 3 * r + col]
                d += c * dot
            if d < best:
                best = d
                pick = m
        out = q
        if pick >= 0:
            for a in range(nq):
                out[a] = table_q[pick, a]
        return out

    @wp.func
    def record(rank: f, q: vecq, e: vecr, w: vecr, best: f, best_q: vecq, best_error: vec2):
        """The best rank, configuration and errors so far after seeing ``q`` at ``rank`` (the lower wins, as
        ``reference._Solve._record``: a score, or below 1 a success's secondary rank)."""
        if rank < best:
            return rank, q, errors_of(e, w)
        return best, best_q, best_error

    return SimpleNamespace(
        aligned=aligned,
        draw_start=draw_start,
        nearest_start=nearest_start,
        record=record,
    )
