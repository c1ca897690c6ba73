"""Configurations in the LM kernel: the joints' limits and wrapping, and steps on the configuration space (a floating
base on SE(3)), as :class:`ik_layer.Robot`'s ``wrap``, ``integrate`` and ``neutral_q``."""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
import math
from types import SimpleNamespace

import torch
import warp as wp

from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.warp_chain import chain_functions

__all__ = ["configuration_functions"]

_SMALL_ANGLE_SQ = 1e-8  # as ik_layer.model.floating: below this squared angle, series replace the closed forms


@functools.cache
def configuration_functions(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """``neutral``, ``integrate``, ``wrap`` and ``wrapped`` for a robot of ``layout`` in ``dtype`` floats."""
    t = kernel_types(layout, dtype)
    f, vec3, Chain, vecq, vect, joints = t.f, t.vec3, t.Chain, t.vecq, t.vect, layout.joints
    floating, bq, bv = layout.floating, t.bq, t.bv
    pi, two_pi = math.pi, 2 * math.pi
    base_pose = chain_functions(layout, dtype).base_pose

    @wp.func
    def neutral(q: vecq) -> vecq:
        """``q`` with a floating base at the world origin, identity orientation (as ``Robot.random_q``)."""
        out = q
        if wp.static(floating):
            for a in range(6):
                out[a] = f(0.0)
            out[6] = f(1.0)
        return out

    @wp.func
    def integrate(q: vecq, dq: vect) -> vecq:
        """``q`` moved by the tangent ``dq``: the joints added, a floating base by ``exp(twist)`` in its own
        frame with a unit quaternion (as :func:`ik_layer.model.floating.integrate_base`); neither wrapped nor
        clamped."""
        out = q
        for a in range(joints):
            out[bq + a] = q[bq + a] + dq[bv + a]
        if wp.static(floating):
            v = vec3(dq[0], dq[1], dq[2])
            w = vec3(dq[3], dq[4], dq[5])
            theta_sq = wp.dot(w, w)
            b = f(0.5) - theta_sq / f(24.0)
            c = f(1.0) / f(6.0) - theta_sq / f(120.0)
            half = f(0.5) - theta_sq / f(48.0)
            cos_half = f(1.0) - theta_sq / f(8.0)
            if theta_sq >= f(_SMALL_ANGLE_SQ):
                theta = wp.sqrt(theta_sq)
                b = (f(1.0) - wp.cos(theta)) / theta_sq
                c = (theta - wp.sin(theta)) / (theta_sq * theta)
                half = wp.sin(theta / f(2.0)) / theta
                cos_half = wp.cos(theta / f(2.0))
            wxv = wp.cross(w, v)
            rot, pos = base_pose(q)
            moved = pos + rot * (v + b * wxv + c * wp.cross(w, wxv))
            n = wp.sqrt(q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6])
            av = vec3(q[3], q[4], q[5]) / n
            aw = q[6] / n
            bw = w * half
            qv = aw * bw + cos_half * av + wp.cross(av, bw)
            qw = aw * cos_half - wp.dot(av, bw)
            m = wp.sqrt(wp.dot(qv, qv) + qw * qw)
            for k in range(3):
                out[k] = moved[k]
                out[3 + k] = qv[k] / m
            out[6] = qw / m
        return out

    @wp.func
    def wrap(x: f, a: int, chain: Chain) -> f:
        """``Robot.wrap`` of joint ``a`` at ``x``: continuous joints to (-pi, pi], full-turn joints past a limit
        back by whole turns, then clamped to the limits."""
        if chain.continuous[a] != 0:
            m = wp.mod(f(pi) - x, f(two_pi))  # C fmod: the sign of the dividend; torch.remainder: the divisor's
            if m < f(0.0):
                m = m + f(two_pi)
            return f(pi) - m
        lower, upper = chain.lower[a], chain.upper[a]
        y = x
        if chain.full_turn[a] != 0:
            turns = wp.ceil(wp.max(x - upper, f(0.0)) / f(two_pi)) - wp.ceil(wp.max(lower - x, f(0.0)) / f(two_pi))
            y = x - f(two_pi) * turns
        return wp.min(wp.max(y, lower), upper)

    @wp.func
    def wrapped(q: vecq, chain: Chain) -> vecq:
        """``Robot.wrap`` of ``q``: every joint wrapped or clamped as :func:`wrap`, a floating base's quaternion
        scaled to unit norm."""
        out = q
        for a in range(joints):
            out[bq + a] = wrap(q[bq + a], a, chain)
        if wp.static(floating):
            n = wp.sqrt(q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6])
            for k in range(4):
                out[3 + k] = q[3 + k] / n
        return out

    return SimpleNamespace(
        neutral=neutral,
        integrate=integrate,
        wrap=wrap,
        wrapped=wrapped,
    )
