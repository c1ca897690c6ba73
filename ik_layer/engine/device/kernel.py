"""The fused Levenberg-Marquardt block kernel: one warp thread per slot, ``block`` iterations per launch.

One launch advances every RUNNING slot by up to ``block`` iterations of the eager solver's step
(:meth:`ik_layer.reference._LMState.step`) and bookkeeping (:meth:`ik_layer.reference._Solve._record`,
the progress checks and restarts of :meth:`ik_layer.reference._Solve.run`), for one seed per slot:

1. at the block start: forward kinematics, Jacobian (``LOCAL_WORLD_ALIGNED``, rows [linear;
   angular] per end-effector frame) and error ``e = [p_t - p; log(R_t R^T)]`` per frame at ``q``; a
   slot that meets its tolerances before its first iteration is SOLVED with 0 iterations;
2. the damped step ``(H + (mu cost + floor) I) dq = J^T W e`` (``H = J^T W J``) by ``L D L^T`` (Cholesky
   without square roots), one active-set pass for the joints it pushes past a limit, the candidate
   ``wrap(integrate(q, dq))``; a slot with secondary terms (:mod:`ik_layer.terms`: posture, centring,
   manipulability) adds ``pull - (H + damping I)^-1 H pull``, ``pull = -sum_k gain_k grad s_k``, to both solves
   (``ik_layer.reference._damped_step``: the pull projected on the null space);
3. the candidate is kept iff it lowers the cost (``mu *= LM.mu_decrease``), else ``mu *= LM.mu_increase``
   (:data:`ik_layer.core.lm.LM`); with a pull, a pulled candidate that does not lower the cost gives way to the
   plain step's, if that one does;
4. the score ``max(|e_p| / tol_p, |e_r| / tol_o)`` over the weighted axes of the worst frame: <= 1 is
   SOLVED, else the slot keeps its best configuration so far; ``best_score`` holds the rank of
   ``_Solve._record``: the score, or :func:`ik_layer.terms.rank_of_cost` (in (0.25, 0.75)) of the secondary cost for
   a success with secondary terms, so that among seeds of one target solved together the cheapest ranks first;
5. every ``check_every`` iterations a slot that progressed too little, ran ``restart_after``
   iterations or stalled at the largest damping restarts from a uniform random configuration;
6. a slot out of budget is EXHAUSTED (its ``best_q`` is the answer).

With the collision term (:mod:`~ik_layer.engine.device.collision_step`, a slot's scene or ``self_collision``) a
configuration within the pose tolerances but closer than the margin ranks ``1 + (margin - least) / activation``:
no success. Such a seed polishes, stepping down the collision cost (and the secondary terms') in the null space,
until it is free; one that stops polishing in collision (or cannot polish: no null space, no secondary terms)
restarts at once, with probability ``LM.pooled_restarts`` from one of the collision-free answers of its request
that the host keeps in the slot's start pool (``pool``: ``pool_count`` of ``POOL_STARTS`` rows of ``pool_q``),
else at random; while its pool is still empty it waits, once, for the next launch (the host fills pools between
launches) instead of restarting at random. A seed drawn at random takes a pooled start the same way where its
pool holds some (the scheduler admits a few targets of such a request first, to fill it). A free configuration
within the tolerances is a success at once unless secondary terms are to polish: the collision term gates and
repairs, it does not pull on the way (which would cost its evaluation at every iteration).

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
its target (:meth:`ik_layer.reference._Solve.random_starts`).

The slot state lives in torch tensors (see :mod:`ik_layer.engine.slots`) that the kernel reads and
writes through zero-copy warp views; nothing syncs with the host inside a launch. The same source
compiles for the CPU and for CUDA.
"""

# No `from __future__ import annotations`: warp reads the kernels' annotations as live types.
import functools
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch
import warp as wp

from ik_layer.core.lm import LM
from ik_layer.core.result import EXHAUSTED, SOLVED
from ik_layer.engine.device.collision_step import SphereLayout, collision_functions, collision_structs
from ik_layer.engine.device.configuration import configuration_functions
from ik_layer.engine.device.damped_step import step_functions
from ik_layer.engine.device.pose_cost import pose_cost_functions
from ik_layer.engine.device.restarts import restart_functions
from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.warp_chain import KERNEL_OPTIONS, warp_types
from ik_layer.terms.kernel_sum import KernelTerm, secondary_function

