"""The fused Levenberg-Marquardt block kernel: one warp thread per slot, ``block`` iterations per launch.

One launch advances every RUNNING slot by up to ``block`` iterations of the eager solver's step
(:meth:`ik_layer.reference._LMState.step`) and bookkeeping (:meth:`ik_layer.reference._Problem._record`,
the progress checks and restarts of :meth:`ik_layer.reference._Problem.run`), for one seed per slot:

1. at the block start: forward kinematics, Jacobian (``LOCAL_WORLD_ALIGNED``, rows [linear;
   angular] per end-effector frame) and error ``e = [p_t - p; log(R_t R^T)]`` per frame at ``q``; a
   slot that meets its tolerances before its first iteration is SOLVED with 0 iterations;
2. the damped step ``(H + (mu cost + floor) I) dq = J^T W e`` (``H = J^T W J``) by ``L D L^T`` (Cholesky
   without square roots), one active-set pass for the joints it pushes past a limit, the candidate
   ``wrap(integrate(q, dq))``; a slot with a posture adds ``pull - (H + damping I)^-1 H pull``,
   ``pull = LM.posture_gain (posture - q)`` over the joints, to both solves
   (``ik_layer.reference._damped_step``: the pull projected on the null space);
3. the candidate is kept iff it lowers the cost (``mu *= LM.mu_decrease``), else ``mu *= LM.mu_increase``
   (:data:`ik_layer.core.lm.LM`); with a posture, a pulled candidate that does not lower the cost gives way to the
   plain step's, if that one does;
4. the score ``max(|e_p| / tol_p, |e_r| / tol_o)`` over the weighted axes of the worst frame: <= 1 is
   SOLVED, else the slot keeps its best configuration so far; ``best_score`` holds the rank of
   ``_Problem._record``: the score, or ``d / (1 + d)`` (``d`` the joints' distance to the posture) for a
   success with a posture, so that among seeds of one target solved together the closest ranks first;
5. every ``check_every`` iterations a slot that progressed too little, ran ``restart_after``
   iterations or stalled at the largest damping restarts from a uniform random configuration;
6. a slot out of budget is EXHAUSTED (its ``best_q`` is the answer).

The robot's shape (:class:`Layout`) is compiled in: F end-effector frames, each reached by a chain of
``length`` entries (shorter chains padded with still ones), ``joints`` coordinates, and optionally a
floating base (``q = [x, y, z, qx, qy, qz, qw, joints]``, tangent ``[base twist in the base frame,
joints]``, steps applied on SE(3) as :func:`ik_layer.model.floating.integrate_base`). Each chain entry moves
with ``q[col] * scale + offset``: a mimic joint follows its leader's coordinate, and its Jacobian
column adds to the leader's, times ``scale``.

A slot's first launch after :meth:`~ik_layer.engine.slots.Slots.admit` starts it: its best
configuration, errors and age are reset there and its restart RNG is seeded with
``wp.rand_init(rng_seed, rng)`` (``rng`` holds the stream offset until then). A slot admitted
without a start (``random_start`` 1) draws it there, uniform in the limits, as the first numbers of its
restart stream (``random_start`` becomes 2: drawn, stream seeded); a given start is brought inside the
limits there as :meth:`Robot.wrap` does. A floating base starts and restarts where the first frame meets
its target (:meth:`ik_layer.reference._Problem.random_starts`).

The slot state lives in torch tensors (see :mod:`ik_layer.engine.slots`) that the kernel reads and
writes through zero-copy warp views; nothing syncs with the host inside a launch. The same source
compiles for the CPU and for CUDA.
"""

# No `from __future__ import annotations`: warp reads the kernels' annotations as live types.
import functools
import math
from types import SimpleNamespace

import torch
import warp as wp

from ik_layer.core.lm import LM
from ik_layer.model.chain import Layout
from ik_layer.model.warp_chain import KERNEL_OPTIONS, chain_functions, chain_struct, warp_types

__all__ = [
    "EMPTY",
    "EXHAUSTED",
    "RUNNING",
    "SOLVED",
    "damping_floor",
    "lm_block_kernel",
    "lm_functions",
]

