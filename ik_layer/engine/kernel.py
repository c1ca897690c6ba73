"""The fused Levenberg-Marquardt block kernel: one warp thread per slot, ``block`` iterations per launch.

One launch advances every RUNNING slot by up to ``block`` iterations of the eager solver's step
(:meth:`ik_layer.solver._LMState.step`) and bookkeeping (:meth:`ik_layer.solver._Problem._record`,
the progress checks and restarts of :meth:`ik_layer.solver._Problem.run`), for one seed per slot:

1. at the block start: forward kinematics, Jacobian (``LOCAL_WORLD_ALIGNED``, rows [linear;
   angular]) and error ``e = [p_t - p; log(R_t R^T)]`` at ``q``; a slot that meets its tolerances
   before its first iteration is SOLVED with 0 iterations;
2. the damped step ``(H + (mu cost + floor) I) dq = J^T W e`` (``H = J^T W J``) by Cholesky, one
   active-set pass for the joints it pushes past a limit, the candidate ``wrap(q + dq)``; a slot with a
   posture adds ``pull - (H + damping I)^-1 H pull``, ``pull = 0.1 (posture - q)``, to both solves
   (``ik_layer.solver._damped_step``: the pull projected on the Jacobian's null space);
3. the candidate is kept iff it lowers the cost (``mu *= 0.3``), else ``mu *= 4``;
4. the score ``max(|e_p| / tol_p, |e_r| / tol_o)`` over the weighted axes: <= 1 is SOLVED, else the
   slot keeps its best configuration so far; ``best_score`` holds the rank of ``_Problem._record``:
   the score, or ``d / (1 + d)`` (``d = |q - posture|``) for a success with a posture, so that among
   seeds of one target solved together the closest to the posture ranks first;
5. every ``check_every`` iterations a slot that progressed too little, ran ``restart_after``
   iterations or stalled at the largest damping restarts from a uniform random configuration;
6. a slot out of budget is EXHAUSTED (its ``best_q`` is the answer).

A slot's first launch after :meth:`~ik_layer.engine.slots.Slots.admit` starts it: its best
configuration, errors and age are reset there and its restart RNG is seeded with
``wp.rand_init(rng_seed, rng)`` (``rng`` holds the stream offset until then). A slot admitted
without a start (``random_start`` 1) draws it there, uniform in the limits, as the first numbers
of its restart stream (``random_start`` becomes 2: drawn, stream seeded).

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

from ik_layer.solver import (
    _EPS_FLOOR,
    _LAMBDA_MIN,
    _MU_DECREASE,
    _MU_INCREASE,
    _MU_INIT,
    _MU_MAX,
    _MU_MIN,
    _POSTURE_GAIN,
    _PROGRESS,
)

wp.config.log_level = wp.LOG_ERROR  # a library prints no banner, compile messages or CPU-only warnings

__all__ = [
    "EMPTY",
    "EXHAUSTED",
    "RUNNING",
    "SOLVED",
    "damping_floor",
    "lm_block_kernel",
    "lm_functions",
    "warp_types",
]

# Slot status, as the kernel reads and writes it (int32).
RUNNING = 0  # still iterating
SOLVED = 1  # met both tolerances; best_q is the solution, iterations the count that reached it
EXHAUSTED = 2  # used its whole budget without success; best_q is the lowest-score configuration seen
EMPTY = 3  # holds no problem (never admitted, or retired); the kernel skips it like SOLVED and EXHAUSTED

_WARP_FLOAT = {torch.float32: wp.float32, torch.float64: wp.float64}


def damping_floor(dtype: torch.dtype) -> float:
    """The absolute damping added to ``mu * cost``, as the eager solver's: ``max(1e-9, 100 eps)``."""
    return max(_LAMBDA_MIN, _EPS_FLOOR * torch.finfo(dtype).eps)


@functools.cache
def warp_types(dtype: torch.dtype) -> tuple[type, type, type, type, type]:
    """Warp ``(scalar, vec2, vec3, vec6, mat33)`` types of a torch float dtype."""
    if dtype not in _WARP_FLOAT:
        raise TypeError(f"the LM kernel supports torch.float32 and torch.float64, got {dtype}")
    f = _WARP_FLOAT[dtype]
    return f, wp.types.vector(2, f), wp.types.vector(3, f), wp.types.vector(6, f), wp.types.matrix((3, 3), f)