if TYPE_CHECKING:
    from warp._src.codegen import Struct  # what @wp.struct returns; warp exports no public name for it

__all__ = [
    "EMPTY",
    "DRAWN_START",
    "EXHAUSTED",
    "GIVEN_START",
    "NEAREST_START",
    "POOL_STARTS",
    "RUNNING",
    "SOLVED",
    "START_POOLS",
    "damping_floor",
    "lm_block_kernel",
    "lm_functions",
    "slot_structs",
]

# Slot status, as the kernel reads and writes it (int32).
# SOLVED (1): met both tolerances; best_q is the solution, iterations the count that reached it. EXHAUSTED (2): used
# its whole budget without success; best_q is the lowest-score configuration seen (the codes an answer reports).
RUNNING = 0  # still iterating
EMPTY = 3  # holds no problem (never admitted, or retired); the kernel skips it like SOLVED and EXHAUSTED

# How a slot starts (its random_start, int32), read at its first launch.
GIVEN_START = 0  # from its q, brought inside the limits
DRAWN_START = 1  # uniform in the limits, from its restart stream (2 once drawn)
NEAREST_START = 3  # the robot's seed table's configuration nearest its targets (ik_layer.core.seeding)

POOL_STARTS = 32
"""The collision-free answers a start pool holds (the latest, by the order the host adds them)."""

START_POOLS = 64
"""The start pools of an engine: one per request in flight with a collision term, while they last."""

_SMALL_ANGLE_SQ = 1e-8  # as ik_layer.model.floating: below this squared angle, series replace the closed forms


def damping_floor(dtype: torch.dtype) -> float:
    """The absolute damping added to ``mu * cost``, as the eager solver's: ``max(1e-9, 100 eps)``."""
    return LM.damping_floor(dtype)


@functools.cache
def slot_structs(dtype: torch.dtype) -> "tuple[Struct, Struct]":
    """The warp structs of the slots' problem and state for ``dtype`` floats, as the block kernel binds them: one
    array per field, the slot first (see :class:`~ik_layer.engine.slots.Slots`, which fills them)."""
    f, vec2, vec3, vec6, mat33 = warp_types(dtype)

    @wp.struct
    class SlotProblem:
        target_rot: wp.array2d(dtype=mat33)
        target_pos: wp.array2d(dtype=vec3)
        weights: wp.array2d(dtype=vec6)
        tolerance: wp.array(dtype=vec2)
        budget: wp.array(dtype=wp.int32)
        restart_after: wp.array(dtype=wp.int32)
        check_every: wp.array(dtype=wp.int32)
        data: wp.array2d(dtype=f)  # the secondary terms' per-target data, each term's columns in turn
        gains: wp.array2d(dtype=f)  # the secondary terms' gains, in the engine's order of them
        scene: wp.array(dtype=wp.vec2i)
        self_collision: wp.array(dtype=wp.int32)
        collision: wp.array(dtype=vec2)
        pool: wp.array(dtype=wp.int32)
        pool_q: wp.array2d(dtype=f)  # (not per slot) the engine's start pools, POOL_STARTS rows each
        pool_count: wp.array(dtype=wp.int32)  # (not per slot) the answers each pool holds
        table_q: wp.array2d(dtype=f)  # (not per slot) the robot's seed table (ik_layer.core.seeding): (M, nq)
        table_pose: wp.array3d(dtype=f)  # (not per slot) and its frames' poses (M, F, 12)

    @wp.struct
    class SlotState:
        random_start: wp.array(dtype=wp.int32)
        q: wp.array2d(dtype=f)
        mu: wp.array(dtype=f)
        best_q: wp.array2d(dtype=f)
        best_score: wp.array(dtype=f)
        iterations: wp.array(dtype=wp.int32)
        status: wp.array(dtype=wp.int32)
        rng: wp.array(dtype=wp.uint32)
        rng_seed: wp.array(dtype=wp.int32)
        check_cost: wp.array(dtype=f)
        age: wp.array(dtype=wp.int32)
        cost: wp.array(dtype=f)
        best_error: wp.array(dtype=vec2)
        polish_from: wp.array(dtype=wp.int32)
        polish_scale: wp.array(dtype=f)
        best_least: wp.array(dtype=f)
        best_pair: wp.array(dtype=wp.vec2i)

    return SlotProblem, SlotState