# Slot status, as the kernel reads and writes it (int32).
RUNNING = 0  # still iterating
SOLVED = 1  # met both tolerances; best_q is the solution, iterations the count that reached it
EXHAUSTED = 2  # used its whole budget without success; best_q is the lowest-score configuration seen
EMPTY = 3  # holds no problem (never admitted, or retired); the kernel skips it like SOLVED and EXHAUSTED

_SMALL_ANGLE_SQ = 1e-8  # as ik_layer.model.floating: below this squared angle, series replace the closed forms


def damping_floor(dtype: torch.dtype) -> float:
    """The absolute damping added to ``mu * cost``, as the eager solver's: ``max(1e-9, 100 eps)``."""
    return LM.damping_floor(dtype)


@functools.cache
def lm_functions(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """The warp functions of one LM step for a robot of ``layout`` and ``dtype`` floats.

    ``so3_log``, ``evaluate`` (error, Jacobian, weighted cost at q), ``errors_of``, ``score_of``,
    ``damped_solve``, ``candidate``, ``integrate``, ``neutral``, ``aligned``, ``rank_of``, ``wrap`` and ``wrapped``;
    :func:`lm_block_kernel` is built from them, and so is the bake-off's one-step kernel
    (``bench/kernel_bakeoff.py``).
    """
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout, got {type(layout).__name__}")
    f, vec2, vec3, _, mat33 = warp_types(dtype)
    frames, joints, floating = layout.frames, layout.joints, layout.floating
    nq, dof, rows = layout.nq, layout.dof, 6 * layout.frames
    bq, bv = nq - joints, dof - joints  # where the joints start in q and in a tangent
    vecq, vect, vecr = wp.types.vector(nq, f), wp.types.vector(dof, f), wp.types.vector(rows, f)
    Chain = chain_struct(dtype)
    jac_t = wp.types.matrix((rows, dof), f)
    poses_t = wp.types.matrix((3 * frames, 4), f)
    hess_t = wp.types.matrix((dof, dof), f)
    pi, two_pi = math.pi, 2 * math.pi
    walk = chain_functions(layout, dtype)
    base_pose, chain_pose, kinematics, poses = walk.base_pose, walk.chain_pose, walk.kinematics, walk.poses

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
        ``solver._evaluate``."""
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

    @wp.func
    def damped_solve(jac: jac_t, e: vecr, w: vecr, damping: f, free: vect, pull: vect, use_pull: wp.int32):
        """``(H + damping I)^-1 J_f^T W e`` with ``H = J_f^T W J_f``, ``J_f`` the columns where ``free`` is 1
        (the others 0), by ``L D L^T``, plus ``pull - (H + damping I)^-1 H pull`` if ``use_pull`` (as
        ``solver._damped_step``); and 1 if every pivot was positive, else 0 (a rejected step)."""
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
    def neutral(q: vecq) -> vecq:
        """``q`` with a floating base at the world origin, identity orientation (as ``Robot.random_q``)."""
        out = q
        if wp.static(floating):
            for a in range(6):
                out[a] = f(0.0)
            out[6] = f(1.0)
        return out

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
        ``q``'s joints, as :meth:`ik_layer.reference._Problem.random_starts`: its pose if that frame weighs a
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
    def rank_of(score: f, q: vecq, goal: vecq, use_pull: wp.int32) -> f:
        """The rank of ``solver._Problem._record``: ``score``, or for a success with a posture ``d / (1 + d)``
        with ``d`` the joints' distance to the posture (below 1: the closer success ranks first)."""
        if use_pull != 0 and score <= f(1.0):
            s = f(0.0)
            for a in range(joints):
                s = s + (q[bq + a] - goal[bq + a]) * (q[bq + a] - goal[bq + a])
            d = wp.sqrt(s)
            return d / (f(1.0) + d)
        return score

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
        as ``solver._LMState._candidate``), and 1 if its solves succeeded, else 0."""
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
    def record(
        score: f, q: vecq, e: vecr, w: vecr, goal: vecq, use_pull: wp.int32, best: f, best_q: vecq, best_error: vec2
    ):
        """The best rank, configuration and errors so far after seeing ``q`` at ``score`` (as
        ``reference._Problem._record``: the lower :func:`rank_of` wins)."""
        rank = rank_of(score, q, goal, use_pull)
        if rank < best:
            return rank, q, errors_of(e, w)
        return best, best_q, best_error

    return SimpleNamespace(
        so3_log=so3_log,
        evaluate=evaluate,
        residual=residual,
        errors_of=errors_of,
        score_of=score_of,
        damped_solve=damped_solve,
        candidate=candidate,
        integrate=integrate,
        neutral=neutral,
        aligned=aligned,
        rank_of=rank_of,
        wrap=wrap,
        wrapped=wrapped,
        draw_start=draw_start,
        record=record,
    )


@functools.cache
def lm_block_kernel(layout: Layout, dtype: torch.dtype, lazy_jacobian: bool = True) -> wp.Kernel:
    """The LM block kernel for a robot of ``layout`` and ``dtype`` floats.

    ``lazy_jacobian`` (the tensor store's, for GPUs; the default, which GPU bundles compile ahead): a candidate
    step is measured by forward kinematics alone and the Jacobian is taken once the step is accepted, at the next
    iteration: a second walk of the chains per accepted step, but no second Jacobian alive beside the first, so
    far fewer values per thread (``bench/kernel_resources.py``). Otherwise (the host store's, for CPUs) each
    candidate's one walk takes its Jacobian too. Both give the same answers, bit for bit.

    Cached per ``(layout, dtype, lazy_jacobian)``; warp caches the compiled module on disk across processes.
    Launch it through :class:`~ik_layer.engine.launch.BlockLauncher`, which binds the arguments in this order.
    """
    fns = lm_functions(layout, dtype)
    evaluate, residual, score_of, candidate = fns.evaluate, fns.residual, fns.score_of, fns.candidate
    wrapped, draw_start, record = fns.wrapped, fns.draw_start, fns.record
    f, vec2, vec3, vec6, mat33 = warp_types(dtype)
    frames, joints, nq, dof = layout.frames, layout.joints, layout.nq, layout.dof
    bq, bv = nq - joints, dof - joints
    vecq, vect, vecr = wp.types.vector(nq, f), wp.types.vector(dof, f), wp.types.vector(6 * frames, f)
    Chain = chain_struct(dtype)
    floor = damping_floor(dtype)
    mu_init, mu_min, mu_max, mu_decrease, mu_increase = LM.mu_init, LM.mu_min, LM.mu_max, LM.mu_decrease, LM.mu_increase
    posture_gain, progress = LM.posture_gain, LM.progress

    @wp.kernel(**KERNEL_OPTIONS)
    def lm_block(
        # the chains (Robot buffers) and the joints' limits
        chain: Chain,
        # the slots' problem
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        weights: wp.array2d(dtype=vec6),
        tolerance: wp.array(dtype=vec2),
        budget: wp.array(dtype=wp.int32),
        restart_after: wp.array(dtype=wp.int32),
        check_every: wp.array(dtype=wp.int32),
        posture: wp.array2d(dtype=f),
        has_posture: wp.array(dtype=wp.int32),
        random_start: wp.array(dtype=wp.int32),
        # the slots' state
        q_state: wp.array2d(dtype=f),
        mu_state: wp.array(dtype=f),
        best_q: wp.array2d(dtype=f),
        best_score: wp.array(dtype=f),
        iterations: wp.array(dtype=wp.int32),
        status: wp.array(dtype=wp.int32),
        rng: wp.array(dtype=wp.uint32),
        rng_seed: wp.array(dtype=wp.int32),
        check_cost: wp.array(dtype=f),
        age_state: wp.array(dtype=wp.int32),
        cost_state: wp.array(dtype=f),
        best_error: wp.array(dtype=vec2),
        # this launch
        block: wp.int32,
    ):
        i = wp.tid()
        if status[i] != RUNNING:
            return
        tol = tolerance[i]
        w = vecr()
        for fr in range(frames):
            wf = weights[i, fr]
            for k in range(6):
                w[6 * fr + k] = wf[k]
        q = vecq()
        bq_best = vecq()
        goal = vecq()
        for a in range(nq):
            q[a] = q_state[i, a]
            bq_best[a] = best_q[i, a]
        use_pull = has_posture[i]
        if use_pull != 0:
            for a in range(nq):
                goal[a] = posture[i, a]
        mu = mu_state[i]
        best = best_score[i]
        berr = best_error[i]
        it = iterations[i]
        age = age_state[i]
        last = check_cost[i]
        state = rng[i]
        limit = budget[i]
        every = check_every[i]
        patience = restart_after[i]
        st = int(RUNNING)
        drawn = random_start[i]
        if it == 0 and drawn == 1:  # a start drawn in the limits (as Robot.random_q), first from the restart stream
            state = wp.rand_init(rng_seed[i], wp.int32(state))
            q, state = draw_start(q, state, i, target_rot, target_pos, w, chain)
            drawn = 2
        elif it == 0 and drawn == 0:  # a given start, brought inside the limits as Robot.wrap does
            q = wrapped(q, chain)

        e, jac, cost = evaluate(q, i, target_rot, target_pos, w, chain)
        stale = wp.int32(0)  # lazy Jacobian: 1 once q moved and jac is not yet its Jacobian
        if it == 0:  # the start: record the initial configuration, open the first progress window
            last = cost
            best = f(wp.inf)
            berr = vec2(f(wp.inf), f(wp.inf))
            bq_best = q
            age = 0
            score = score_of(e, w, tol)
            best, bq_best, berr = record(score, q, e, w, goal, use_pull, best, bq_best, berr)
            if score <= f(1.0):
                st = SOLVED

        for _k in range(block):
            if st != RUNNING or it >= limit:
                break
            if it == 0 and drawn != 2:  # the first iteration of this admission: seed the restart stream
                state = wp.rand_init(rng_seed[i], wp.int32(state))
            if wp.static(lazy_jacobian):  # noqa: SIM102 (a static branch: compiled in or out)
                if stale != 0:
                    e, jac, cost = evaluate(q, i, target_rot, target_pos, w, chain)
                    stale = 0
            # the damped step, then one active-set pass for the joints it pushes past a limit
            damping = mu * cost + f(floor)
            pull = vect()
            if use_pull != 0:
                for a in range(joints):
                    pull[bv + a] = f(posture_gain) * (goal[bq + a] - q[bq + a])
            # the pulled step; if it does not lower the cost, the plain one (the pull must not hold the seed back)
            accept = wp.int32(0)
            for attempt in range(2):
                if accept == 0 and (attempt == 0 or use_pull != 0):
                    pulled = use_pull if attempt == 0 else wp.int32(0)
                    q_new, ok = candidate(q, e, jac, w, damping, pull, pulled, chain)
                    if ok != 0:
                        if wp.static(lazy_jacobian):
                            e_new, cost_new = residual(q_new, i, target_rot, target_pos, w, chain)
                        else:
                            e_new, jac_new, cost_new = evaluate(q_new, i, target_rot, target_pos, w, chain)
                        if cost_new < cost:
                            accept = 1
                            q = q_new
                            e = e_new
                            cost = cost_new
                            if wp.static(lazy_jacobian):
                                stale = 1
                            else:
                                jac = jac_new
            mu = wp.clamp(mu * (f(mu_decrease) if accept != 0 else f(mu_increase)), f(mu_min), f(mu_max))
            it += 1
            age += 1
            # record: keep the best configuration, stop at the first success
            score = score_of(e, w, tol)
            best, bq_best, berr = record(score, q, e, w, goal, use_pull, best, bq_best, berr)
            if score <= f(1.0):
                st = SOLVED
            elif it % every == 0 and it < limit:  # progress check: restart a stalled seed at random
                if cost > f(progress) * last or age >= patience or mu >= f(mu_max):
                    q, state = draw_start(q, state, i, target_rot, target_pos, w, chain)
                    mu = f(mu_init)
                    age = 0
                    e, jac, cost = evaluate(q, i, target_rot, target_pos, w, chain)
                last = cost
        if st == RUNNING and it >= limit:
            st = EXHAUSTED

        for a in range(nq):
            q_state[i, a] = q[a]
            best_q[i, a] = bq_best[a]
        mu_state[i] = mu
        best_score[i] = best
        best_error[i] = berr
        iterations[i] = it
        age_state[i] = age
        check_cost[i] = last
        cost_state[i] = cost
        rng[i] = state
        random_start[i] = drawn
        status[i] = st

    return lm_block