@functools.cache
def lm_functions(dof: int, joints: int, dtype: torch.dtype) -> SimpleNamespace:
    """The warp functions of one LM step for ``dof`` coordinates, ``joints`` chain joints and ``dtype`` floats.

    ``so3_log``, ``evaluate`` (error, Jacobian, weighted cost at q), ``errors_of``, ``score_of``,
    ``damped_solve``, ``rank_of`` and ``wrap``; :func:`lm_block_kernel` is built from them, and so is the
    bake-off's one-step kernel (``bench/kernel_bakeoff.py``).
    """
    if not (isinstance(dof, int) and isinstance(joints, int) and 1 <= joints <= dof):
        raise ValueError(f"need 1 <= joints <= dof, got dof={dof}, joints={joints}")
    f, vec2, vec3, vec6, mat33 = warp_types(dtype)
    vecq = wp.types.vector(dof, f)
    jac_t = wp.types.matrix((6, dof), f)
    hess_t = wp.types.matrix((dof, dof), f)
    pi, two_pi = math.pi, 2 * math.pi

    @wp.func
    def so3_log(r: mat33) -> vec3:
        """Rotation vector of ``r``, exactly as :func:`ik_layer.lie.so3_log` (axis from the symmetric part
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
    def evaluate(
        q: vecq,
        target_rot: mat33,
        target_pos: vec3,
        w: vec6,
        place_rot: wp.array(dtype=mat33),
        place_rot_k: wp.array(dtype=mat33),
        place_rot_k2: wp.array(dtype=mat33),
        place_pos: wp.array(dtype=vec3),
        slide: wp.array(dtype=vec3),
        axis: wp.array(dtype=vec3),
        revolute: wp.array(dtype=wp.int32),
        cols: wp.array(dtype=wp.int32),
        tip_rot: mat33,
        tip_pos: vec3,
    ):
        """Error (6), Jacobian (6, dof) and weighted cost at ``q``, as ``solver._evaluate``."""
        rot = wp.identity(3, f)
        pos = vec3()
        jac = jac_t()  # coordinates off the chain keep zero columns
        origins = jac_t()  # rows 0-2: the joint origins, per coordinate
        for j in range(joints):
            c = cols[j]
            qj = q[c]
            local = place_rot[j] + wp.sin(qj) * place_rot_k[j] + (f(1.0) - wp.cos(qj)) * place_rot_k2[j]
            pos = pos + rot * (place_pos[j] + qj * slide[j])
            rot = rot * local
            axis_world = rot * axis[j]
            for k in range(3):
                jac[3 + k, c] = axis_world[k]
                origins[k, c] = pos[k]
        tip_p = pos + rot * tip_pos
        for j in range(joints):
            c = cols[j]
            axis_world = vec3(jac[3, c], jac[4, c], jac[5, c])
            linear = axis_world
            if revolute[j] != 0:
                linear = wp.cross(axis_world, tip_p - vec3(origins[0, c], origins[1, c], origins[2, c]))
            else:
                for k in range(3):
                    jac[3 + k, c] = f(0.0)
            for k in range(3):
                jac[k, c] = linear[k]
        dp = target_pos - tip_p
        dr = so3_log(target_rot * wp.transpose(rot * tip_rot))
        e = vec6(dp[0], dp[1], dp[2], dr[0], dr[1], dr[2])
        cost = f(0.0)
        for k in range(6):
            cost = cost + w[k] * e[k] * e[k]
        return e, jac, cost

    @wp.func
    def errors_of(e: vec6, w: vec6) -> vec2:
        """Position [m] and orientation [rad] error norms over the weighted axes."""
        pos = f(0.0)
        ori = f(0.0)
        for k in range(3):
            if w[k] > f(0.0):
                pos = pos + e[k] * e[k]
            if w[3 + k] > f(0.0):
                ori = ori + e[3 + k] * e[3 + k]
        return vec2(wp.sqrt(pos), wp.sqrt(ori))

    @wp.func
    def score_of(e: vec6, w: vec6, tolerance: vec2) -> f:
        """Error over tolerance, on the weighted axes: ``max(|e_p| / tol_p, |e_r| / tol_o)``; <= 1 is success."""
        err = errors_of(e, w)
        return wp.max(err[0] / tolerance[0], err[1] / tolerance[1])

    @wp.func
    def damped_solve(jac: jac_t, e: vec6, w: vec6, damping: f, free: vecq, pull: vecq, use_pull: wp.int32):
        """``(H + damping I)^-1 J_f^T W e`` with ``H = J_f^T W J_f``, ``J_f`` the columns where ``free`` is 1
        (the others 0), by Cholesky, plus ``pull - (H + damping I)^-1 H pull`` if ``use_pull`` (as
        ``solver._damped_step``); and 1 if every pivot was positive, else 0 (a rejected step)."""
        h = hess_t()
        y = vecq()
        z = vecq()  # H pull, then its damped solve
        for a in range(dof):
            t = f(0.0)
            for k in range(6):
                t = t + jac[k, a] * w[k] * e[k]
            y[a] = t * free[a]
            for b in range(a + 1):
                s = f(0.0)
                for k in range(6):
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
        for a in range(dof):  # lower triangle in place
            s = h[a, a]
            for b in range(a):
                s = s - h[a, b] * h[a, b]
            if not (s > f(0.0)):
                ok = 0
                s = f(1.0)
            d = wp.sqrt(s)
            h[a, a] = d
            for r in range(a + 1, dof):
                t = h[r, a]
                for b in range(a):
                    t = t - h[r, b] * h[a, b]
                h[r, a] = t / d
        for a in range(dof):
            t = y[a]
            for b in range(a):
                t = t - h[a, b] * y[b]
            y[a] = t / h[a, a]
        for a in range(dof - 1, -1, -1):
            t = y[a]
            for b in range(a + 1, dof):
                t = t - h[b, a] * y[b]
            y[a] = t / h[a, a]
        if use_pull != 0:
            for a in range(dof):
                t = z[a]
                for b in range(a):
                    t = t - h[a, b] * z[b]
                z[a] = t / h[a, a]
            for a in range(dof - 1, -1, -1):
                t = z[a]
                for b in range(a + 1, dof):
                    t = t - h[b, a] * z[b]
                z[a] = t / h[a, a]
            for a in range(dof):
                y[a] = y[a] + pull[a] - z[a]
        return y, ok

    @wp.func
    def rank_of(score: f, q: vecq, goal: vecq, use_pull: wp.int32) -> f:
        """The rank of ``solver._Problem._record``: ``score``, or for a success with a posture ``d / (1 + d)``
        with ``d = |q - posture|`` (below 1: the closer success ranks first)."""
        if use_pull != 0 and score <= f(1.0):
            d = wp.length(q - goal)
            return d / (f(1.0) + d)
        return score

    @wp.func
    def wrap(x: f, lower: f, upper: f, continuous: wp.int32) -> f:
        """``Robot.wrap`` of one coordinate: continuous joints to (-pi, pi], the others clamped to the limits."""
        if continuous != 0:
            m = wp.mod(f(pi) - x, f(two_pi))  # C fmod: the sign of the dividend; torch.remainder: the divisor's
            if m < f(0.0):
                m = m + f(two_pi)
            return f(pi) - m
        return wp.min(wp.max(x, lower), upper)

    return SimpleNamespace(
        so3_log=so3_log,
        evaluate=evaluate,
        errors_of=errors_of,
        score_of=score_of,
        damped_solve=damped_solve,
        rank_of=rank_of,
        wrap=wrap,
    )


@functools.cache
def lm_block_kernel(dof: int, joints: int, dtype: torch.dtype) -> wp.Kernel:
    """The LM block kernel for ``dof`` coordinates, a chain of ``joints`` joints and ``dtype`` floats.

    Cached per ``(dof, joints, dtype)``; warp caches the compiled module on disk across processes.
    Launch it through :class:`BlockLauncher`, which binds the arguments in this order.
    """
    fns = lm_functions(dof, joints, dtype)
    evaluate, score_of, errors_of = fns.evaluate, fns.score_of, fns.errors_of
    damped_solve, rank_of, wrap = fns.damped_solve, fns.rank_of, fns.wrap
    f, vec2, vec3, vec6, mat33 = warp_types(dtype)
    vecq = wp.types.vector(dof, f)
    floor = damping_floor(dtype)

    @wp.kernel(module="unique")
    def lm_block(
        # the chain (Robot buffers)
        place_rot: wp.array(dtype=mat33),
        place_rot_k: wp.array(dtype=mat33),
        place_rot_k2: wp.array(dtype=mat33),
        place_pos: wp.array(dtype=vec3),
        slide: wp.array(dtype=vec3),
        axis: wp.array(dtype=vec3),
        revolute: wp.array(dtype=wp.int32),
        cols: wp.array(dtype=wp.int32),
        tip_rot: wp.array(dtype=mat33),
        tip_pos: wp.array(dtype=vec3),
        lower: wp.array(dtype=f),
        upper: wp.array(dtype=f),
        continuous: wp.array(dtype=wp.int32),
        # the slots' problem
        target_rot: wp.array(dtype=mat33),
        target_pos: wp.array(dtype=vec3),
        weights: wp.array(dtype=vec6),
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
        trot = target_rot[i]
        tpos = target_pos[i]
        w = weights[i]
        tol = tolerance[i]
        t_rot = tip_rot[0]
        t_pos = tip_pos[0]
        q = vecq()
        bq = vecq()
        ones = vecq()
        goal = vecq()
        for a in range(dof):
            q[a] = q_state[i, a]
            bq[a] = best_q[i, a]
            ones[a] = f(1.0)
        use_pull = has_posture[i]
        if use_pull != 0:
            for a in range(dof):
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
            for a in range(dof):
                u = f(wp.randf(state))
                q[a] = wrap(lower[a] * (f(1.0) - u) + upper[a] * u, lower[a], upper[a], continuous[a])
            drawn = 2

        e, jac, cost = evaluate(
            q, trot, tpos, w, place_rot, place_rot_k, place_rot_k2, place_pos, slide, axis, revolute, cols, t_rot, t_pos
        )
        if it == 0:  # the start: record the initial configuration, open the first progress window
            last = cost
            best = f(wp.inf)
            berr = vec2(f(wp.inf), f(wp.inf))
            bq = q
            age = 0
            score = score_of(e, w, tol)
            rank = rank_of(score, q, goal, use_pull)
            if rank < best:
                best = rank
                bq = q
                berr = errors_of(e, w)
            if score <= f(1.0):
                st = SOLVED

        for _k in range(block):
            if st != RUNNING or it >= limit:
                break
            if it == 0 and drawn != 2:  # the first iteration of this admission: seed the restart stream
                state = wp.rand_init(rng_seed[i], wp.int32(state))
            # the damped step, then one active-set pass for the joints it pushes past a limit
            damping = mu * cost + f(floor)
            pull = vecq()
            if use_pull != 0:
                for a in range(dof):
                    pull[a] = f(_POSTURE_GAIN) * (goal[a] - q[a])
            dq, ok = damped_solve(jac, e, w, damping, ones, pull, use_pull)
            q_new = q
            if ok != 0:
                free = ones
                dq_blocked = vecq()
                any_blocked = wp.int32(0)
                for a in range(dof):
                    target_q = q[a] + dq[a]
                    if continuous[a] == 0 and (target_q < lower[a] or target_q > upper[a]):
                        free[a] = f(0.0)
                        dq_blocked[a] = wrap(target_q, lower[a], upper[a], continuous[a]) - q[a]
                        any_blocked = 1
                if any_blocked != 0:
                    e_rest = e - jac * dq_blocked
                    dq_free, ok = damped_solve(jac, e_rest, w, damping, free, pull, use_pull)
                    for a in range(dof):
                        dq[a] = dq_blocked[a] + free[a] * dq_free[a]
                for a in range(dof):
                    q_new[a] = wrap(q[a] + dq[a], lower[a], upper[a], continuous[a])
            accept = wp.int32(0)
            if ok != 0:
                e_new, jac_new, cost_new = evaluate(
                    q_new,
                    trot,
                    tpos,
                    w,
                    place_rot,
                    place_rot_k,
                    place_rot_k2,
                    place_pos,
                    slide,
                    axis,
                    revolute,
                    cols,
                    t_rot,
                    t_pos,
                )
                if cost_new < cost:
                    accept = 1
                    q = q_new
                    e = e_new
                    jac = jac_new
                    cost = cost_new
            mu = wp.clamp(mu * (f(_MU_DECREASE) if accept != 0 else f(_MU_INCREASE)), f(_MU_MIN), f(_MU_MAX))
            it += 1
            age += 1
            # record: keep the best configuration, stop at the first success
            score = score_of(e, w, tol)
            rank = rank_of(score, q, goal, use_pull)
            if rank < best:
                best = rank
                bq = q
                berr = errors_of(e, w)
            if score <= f(1.0):
                st = SOLVED
            elif it % every == 0 and it < limit:  # progress check: restart a stalled seed at random
                if cost > f(_PROGRESS) * last or age >= patience or mu >= f(_MU_MAX):
                    for a in range(dof):
                        u = f(wp.randf(state))
                        x = lower[a] * (f(1.0) - u) + upper[a] * u  # as Robot.random_q, then wrapped
                        q[a] = wrap(x, lower[a], upper[a], continuous[a])
                    mu = f(_MU_INIT)
                    age = 0
                    e, jac, cost = evaluate(
                        q,
                        trot,
                        tpos,
                        w,
                        place_rot,
                        place_rot_k,
                        place_rot_k2,
                        place_pos,
                        slide,
                        axis,
                        revolute,
                        cols,
                        t_rot,
                        t_pos,
                    )
                last = cost
        if st == RUNNING and it >= limit:
            st = EXHAUSTED

        for a in range(dof):
            q_state[i, a] = q[a]
            best_q[i, a] = bq[a]
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