@functools.cache
def lm_functions(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """Every warp function of one LM step for a robot of ``layout`` and ``dtype`` floats, by concept:
    :mod:`~ik_layer.engine.device.pose_cost`, :mod:`~ik_layer.engine.device.damped_step`,
    :mod:`~ik_layer.engine.device.configuration` and :mod:`~ik_layer.engine.device.restarts`. :func:`lm_block_kernel`
    is built from them, and so is the bake-off's one-step kernel (``bench/kernel_bakeoff.py``)."""
    return SimpleNamespace(
        **vars(pose_cost_functions(layout, dtype)),
        **vars(step_functions(layout, dtype)),
        **vars(configuration_functions(layout, dtype)),
        **vars(restart_functions(layout, dtype)),
    )


@functools.cache
def lm_block_kernel(
    layout: Layout,
    dtype: torch.dtype,
    lazy_jacobian: bool = True,
    terms: tuple[KernelTerm, ...] = (),
    sphere_layout: SphereLayout | None = None,
) -> wp.Kernel:
    """The LM block kernel for a robot of ``layout`` and ``dtype`` floats, with the secondary ``terms``
    (:meth:`~ik_layer.engine.slots.Slots.kernel_terms`; each slot's gains switch them on) compiled in, and the
    collision term (:mod:`~ik_layer.engine.device.collision_step`) for the robot's collision spheres of
    ``sphere_layout`` where given (each slot's scene and ``self_collision`` switch it on).

    ``lazy_jacobian`` (the tensor store's, for GPUs; the default, which GPU bundles compile ahead): a candidate
    step is measured by forward kinematics alone and the Jacobian is taken once the step is accepted, at the next
    iteration: a second walk of the chains per accepted step, but no second Jacobian alive beside the first, so
    far fewer values per thread (``bench/kernel_resources.py``). Otherwise (the host store's, for CPUs) each
    candidate's one walk takes its Jacobian too. Both give the same answers, bit for bit.

    Cached per ``(layout, dtype, lazy_jacobian, terms, sphere_layout)``; warp caches the compiled module on disk across
    processes.
    Launch it through :class:`~ik_layer.engine.launch.BlockLauncher`, which binds the slots' two structs.
    """
    fns = lm_functions(layout, dtype)
    evaluate, residual, score_of, candidate = fns.evaluate, fns.residual, fns.score_of, fns.candidate
    wrapped, draw_start, nearest_start, record = fns.wrapped, fns.draw_start, fns.nearest_start, fns.record
    secondary = secondary_function(layout, dtype, terms)
    with_terms = bool(terms)
    with_collision = sphere_layout is not None
    pulls = with_terms or with_collision  # compiled in: seeds may pull in the null space and polish
    collision = None if sphere_layout is None else collision_functions(layout, sphere_layout, dtype)
    collide = None if collision is None else collision.collide
    clearance = None if collision is None else collision.clearance
    Spheres, Obstacles = collision_structs(dtype)
    collision_gain = LM.collision_gain
    ranks_with_jacobian = any(kernel_term.term.needs_jacobian for kernel_term in terms)
    gain_columns = 1 + max((kernel_term.index for kernel_term in terms), default=-1)  # the gains the terms read
    t = kernel_types(layout, dtype)
    f, vec2, Chain = t.f, t.vec2, t.Chain
    frames, nq, dof = layout.frames, layout.nq, layout.dof
    vecq, vect, vecr, jac_t, mat33, vec3 = t.vecq, t.vect, t.vecr, t.jac_t, t.mat33, t.vec3
    SlotProblem, SlotState = slot_structs(dtype)
    floor = damping_floor(dtype)
    mu_init, mu_min, mu_max, mu_decrease, mu_increase = LM.mu_init, LM.mu_min, LM.mu_max, LM.mu_decrease, LM.mu_increase
    progress, polish_progress, polish_iterations = LM.progress, LM.polish_progress, LM.polish_iterations
    polish_in_collision = LM.polish_in_collision
    polish_slack, polish_min_scale, polish_max_scale = LM.polish_slack, LM.polish_min_scale, LM.polish_max_scale
    pooled_restarts = LM.pooled_restarts

    @wp.func
    def pooled_start(
        q: vecq, state: wp.uint32, pool: wp.int32, pool_q: wp.array2d(dtype=f), pool_count: wp.array(dtype=wp.int32)
    ):
        """``q``, replaced with probability ``LM.pooled_restarts`` by one of the free answers start pool ``pool``
        holds (if any); the restart stream after its draws, and 1 if a pooled start was taken."""
        taken = wp.int32(0)
        stored = pool_count[pool]
        if stored > 0 and f(wp.randf(state)) < f(pooled_restarts):
            row = pool * wp.static(POOL_STARTS) + wp.randi(state, 0, stored)
            for a in range(nq):
                q[a] = pool_q[row, a]
            taken = 1
        return q, state, taken

    @wp.func
    def rank_of_cost(s: f) -> f:
        """:func:`ik_layer.terms.rank_of_cost`: a success's rank from its secondary cost, in (0.25, 0.75)."""
        return f(0.5) + f(0.25) * s / (f(1.0) + wp.abs(s))

    @wp.func
    def terms_at(
        q: vecq,
        jac: jac_t,
        data: wp.array2d(dtype=f),
        gains: wp.array2d(dtype=f),
        i: int,
        use_terms: wp.int32,
        chain: Chain,
        links_chain: Chain,
        spheres: Spheres,
        obstacles: Obstacles,
        scene: wp.vec2i,
        self_on: wp.int32,
        limits: vec2,
    ):
        """The gradient (dof) and cost at ``q`` of the secondary terms (``jac`` at ``q`` where a term reads it) and
        of the collision term (scene ``scene``, ``self_on``, ``limits`` = (margin, activation)), the least
        collision distance (+inf without collision), and 1 where the secondary terms' gradient alone is zero, as
        ``ik_layer.reference._Solve.secondary``."""
        grad = vect()
        s = f(0.0)
        least = f(wp.inf)
        still = wp.int32(1)
        if wp.static(with_terms):  # noqa: SIM102 (a static branch: compiled in or out)
            if use_terms != 0:
                grad, s = secondary(q, jac, data, gains, i, chain)
                for a in range(dof):
                    if grad[a] != f(0.0):
                        still = 0
        if wp.static(with_collision):  # noqa: SIM102
            if self_on != 0 or scene[1] > 0:
                push, cost, least = collide(q, links_chain, spheres, obstacles, scene, self_on, limits[0], limits[1])
                grad = grad + f(collision_gain) * push
                s = s + f(collision_gain) * cost
        return grad, s, least, still

    @wp.func
    def gated(score: f, least: f, limits: vec2) -> f:
        """``score``, or ``1 + (margin - least) / activation`` for a configuration within the pose tolerances but
        closer than the margin (``ik_layer.reference._Solve.gated``)."""
        if score <= f(1.0) and least < limits[0]:
            return f(1.0) + (limits[0] - least) / limits[1]
        return score

    @wp.func
    def rank_at(
        score: f,
        q: vecq,
        jac: jac_t,
        data: wp.array2d(dtype=f),
        gains: wp.array2d(dtype=f),
        use_pull: wp.int32,
        use_terms: wp.int32,
        i: int,
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        w: vecr,
        chain: Chain,
        links_chain: Chain,
        spheres: Spheres,
        obstacles: Obstacles,
        scene: wp.vec2i,
        self_on: wp.int32,
        limits: vec2,
    ):
        """The rank of ``q`` at pose score ``score``: the score; for a configuration within the pose tolerances
        with secondary or collision terms, :func:`gated` of it, or for a success :func:`ik_layer.terms.rank_of_cost`
        of their cost; 1 if that success has nothing to polish (the secondary terms' gradient is zero there: the
        collision term only gates), else 0. With the collision term alone (no secondary terms) only the gate
        counts: the least distance by ``clearance`` (exact if free, and then its pair, returned; a success ranks
        ``rank_of_cost(0)``; a colliding one polishes, where it can, from the next step), else NaN and -1, -1."""
        rank = score
        settled = wp.int32(0)
        least = f(wp.nan)
        pair = wp.vec2i(-1, -1)
        if wp.static(with_collision):  # noqa: SIM102
            if use_terms == 0 and use_pull != 0 and score <= f(1.0):
                least, pair = clearance(q, links_chain, spheres, obstacles, scene, self_on, limits[0])
                rank = gated(score, least, limits)
                if rank <= f(1.0):
                    rank = rank_of_cost(f(0.0))
                    settled = 1
                return rank, settled, least, pair
        if wp.static(pulls):  # noqa: SIM102 (a static branch: compiled in or out)
            if use_pull != 0 and score <= f(1.0):
                jac_q = jac
                if wp.static(ranks_with_jacobian):  # the lazy Jacobian may lag q: taken afresh, once per success
                    _e, jac_q, _cost = evaluate(q, i, target_rot, target_pos, w, chain)
                _grad, s, least_in_reach, still = terms_at(
                    q, jac_q, data, gains, i, use_terms, chain, links_chain, spheres, obstacles, scene, self_on, limits
                )
                rank = gated(score, least_in_reach, limits)
                if rank <= f(1.0):
                    rank = rank_of_cost(s)
                    settled = still
        return rank, settled, least, pair

    @wp.kernel(**KERNEL_OPTIONS)
    def lm_block(
        chain: Chain,  # the robot's chains and the joints' limits
        problem: SlotProblem,
        slot: SlotState,
        links_chain: Chain,  # the chains of the links carrying collision spheres (unread without collision)
        spheres: Spheres,  # the robot's collision spheres and self-collision pairs
        obstacles: Obstacles,  # the obstacle table the slots' scenes index
        block: wp.int32,  # iterations in this launch
        first: wp.int32,  # the slot of thread 0: a launch covers slots first, first + 1, ...
    ):
        target_rot, target_pos, weights, tolerance = (
            problem.target_rot,
            problem.target_pos,
            problem.weights,
            problem.tolerance,
        )
        budget, restart_after, check_every = problem.budget, problem.restart_after, problem.check_every
        random_start, q_state, mu_state, best_q, best_score = (
            slot.random_start,
            slot.q,
            slot.mu,
            slot.best_q,
            slot.best_score,
        )
        iterations, status, rng, rng_seed = slot.iterations, slot.status, slot.rng, slot.rng_seed
        check_cost, age_state, cost_state, best_error = slot.check_cost, slot.age, slot.cost, slot.best_error
        polish_from, polish_scale = slot.polish_from, slot.polish_scale
        i = first + wp.tid()
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
        for a in range(nq):
            q[a] = q_state[i, a]
            bq_best[a] = best_q[i, a]
        data, gains = problem.data, problem.gains
        use_terms = wp.int32(0)
        if wp.static(with_terms):
            for k in range(wp.static(gain_columns)):
                if gains[i, k] != f(0.0):
                    use_terms = 1
        scene = wp.vec2i()
        pool = wp.int32(-1)
        self_on = wp.int32(0)
        limits = vec2(f(0.0), f(1.0))
        use_pull = use_terms
        polishes = wp.int32(1)  # 0: a colliding success cannot move in the pose's null space (nor has terms)
        if wp.static(with_collision):
            scene = problem.scene[i]
            pool = problem.pool[i]
            self_on = problem.self_collision[i]
            limits = problem.collision[i]
            if self_on != 0 or scene[1] > 0:
                use_pull = 1
            if use_terms == 0:
                rows = wp.int32(0)
                for k in range(6 * frames):
                    if w[k] > f(0.0):
                        rows += 1
                if rows >= dof:
                    polishes = 0
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
        polish = polish_from[i]  # the iteration of the seed's first success with secondary terms; -1, or -2: stuck
        # (in collision, restarting), -3: stuck and waiting for the next launch, once, for its start pool to fill
        scale = polish_scale[i]  # the polish's step, a fraction of the pull
        drawn = random_start[i]
        if it == 0 and drawn == 1:  # a start drawn in the limits (as Robot.random_q), first from the restart stream
            state = wp.rand_init(rng_seed[i], wp.int32(state))
            q, state = draw_start(q, state, i, target_rot, target_pos, w, chain)
            drawn = 2
            if wp.static(with_collision):  # noqa: SIM102
                if pool >= 0:  # mostly from a free answer of the solve, once there are some (see the docstring)
                    q, state, _taken = pooled_start(q, state, pool, problem.pool_q, problem.pool_count)
        elif it == 0 and drawn == 0:  # a given start, brought inside the limits as Robot.wrap does
            q = wrapped(q, chain)
        elif it == 0 and drawn == 3:  # the seed table's nearest (its stream seeded at the first iteration)
            q = nearest_start(q, i, target_rot, target_pos, w, problem.table_q, problem.table_pose)

        e, jac, cost = evaluate(q, i, target_rot, target_pos, w, chain)
        least = f(wp.nan)  # at bq_best, once the seed stops (NaN: not measured), and its pair
        pair = wp.vec2i(-1, -1)
        stale = wp.int32(0)  # lazy Jacobian: 1 once q moved and jac is not yet its Jacobian
        if it == 0:  # the start: record the initial configuration, open the first progress window
            last = cost
            best = f(wp.inf)
            berr = vec2(f(wp.inf), f(wp.inf))
            bq_best = q
            age = 0
            score = score_of(e, w, tol)
            rank, settled, at_least, at_pair = rank_at(
                score, q, jac, data, gains, use_pull, use_terms, i, target_rot, target_pos, w, chain,
                links_chain, spheres, obstacles, scene, self_on, limits,
            )  # fmt: skip
            best, bq_best, berr = record(rank, q, e, w, best, bq_best, berr)
            if score <= f(1.0):
                if use_pull == 0 or settled != 0:
                    st = SOLVED
                    least, pair = at_least, at_pair
                elif polishes != 0:  # with secondary or collision terms a success polishes first
                    polish = 0
                    scale = f(1.0)
                else:  # in collision with no null space to move in: restarted at the next check
                    polish = -2
                    age = patience

        held = wp.int32(0)  # polishing: 1 while held_pull and held_cost are the terms' at q (q unchanged or from them)
        held_pull = vect()
        held_cost = f(0.0)
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
            s_now = f(0.0)
            if wp.static(pulls):  # noqa: SIM102 (a static branch: compiled in or out)
                if polish >= 0:  # polishing: the secondary terms and the collision term
                    if held == 0:
                        grad, held_cost, _least, _still = terms_at(
                            q, jac, data, gains, i, use_terms, chain, links_chain, spheres, obstacles, scene, self_on,
                            limits,
                        )  # fmt: skip
                        held_pull = -grad
                        held = 1
                    pull = held_pull
                    s_now = held_cost
            if wp.static(with_terms):  # noqa: SIM102
                if polish < 0 and use_terms != 0:  # on the way: the secondary terms only
                    grad, s_now = secondary(q, jac, data, gains, i, chain)
                    pull = -grad
            if wp.static(pulls):  # noqa: SIM102
                if polish >= 0:  # see LM: a pulled step at the polish's scale within tolerance, else a correction
                    done = wp.int32(0)
                    kept = wp.int32(0)
                    within = wp.int32(0)
                    step_pull = vect()
                    if score_of(e, w, tol) <= f(1.0):
                        within = 1
                        step_pull = scale * pull
                    q_new, ok = candidate(q, e, jac, w, damping, step_pull, within, chain)
                    if ok != 0:
                        e_new, jac_new, cost_new = evaluate(q_new, i, target_rot, target_pos, w, chain)
                        score = score_of(e_new, w, tol)
                        # the terms at q_new, where the step may be kept: within tolerance, lower terms; else a
                        # correction that lowers the pose cost
                        measure = wp.int32(0)
                        if within != 0:
                            if score <= f(polish_slack):
                                measure = 1
                        elif cost_new < cost:
                            measure = 1
                        grad_new = vect()
                        s_new = f(0.0)
                        least_new = f(wp.inf)
                        if measure != 0:
                            grad_new, s_new, least_new, _still_new = terms_at(
                                q_new, jac_new, data, gains, i, use_terms, chain, links_chain, spheres, obstacles,
                                scene, self_on, limits,
                            )  # fmt: skip
                            if within == 0 or s_new < s_now:
                                kept = 1
                        if kept != 0:
                            little = s_now - s_new <= f(polish_progress) * (f(1.0) + wp.abs(s_now))
                            if within != 0 and score <= f(1.0) and little and scale <= f(1.0):
                                done = 1  # (a larger step may overshoot to a near tie)
                            if within != 0 and score <= f(1.0) and least_new >= limits[0] and use_terms == 0:
                                done = 1  # collision alone: free is enough
                            q = q_new
                            e = e_new
                            jac = jac_new
                            cost = cost_new
                            stale = 0
                            held_pull = -grad_new  # the terms at the new q: the next polishing step's
                            held_cost = s_new
                            rank = gated(score, least_new, limits)
                            if rank <= f(1.0):
                                rank = rank_of_cost(s_new)
                            best, bq_best, berr = record(rank, q, e, w, best, bq_best, berr)
                    if within != 0:
                        if kept != 0:
                            scale = wp.min(f(2.0) * scale, f(polish_max_scale))
                        else:
                            scale = f(0.25) * scale
                            if scale < f(polish_min_scale):
                                done = 1
                    elif kept == 0:  # a correction that fails: the last success stands
                        done = 1
                    it += 1
                    age += 1
                    if best >= f(1.0) and it - polish >= polish_in_collision:  # no success yet: still colliding
                        done = 1
                    if done != 0 or it - polish >= polish_iterations:
                        if best < f(1.0):  # a success recorded (collision-free)
                            st = SOLVED
                        else:  # polished to no success (in collision): restarted at the next progress check
                            polish = -2
                            age = patience
                    continue
            held = 0  # not polishing: q moves on its own
            # the pulled step; if it does not lower the cost, the plain one (the pull must not hold the seed back)
            accept = wp.int32(0)
            for attempt in range(2):
                if accept == 0 and (attempt == 0 or use_terms != 0):
                    pulled = use_terms if attempt == 0 else wp.int32(0)
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
            rank, settled, at_least, at_pair = rank_at(
                score, q, jac, data, gains, use_pull, use_terms, i, target_rot, target_pos, w, chain,
                links_chain, spheres, obstacles, scene, self_on, limits,
            )  # fmt: skip
            best, bq_best, berr = record(rank, q, e, w, best, bq_best, berr)
            if score <= f(1.0) and (use_pull == 0 or settled != 0):
                st = SOLVED
                least, pair = at_least, at_pair
            elif score <= f(1.0) and polish == -1:  # with secondary or collision terms: polish from the next one
                if polishes != 0:
                    polish = it
                    scale = f(1.0)
                else:  # in collision with no null space to move in: restarted at the next check
                    polish = -2
                    age = patience
            # progress check: restart at random; a seed stuck in collision restarts at once
            if st == RUNNING and polish < 0 and (it % every == 0 or polish <= -2) and it < limit:
                if cost > f(progress) * last or age >= patience or mu >= f(mu_max):
                    pooled = wp.int32(0)
                    wait = wp.int32(0)
                    if wp.static(with_collision):  # noqa: SIM102
                        if polish <= -2 and pool >= 0:  # stuck in collision: mostly from a free answer of the solve
                            q, state, pooled = pooled_start(q, state, pool, problem.pool_q, problem.pool_count)
                            if problem.pool_count[pool] == 0 and polish == -2:  # none yet: wait, once, for more
                                wait = 1
                    if wait != 0:
                        polish = -3
                        break
                    if pooled == 0:
                        q, state = draw_start(q, state, i, target_rot, target_pos, w, chain)
                    mu = f(mu_init)
                    age = 0
                    polish = -1
                    e, jac, cost = evaluate(q, i, target_rot, target_pos, w, chain)
                last = cost
        if st == RUNNING and it >= limit:  # out of budget: solved if a success was recorded (polishing)
            st = SOLVED if best < f(1.0) else EXHAUSTED
        if wp.static(with_collision):  # noqa: SIM102
            if st != RUNNING and (self_on != 0 or scene[1] > 0) and wp.isnan(least):  # not measured at its success
                least, pair = clearance(bq_best, links_chain, spheres, obstacles, scene, self_on, -f(wp.inf))

        for a in range(nq):
            q_state[i, a] = q[a]
            best_q[i, a] = bq_best[a]
        mu_state[i] = mu
        best_score[i] = best
        best_error[i] = berr
        slot.best_least[i] = least
        slot.best_pair[i] = pair
        iterations[i] = it
        age_state[i] = age
        check_cost[i] = last
        cost_state[i] = cost
        rng[i] = state
        random_start[i] = drawn
        polish_from[i] = polish
        polish_scale[i] = scale
        status[i] = st

    return lm_block
