"""The reference IK solver, in eager torch: Levenberg-Marquardt on the SE(3) error, many seeds per target.

With F end-effector frames the residual stacks the F frames' 6-D errors (6F rows, as do the Jacobian
and the weights): one LM over all of them. A target succeeds when every frame is within tolerance.

A floating base (:mod:`ik_layer.model.floating`) moves on SE(3): each step is a tangent ``dq`` (dof) applied by
:meth:`Robot.integrate` (the base by the exponential map, the joints additively); limits bound the joints.
Secondary terms (:mod:`ik_layer.terms`: the posture, centring, manipulability) pull in the null space of the pose
error and rank the successful seeds; the posture's and centring's act on the joints only. With them a seed's first
success does not end it: the seed polishes, stepping down the terms' cost on the target's solutions
(:meth:`_LMState._polish`), and its target is done at the first seed that stops.

All targets and their seeds are solved as one batch of rows laid out as
``(targets, seeds, nq)``. Every ``check_every`` iterations the loop syncs with
the host once to drop solved targets from the batch and to restart stalled
seeds from fresh random configurations; between checks it runs entirely on the
device.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ik_layer.collision.cost import CollisionCost
from ik_layer.core.lm import LM
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.core.result import DEADLINE, EXHAUSTED, SOLVED, IKResult, frame_errors
from ik_layer.core.seeding import first_from_table, nearest_starts, seed_table
from ik_layer.model.floating import BASE_NQ
from ik_layer.model.lie import matrix_to_quaternion, pose_error
from ik_layer.model.robot import Robot
from ik_layer.terms import TermInput, rank_of_cost
from ik_layer.terms.objective import Objective

__all__ = ["solve_reference"]


def solve_reference(
    robot: Robot, problem: Problem, generator: torch.Generator | None = None, deadline: float | None = None
) -> IKResult:
    """Solve a checked :class:`~ik_layer.core.problem.Problem` with the eager torch solver (the reference path).

    :func:`ik_layer.solve` runs it with ``reference=True``; ``generator`` draws the random seeds; past
    ``deadline`` (``time.monotonic()``, checked at each progress check) the targets not done stop with status
    DEADLINE.
    """
    collision = CollisionCost.of(robot, problem.obstacles, problem.options)
    run = _Solve(
        robot, problem.target, problem.weights, problem.options, problem.posture, generator, collision,
        posture_seeds=problem.posture_seeds, terms=problem.terms,
    )  # fmt: skip
    first, table = problem.warm_start, seed_table(robot)
    if table is not None and first_from_table(problem, collision is not None):  # as the engine's first seeds
        first = nearest_starts(table, problem.target, problem.weights)
    q, ok, pos_err, ori_err, iters, status = run.run(first, deadline)
    least, pair = (None, None) if collision is None else collision.closest(robot, q)
    return IKResult(q, ok, pos_err, ori_err, iters, least, pair, status).reshaped(problem.batch)


class _Solve:
    """One run of the reference solver over a checked problem's rows: its targets, options and terms, and each
    target's best solution so far (:func:`solve_reference` builds it from a :class:`~ik_layer.core.problem.Problem`)."""

    def __init__(
        self,
        robot: Robot,
        target: Tensor,
        weights: Tensor,
        options: SolveOptions,
        posture: Tensor | None,
        generator: torch.Generator | None,
        collision: CollisionCost | None = None,
        *,
        posture_seeds: bool = True,
        terms: Mapping[str, TermInput] | None = None,
    ) -> None:
        self.robot = robot
        self.target = target
        self.weights = weights.flatten(1)  # (n, 6F): the stacked residual's weights
        self.options = options
        scale = LM.tolerance_scale(target.dtype)  # float32: a margin, so that successes hold in float64
        self.tol = (options.position_tolerance * scale, options.orientation_tolerance * scale)
        self.posture = posture
        self.posture_seeds = posture_seeds  # whether the posture is a first seed too (else it only pulls)
        self.objective = Objective.of(robot, options, posture, collision, terms)
        self.collision = collision
        self.with_terms = self.objective.with_terms  # seeds pull in the null space on their way
        self.pulls = self.objective.active  # successes polish (in collision: until free)
        self.generator = generator
        n = target.shape[0]
        self.best_q = target.new_zeros(n, robot.nq)
        self.best_rank = target.new_full((n,), torch.inf)
        self.done_at = torch.full((n,), -1, dtype=torch.long, device=target.device)
        # (n,) whether a colliding success cannot move in the pose's null space (the collision term alone, and the
        # weighted residual's rows at least the dof): it restarts at the next check instead of polishing
        self.rigid = ((self.weights > 0).sum(-1) >= robot.dof) & (not self.with_terms)

    def terms_gradient(self, rows: Tensor, q: Tensor, jac: Tensor) -> Tensor:
        """The secondary terms' gradient (A, S, dof) at ``q`` (A, S, nq) with its pose Jacobian."""
        return self.objective.take(rows).terms_gradient(q, jac)

    def secondary(self, rows: Tensor, q: Tensor, jac: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """At ``q`` (A, S, nq) with its pose Jacobian: the objective's cost (A, S), gradient (A, S, dof), least
        collision distance (A, S) and whether the terms' gradient alone is zero (:meth:`Objective.evaluate`)."""
        return self.objective.take(rows).evaluate(q, jac)

    def gated(self, score: Tensor, least: Tensor) -> Tensor:
        """The score of configurations of pose score ``score`` and least collision distance ``least``: one within
        the pose tolerances but closer than the margin scores ``1 + (margin - least) / activation`` (a failure, the
        worse the deeper)."""
        if self.collision is None:
            return score
        depth = 1 + (self.collision.margin - least) / self.collision.activation
        return torch.where((score <= 1) & ~self.collision.free(least), depth, score)

    def errors(self, e: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
        """Position and orientation error norms over the weighted axes of ``e`` (A, S, 6F), the worst frame's."""
        return frame_errors(e, self.weights[rows, None])

    def score(self, e: Tensor, rows: Tensor) -> Tensor:
        """Error in units of the tolerances; <= 1 is success."""
        pos, ori = self.errors(e, rows)
        return torch.maximum(pos / self.tol[0], ori / self.tol[1])

    def seeds(self, rows: Tensor, num_seeds: int, q_ref: Tensor | None) -> Tensor:
        """First configurations (A, S, nq) of ``rows``: the warm start, then the posture, then random ones."""
        q = self.random_starts(rows, num_seeds)
        firsts = [x[rows] for x in (q_ref, self.posture if self.posture_seeds else None) if x is not None]
        for k, first in enumerate(firsts[:num_seeds]):
            q[:, k] = self.robot.wrap(first)
        return q

    def pooled(self, fresh: Tensor, stuck: Tensor) -> Tensor:
        """``fresh`` starts (A, S, nq), where seeds are ``stuck`` in collision (A, S) replaced with probability
        ``LM.pooled_restarts`` by a collision-free answer of another target of the solve (as the kernel takes them
        from its start pool). The engine's random first seeds draw on the pool too, after a probe of targets
        admitted one block ahead of the others; here every target starts at once, at random."""
        free = self.best_q[self.done_at >= 0]  # with collision, a target done is collision-free
        if free.shape[0] == 0:
            return fresh
        u = torch.rand(stuck.shape, dtype=fresh.dtype, device=fresh.device, generator=self.generator)
        pick = torch.randint(free.shape[0], stuck.shape, device=fresh.device, generator=self.generator)
        return torch.where((stuck & (u < LM.pooled_restarts))[..., None], free[pick], fresh)

    def random_starts(self, rows: Tensor, num_seeds: int) -> Tensor:
        """Random configurations (A, S, nq) for ``rows``: joints uniform in the limits (:meth:`Robot.random_q`), a
        floating base placed where the first frame meets its target (its pose if that frame weighs a rotation
        axis, else its position, the base's orientation the identity)."""
        q = self.robot.random_q((rows.shape[0], num_seeds), generator=self.generator)
        if not self.robot.floating_base:
            return q
        first = self.robot.kinematics(q, jacobian=False)[0]  # the base at the origin: poses in the base frame
        first = first if self.robot.ee_frames is None else first[..., 0, :, :]
        goal = self.target[rows].reshape(rows.shape[0], -1, 4, 4)[:, None, 0]
        turns = (self.weights[rows, 3:6] > 0).any(-1)[:, None, None, None]
        upright = torch.eye(3, dtype=q.dtype, device=q.device).expand_as(first[..., :3, :3])
        rot = torch.where(turns, goal[..., :3, :3] @ first[..., :3, :3].transpose(-1, -2), upright)
        pos = goal[..., :3, 3] - (rot @ first[..., :3, 3:]).squeeze(-1)
        return torch.cat((pos, matrix_to_quaternion(rot), q[..., BASE_NQ:]), -1)

    def run(self, q_ref: Tensor | None, deadline: float | None) -> tuple[Tensor, ...]:
        """Solve every target (by ``deadline``, see :func:`solve_reference`); per target: best q, success, errors,
        iterations used and status."""
        num_seeds, max_iterations = self.options.num_seeds, self.options.max_iterations
        restart_after, check_every = self.options.restart_after, self.options.check_every
        n = self.target.shape[0]
        rows = torch.arange(n, device=self.target.device)
        q = self.seeds(rows, num_seeds, q_ref)
        state = _LMState.start(self, rows, q)
        state = self._record(state, rows, iteration=0)
        iteration = 0
        late = torch.zeros_like(self.done_at, dtype=torch.bool)  # the targets the deadline stopped
        while iteration < max_iterations:
            cost_before = state.cost
            steps = min(check_every, max_iterations - iteration)
            for _ in range(steps):
                iteration += 1
                state = self._record(state.step(self, rows), rows, iteration)
            keep = self.done_at[rows] < 0  # host sync: once per check
            if not bool(keep.any()):
                break
            if deadline is not None and time.monotonic() >= deadline:
                late[rows[keep]] = True
                break
            rows, state = rows[keep], state.select(keep)
            slow = state.cost > LM.progress * cost_before[keep]
            stalled = (slow | (state.age >= restart_after) | (state.mu >= LM.mu_max)) & ~state.polishing
            if bool(stalled.any()):
                # Restarts are random: restarting at the posture would replay the trajectory that stalled.
                fresh = self.random_starts(rows, num_seeds)
                if self.collision is not None:
                    fresh = self.pooled(fresh, state.polish_age == -2)
                state = state.restart(self, rows, stalled, fresh)
        success = (self.done_at >= 0) | (self.best_rank < 1)  # done, or out of budget while polishing a success
        iters = torch.where(self.done_at >= 0, self.done_at, torch.full_like(self.done_at, iteration))
        e = pose_error(self.target, self.robot.fk(self.best_q)).flatten(1)
        pos, ori = self.errors(e[:, None], torch.arange(n, device=rows.device))
        status = torch.full((n,), EXHAUSTED, dtype=torch.int32, device=success.device)
        status[late & ~success] = DEADLINE
        status[success] = SOLVED
        return self.best_q, success, pos[:, 0], ori[:, 0], iters, status

    def _record(self, state: _LMState, rows: Tensor, iteration: int) -> _LMState:
        """Keep, per open target, its best seed so far; mark the target done at its first success (with secondary
        terms or collision: when a polishing seed stops and the target has a success, or at a first success where
        their gradient is zero). Returns ``state`` with the seeds that reached the pose tolerances polishing, and
        those that stopped polishing without a success for their target (in collision) due for a restart.

        Seeds rank by their score (error over tolerance; a colliding configuration above 1, see :meth:`gated`);
        with secondary terms, successful seeds rank below 1 by their secondary cost
        (:func:`~ik_layer.terms.rank_of_cost`), so the cheapest success wins.
        """
        pose_score = self.score(state.e, rows)
        score = rank = pose_score
        open_ = self.done_at[rows] < 0
        if self.pulls:
            cost, _, least, still = self.secondary(rows, state.q, state.jac)
            score = self.gated(pose_score, least)
            # the collision term alone: it gates successes and repairs in the null space; a success ranks as costless
            rank = torch.where(score <= 1, rank_of_cost(cost if self.with_terms else torch.zeros_like(cost)), score)
        best_rank, best_seed = rank.min(dim=1)
        improve = open_ & (best_rank < self.best_rank[rows])
        chosen = state.q[torch.arange(rows.shape[0], device=rows.device), best_seed]
        self.best_q[rows] = torch.where(improve[:, None], chosen, self.best_q[rows])
        self.best_rank[rows] = torch.where(improve, best_rank, self.best_rank[rows])
        if self.pulls:
            at_pose = ~state.polishing & (pose_score <= 1)
            settled = at_pose & still & (score <= 1)  # a success with nothing to polish
            first = at_pose & (state.polish_age == -1)
            hopeless = first & ~settled & self.rigid[rows, None]  # in collision with no null space to move in
            starts = first & ~hopeless  # the seed polishes from the next step
            solved = self.best_rank[rows] < 1  # the target has a success
            newly_done = open_ & solved & (state.polished | settled).any(dim=1)
            # polished to no success (in collision), or cannot polish: restarted at the check
            stuck = (state.polished & ~solved[:, None]) | hopeless
            state = replace(
                state,
                polish_age=torch.where(starts, 0, torch.where(stuck, -2, state.polish_age)),
                polish_scale=torch.where(starts, 1.0, state.polish_scale),
                polished=state.polished & ~stuck,
                age=torch.where(stuck, self.options.restart_after, state.age),
            )
        else:
            newly_done = improve & (score.gather(1, best_seed[:, None]).squeeze(1) <= 1)
        self.done_at[rows] = torch.where(newly_done, iteration, self.done_at[rows])
        return state


@dataclass(frozen=True)
class _LMState:
    """Per-seed LM state, shape (A, S, ...) for A active targets and S seeds."""

    q: Tensor  # (A, S, nq)
    e: Tensor  # (A, S, 6F) error at q, F frames stacked
    jac: Tensor  # (A, S, 6F, dof) Jacobian at q
    cost: Tensor  # (A, S) weighted squared error
    mu: Tensor  # (A, S) relative damping
    age: Tensor  # (A, S) iterations since the seed (re)started
    polish_age: Tensor  # (A, S) iterations since the seed's first success with secondary terms (it polishes); else
    # -1, or -2 once it polished to no success (it waits for its restart)
    polish_scale: Tensor  # (A, S) the polish's step, a fraction of the terms' pull
    polished: Tensor  # (A, S) bool: the seed stopped polishing at this step

    @property
    def polishing(self) -> Tensor:
        """(A, S) bool: the seed succeeded and descends the secondary terms on the target's solutions."""
        return self.polish_age >= 0

    @staticmethod
    def start(solve: _Solve, rows: Tensor, q: Tensor) -> _LMState:
        e, jac, cost = _evaluate(solve, rows, q)
        mu, age = torch.full_like(cost, LM.mu_init), torch.zeros_like(cost, dtype=torch.long)
        polish_age, polished = torch.full_like(age, -1), torch.zeros_like(cost, dtype=torch.bool)
        return _LMState(q, e, jac, cost, mu, age, polish_age, torch.ones_like(cost), polished)

    def step(self, solve: _Solve, rows: Tensor) -> _LMState:
        """One damped Gauss-Newton step per seed, kept only where it lowers the cost.

        Joints the step would push past a limit are set at that limit, and the step
        of the other joints is solved again with them fixed (one active-set pass).
        With secondary terms, a pulled step (down their gradient, projected on the damped null space) that does not
        lower the cost falls back on the plain one: the pull must never hold a seed back from its target. Polishing
        seeds take :meth:`_polish`'s step instead, pulled by the collision term too.
        """
        robot = solve.robot
        floor = max(LM.lambda_min, LM.eps_floor * torch.finfo(self.q.dtype).eps)
        damping = self.mu * self.cost + floor
        w = solve.weights[rows, None]
        pull = -solve.terms_gradient(rows, self.q, self.jac) if solve.with_terms else None
        q_new, info = self._candidate(robot, w, damping, pull)
        e_new, jac_new, cost_new = _evaluate(solve, rows, q_new)
        accept = (cost_new < self.cost) & (info == 0)
        if pull is not None:
            q_plain, info_plain = self._candidate(robot, w, damping, None)
            e_plain, jac_plain, cost_plain = _evaluate(solve, rows, q_plain)
            plain = ~accept & (cost_plain < self.cost) & (info_plain == 0)
            p3, p4 = plain[..., None], plain[..., None, None]
            q_new, e_new = torch.where(p3, q_plain, q_new), torch.where(p3, e_plain, e_new)
            jac_new, cost_new = torch.where(p4, jac_plain, jac_new), torch.where(plain, cost_plain, cost_new)
            accept = accept | plain
        a3, a4 = accept[..., None], accept[..., None, None]
        stepped = _LMState(
            q=torch.where(a3, q_new, self.q),
            e=torch.where(a3, e_new, self.e),
            jac=torch.where(a4, jac_new, self.jac),
            cost=torch.where(accept, cost_new, self.cost),
            mu=torch.where(accept, self.mu * LM.mu_decrease, self.mu * LM.mu_increase).clamp(LM.mu_min, LM.mu_max),
            age=self.age + 1,
            polish_age=self.polish_age,
            polish_scale=self.polish_scale,
            polished=self.polished,
        )
        if not solve.pulls:
            return stepped
        return self._polish(solve, rows, stepped, damping)

    def _polish(self, solve: _Solve, rows: Tensor, stepped: _LMState, damping: Tensor) -> _LMState:
        """``stepped`` with the polishing seeds' step instead (:data:`ik_layer.core.lm.LM`'s ``polish_*``), the damping
        unchanged. Within tolerance: the pulled step at the seed's polish scale, kept iff the terms' cost falls and
        the errors stay within ``polish_slack`` times the tolerances (the scale then doubles, up to
        ``polish_max_scale``; else it is quartered). Out of it: the plain step, kept iff it lowers the pose's cost.
        A seed stops polishing when a kept step within tolerance, at a scale of 1 or less, lowers the terms' cost by
        ``polish_progress`` of it or less, when its scale falls below ``polish_min_scale``, when a correction is
        refused, or ``polish_iterations`` after its first success (``polish_in_collision`` while its target has no
        success yet); with the collision term alone (no secondary terms), also at a kept step within tolerance that
        is collision-free."""
        robot, w = solve.robot, solve.weights[rows, None]
        s_now, gradient = solve.secondary(rows, self.q, self.jac)[:2]
        pull = -gradient
        within = solve.score(self.e, rows) <= 1
        q_pulled, info_pulled = self._candidate(robot, w, damping, self.polish_scale[..., None] * pull)
        q_plain, info_plain = self._candidate(robot, w, damping, None)
        q_new, info = torch.where(within[..., None], q_pulled, q_plain), torch.where(within, info_pulled, info_plain)
        e_new, jac_new, cost_new = _evaluate(solve, rows, q_new)
        s_new, _, least_new, _ = solve.secondary(rows, q_new, jac_new)
        score = solve.score(e_new, rows)
        on = self.polishing
        lower = torch.where(within, (score <= LM.polish_slack) & (s_new < s_now), cost_new < self.cost)
        kept = on & (info == 0) & lower
        little = (s_now - s_new <= LM.polish_progress * (1 + s_now.abs())) & (self.polish_scale <= 1)
        converged = kept & within & (score <= 1) & little  # (a larger step may overshoot to a near tie)
        scale = torch.where(kept, (2 * self.polish_scale).clamp(max=LM.polish_max_scale), 0.25 * self.polish_scale)
        scale = torch.where(within, scale, self.polish_scale)
        given_up = ~kept & torch.where(within, scale < LM.polish_min_scale, True)
        done = converged | given_up | (self.polish_age + 1 >= LM.polish_iterations)
        colliding = solve.best_rank[rows, None] >= 1  # no success recorded yet: still in collision
        done = done | (colliding & (self.polish_age + 1 >= LM.polish_in_collision))
        if solve.collision is not None and not solve.with_terms:  # collision alone: free is enough
            done = done | (kept & within & (score <= 1) & solve.collision.free(least_new))
        k3, k4, o3, o4 = kept[..., None], kept[..., None, None], on[..., None], on[..., None, None]
        return _LMState(
            q=torch.where(k3, q_new, torch.where(o3, self.q, stepped.q)),
            e=torch.where(k3, e_new, torch.where(o3, self.e, stepped.e)),
            jac=torch.where(k4, jac_new, torch.where(o4, self.jac, stepped.jac)),
            cost=torch.where(kept, cost_new, torch.where(on, self.cost, stepped.cost)),
            mu=torch.where(on, self.mu, stepped.mu),
            age=stepped.age,
            polish_age=torch.where(on, self.polish_age + 1, self.polish_age),
            polish_scale=torch.where(on, scale, self.polish_scale),
            polished=on & done,
        )

    def _candidate(self, robot: Robot, w: Tensor, damping: Tensor, pull: Tensor | None) -> tuple[Tensor, Tensor]:
        """The configuration one damped step (with its active-set pass and ``pull``) leads to, and the solver's
        status (non-zero: singular)."""
        dq, info = _damped_step(self.jac, self.e, w, damping, pull)
        blocked, dq_blocked = _at_limits(robot, self.q, dq)
        e_rest = self.e - (self.jac @ dq_blocked[..., None]).squeeze(-1)
        dq_free, info_free = _damped_step(self.jac * ~blocked[..., None, :], e_rest, w, damping, pull)
        dq = torch.where(blocked, dq_blocked, dq_free)
        return robot.wrap(robot.integrate(self.q, dq)), info | info_free

    def select(self, keep: Tensor) -> _LMState:
        """The state of the targets in ``keep`` (A,) bool."""
        return _LMState(*(x[keep] for x in vars(self).values()))

    def restart(self, solve: _Solve, rows: Tensor, stalled: Tensor, fresh: Tensor) -> _LMState:
        """Restart the ``stalled`` (A, S) seeds from ``fresh`` configurations."""
        q = torch.where(stalled[..., None], fresh, self.q)
        e, jac, cost = _evaluate(solve, rows, q)
        s3, s4 = stalled[..., None], stalled[..., None, None]
        return _LMState(
            q=q,
            e=torch.where(s3, e, self.e),
            jac=torch.where(s4, jac, self.jac),
            cost=torch.where(stalled, cost, self.cost),
            mu=torch.where(stalled, torch.full_like(self.mu, LM.mu_init), self.mu),
            age=torch.where(stalled, torch.zeros_like(self.age), self.age),
            polish_age=torch.where(stalled, -1, self.polish_age),  # stalled seeds never polish
            polish_scale=self.polish_scale,
            polished=self.polished,
        )


def _at_limits(robot: Robot, q: Tensor, dq: Tensor) -> tuple[Tensor, Tensor]:
    """Which coordinates (A, S, dof) the step ``dq`` pushes past a joint limit, and the steps onto those limits."""
    joints = robot.lower.shape[0]  # the last coordinates of q and dq; a floating base comes first
    q_j, target = q[..., -joints:], q[..., -joints:] + dq[..., -joints:]
    blocked = ~(robot.continuous | robot.full_turn) & ((target < robot.lower) | (target > robot.upper))
    onto = torch.where(blocked, torch.minimum(torch.maximum(target, robot.lower), robot.upper) - q_j, 0)
    base = torch.zeros_like(dq[..., : dq.shape[-1] - joints])
    return torch.cat((base.bool(), blocked), -1), torch.cat((base, onto), -1)


def _damped_step(jac: Tensor, e: Tensor, w: Tensor, damping: Tensor, pull: Tensor | None) -> tuple[Tensor, Tensor]:
    """LM step ``(J^T W J + damping I)^-1 J^T W e`` (A, S, dof), plus ``pull`` projected
    on the null space of J, and the solver's status (A, S) (non-zero: singular)."""
    jt_w = (jac * w[..., None]).transpose(-1, -2)  # (A, S, dof, 6)
    hess = jt_w @ jac
    eye = torch.eye(hess.shape[-1], dtype=hess.dtype, device=hess.device)
    lhs = hess + damping[..., None, None] * eye
    rhs = jt_w @ e[..., None]
    if pull is not None:
        rhs = torch.cat((rhs, hess @ pull[..., None]), dim=-1)
    sol, info = torch.linalg.solve_ex(lhs, rhs)
    if pull is None:
        return sol[..., 0], info
    return sol[..., 0] + pull - sol[..., 1], info  # (I - H_l^-1 H) pull: null-space motion


def _evaluate(solve: _Solve, rows: Tensor, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Error (A, S, 6F), Jacobian of the poses (A, S, 6F, dof) and weighted cost (A, S) at ``q`` (A, S, nq)."""
    pose, jac = solve.robot.kinematics(q, jacobian=True)  # unchecked: no host sync per iteration
    e = pose_error(solve.target[rows, None], pose).flatten(q.dim() - 1)
    cost = (solve.weights[rows, None] * e * e).sum(-1)
    return e, jac.flatten(q.dim() - 1, -2), cost
