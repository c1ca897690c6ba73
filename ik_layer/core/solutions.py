"""Sets of answers: up to ``k`` distinct solutions per target, ranked by an objective (TRAC-IK's solve types).

:func:`solve_set` runs a solver over a :class:`~ik_layer.core.problem.Problem` in rounds: first the problem as given
(its warm starts and postures), then, for the targets still short of ``k`` distinct solutions (every target, the
first time, for an objective other than ``"first"``; but for one solution nearest the warm start or the posture, not
a target whose first answer lies within ``SEPARATION / 2`` of it: a nearer solution would lie within
:data:`SEPARATION` of that answer, the same solution), each target repeated ``2 k + 2`` times (``2 k + 7`` for an
objective other than ``"first"``: a choice wants candidates; ``2 k + 14`` where the answers lie on discrete branches
only, without a null space: some branches draw few random starts) from random starts (for ``"closest"``, the first
time, one seed each around the warm start, for the nearest answers; later, for the targets still short, anywhere as
for every objective: an objective ranks the set, it must not shrink it; the posture pulls but seeds nothing), at
most :data:`MAX_ROUNDS` times. Each answer is pulled in the null space towards the objective
(:func:`objective_problem`), so that it is the best of its branch. A target's successes are ranked by the
objective and kept greedily where they lie at least :data:`SEPARATION` from every one kept before (joint distance,
angles of revolute joints that turn a full turn or more compared modulo a turn: a UR5e's eight branches, not their
copies a turn apart).

Objectives: ``"first"`` (the order found: the given start's answer first), ``"closest"`` (nearest the warm start,
TRAC-IK's Distance), ``"manipulability"`` (the largest ``sqrt(det(J J^T))``, TRAC-IK's Manip1) and ``"posture"``
(nearest the posture).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor

from ik_layer.core.problem import Problem
from ik_layer.core.result import DEADLINE, EXHAUSTED, IKResult
from ik_layer.exceptions import IKLayerError
from ik_layer.model.robot import Robot

__all__ = [
    "MAX_ROUNDS",
    "MANIPULABILITY_GAIN",
    "MAX_SOLUTIONS",
    "NEAR_SPREAD",
    "OBJECTIVES",
    "SEPARATION",
    "SolutionSearch",
    "best_goals",
    "check_objective",
    "objective_problem",
    "objective_scores",
    "solve_set",
]

OBJECTIVES = ("first", "closest", "manipulability", "posture")
"""The orders answers are ranked in (see the module's docstring)."""

MAX_SOLUTIONS = 64
"""The most solutions asked per target."""

MAX_ROUNDS = 3
"""The rounds of random starts after the first solve, for targets short of their solutions."""

SEPARATION = 0.1
"""The least joint distance between two solutions of one target [rad or m] (the norm over the joints)."""

NEAR_SPREAD = 1.0
"""For ``"closest"``, the first round's candidates start at the warm start plus a normal draw of this spread per joint
[rad or m]: the answer nearest a seed mostly lies near it (TRAC-IK's Distance searches around its seed too)."""

_MOST_CANDIDATES = 14
"""The candidates a round adds to ``2 k`` per target at most: where the answers lie on discrete branches only."""

MANIPULABILITY_GAIN = 0.5
"""The manipulability term's gain where ``objective="manipulability"`` sets it (see :mod:`ik_layer.terms`)."""


def check_objective(num_solutions: object, objective: object, warm_start: Tensor | None, posture: Tensor | None) -> int:
    """``num_solutions`` as an int, checked with ``objective`` against the ``warm_start`` and ``posture`` given
    (``"closest"`` and ``"posture"`` rank by them).

    Raises:
        IKLayerError: naming the bad argument.
    """
    if isinstance(num_solutions, bool) or not isinstance(num_solutions, int) or not 1 <= num_solutions <= MAX_SOLUTIONS:
        raise IKLayerError(f"num_solutions must be an int in [1, {MAX_SOLUTIONS}], got {num_solutions!r}")
    if objective not in OBJECTIVES:
        raise IKLayerError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}")
    if objective == "closest" and warm_start is None:
        raise IKLayerError("objective='closest' ranks answers by their distance to the warm start: give warm_start")
    if objective == "posture" and posture is None:
        raise IKLayerError("objective='posture' ranks answers by their distance to the posture: give posture")
    return num_solutions


def objective_problem(robot: Robot, problem: Problem, objective: str) -> Problem:
    """``problem`` pulled towards its ``objective`` in the null space, so that each answer is the best of its
    branch: ``"closest"`` pulls towards the warm start (the posture, seeding nothing, where none is given),
    ``"manipulability"`` away from singularities (serial arms, gain :data:`MANIPULABILITY_GAIN` unless given)."""
    if objective == "closest" and problem.posture is None:
        return replace(problem, posture=problem.warm_start, posture_seeds=False)
    if objective == "manipulability" and not problem.options.manipulability and robot.chains.serial_arm:
        return replace(problem, options=replace(problem.options, manipulability=MANIPULABILITY_GAIN))
    return problem


def solve_set(
    robot: Robot,
    problem: Problem,
    num_solutions: int,
    objective: str,
    run: Callable[[Problem], IKResult],
    deadline: float | None = None,
    generator: torch.Generator | None = None,
) -> IKResult:
    """Up to ``num_solutions`` distinct solutions of each target of ``problem``, best first by ``objective``
    (checked by :func:`check_objective`), each round solved by ``run`` (a solver of a problem; a new random seed
    each call); no rounds start past ``deadline`` (``time.monotonic()``); ``generator`` draws the starts around
    the warm start for ``"closest"``.

    Returns:
        The flat result (n, k, ...) of :meth:`SolutionSearch.result`.
    """
    search = SolutionSearch(robot, problem, num_solutions, objective, generator)
    late = False
    while search.problem is not None:
        if search.rounds and deadline is not None and time.monotonic() >= deadline:
            late = True
            break
        search.add(run(search.problem))
    return search.result(late)


class SolutionSearch:
    """The rounds of :func:`solve_set`, one at a time: solve :attr:`problem` (None: the search is over) by any
    solver, give its answers to :meth:`add`, repeat; then :meth:`result`. The server's workers run the rounds
    on their shared engine this way.

    Args:
        robot: the robot.
        problem: the targets (n rows), pulled towards the objective already where wanted
            (:func:`objective_problem`).
        num_solutions: ``k``, the solutions wanted per target; objective: how they rank (:func:`check_objective`).
        generator: draws the starts around the warm start for ``"closest"``.
    """

    def __init__(
        self,
        robot: Robot,
        problem: Problem,
        num_solutions: int,
        objective: str,
        generator: torch.Generator | None = None,
    ) -> None:
        self.robot, self.given, self.k, self.objective = robot, problem, num_solutions, objective
        self.generator = generator
        self.problem: Problem | None = problem
        """The problem to solve next: the given one, then each round's random starts; None when done."""
        self.rounds = 0
        """The problems solved so far."""
        # answers on discrete branches only (no null space: the weighted rows at least the dof): a choice needs more
        discrete = bool(((problem.weights > 0).flatten(1).sum(-1) >= robot.dof).any())
        self._repeat = 2 * num_solutions + (_MOST_CANDIDATES if discrete else 2 if objective == "first" else 7)
        self._found: list[IKResult] = []  # the answers of round r: (n_r,) for the targets _rows[r]
        self._rows: list[Tensor] = []
        self._scores: list[Tensor] = []  # their ranks by the objective, lower first (each candidate's once)
        self._wrapped = _wrapping(robot)
        self._next_rows = torch.arange(problem.rows, device=problem.target.device)
        self._kept: _Kept | None = None

    @staticmethod
    def most_rows(rows: int, num_solutions: int) -> int:
        """The most rows a search of ``rows`` targets solves over all its rounds (a bound of its cost)."""
        return rows * (1 + MAX_ROUNDS * (2 * num_solutions + _MOST_CANDIDATES))

    def add(self, answers: IKResult) -> None:
        """Take the answers of :attr:`problem` (its rows, flat or in its batch shape, on any device: they join the
        problem's) and set the next problem."""
        rows = self._next_rows
        found = answers.reshaped((rows.shape[0],)).map(lambda x: x.to(rows.device))
        score = _scores(self.robot, self.given, self.objective, found.q, rows)
        if self.objective == "first":  # the order found, after every earlier round's
            score = score + sum(len(r) for r in self._rows)
        self._found.append(found)
        self._rows.append(rows)
        self._scores.append(score)
        self._kept = _keep(self.given.rows, self._found, self._rows, self._scores, self.k, self._wrapped)
        self.rounds += 1
        self.problem = self._next_round()

    def result(self, late: bool = False) -> IKResult:
        """The flat result (n, k, ...): a target's slots past its distinct solutions hold its best configuration
        with ``success`` False and status EXHAUSTED (DEADLINE where ``late``: rounds were left for lack of time).

        Raises:
            IKLayerError: no answers were added yet.
        """
        if self._kept is None:
            raise IKLayerError("SolutionSearch.result: solve its first problem (add its answers) first")
        return self._kept.result(late)

    def _next_round(self) -> Problem | None:
        """The targets short of their solutions, each repeated from random starts; None after the last round."""
        assert self._kept is not None
        if self.rounds > MAX_ROUNDS:
            return None
        wanting = self._kept.count < self.k
        if self.rounds == 1 and self.objective != "first":  # a choice needs candidates: every target takes one round
            wanting = torch.ones_like(wanting)
            if self.k == 1 and self.objective in ("closest", "posture"):  # but one whose first answer lies within
                # SEPARATION / 2 of the reference: a nearer solution would lie within SEPARATION of it (the same one)
                wanting &= ~(self._found[0].success & (self._scores[0] <= SEPARATION / 2))
        short = torch.nonzero(wanting).squeeze(-1)
        if short.numel() == 0:
            return None
        again = self._next_rows = short.repeat_interleave(self._repeat)
        part = _random_starts(self.given, again)
        warm = self.given.warm_start
        if self.objective == "closest" and warm is not None and self.rounds == 1:
            # the first candidates start around the warm start, one seed each (a seed that stalls would restart
            # anywhere in the limits: far from it); later ones anywhere: near starts reach only the near branches
            near = warm[again]
            noise = torch.randn(near.shape, dtype=near.dtype, device=near.device, generator=self.generator)
            start = self.robot.wrap(near + NEAR_SPREAD * noise)
            part = replace(part, warm_start=start, options=part.options.replace(num_seeds=1))
        return part


class _Kept:
    """Per target, the indices (into the candidates) of its kept solutions, best first, and the candidates."""

    def __init__(self, candidates: IKResult, order: Tensor, count: Tensor, best: Tensor) -> None:
        self.candidates, self.order, self.count, self.best = candidates, order, count, best

    def result(self, late: bool) -> IKResult:
        """The (n, k, ...) result: kept solutions first, then the target's best candidate, unsolved."""
        slot = torch.arange(self.order.shape[1], device=self.order.device)
        filled = slot < self.count[:, None]
        pick = torch.where(filled, self.order, self.best[:, None])  # (n, k) candidate indices
        c = self.candidates

        def take(x: Tensor | None) -> Tensor | None:
            return None if x is None else x[pick]

        status = c.status[pick] if c.status is not None else None
        if status is not None:
            status = torch.where(filled, status, torch.full_like(status, DEADLINE if late else EXHAUSTED))
        return IKResult(
            q=c.q[pick],
            success=c.success[pick] & filled,
            position_error=c.position_error[pick],
            orientation_error=c.orientation_error[pick],
            iterations=c.iterations[pick],
            min_distance=take(c.min_distance),
            closest_pair=take(c.closest_pair),
            status=status,
        )


def _keep(n: int, found: list[IKResult], rows: list[Tensor], scores: list[Tensor], k: int, wrapped: Tensor) -> _Kept:
    """Rank each of the ``n`` targets' successful candidates (the answers ``found`` in rounds, for the targets
    ``rows``, ranked ``scores``), keep up to ``k`` that lie apart (greedily, best first: one pass per candidate rank,
    every target at once; ``wrapped``: the coordinates compared modulo a turn)."""
    candidates = _concat(found)
    owner = torch.cat(rows)  # (C,) the target of each candidate
    q = candidates.q
    score = torch.where(candidates.success, torch.cat(scores), torch.inf)  # lower first
    by_score = torch.argsort(score, stable=True)  # (the order found breaks ties)
    order = by_score[torch.argsort(owner[by_score], stable=True)]  # by target, then score
    per_target = torch.bincount(owner, minlength=n)
    rank = torch.arange(order.shape[0], device=q.device) - (torch.cumsum(per_target, 0) - per_target)[owner[order]]
    table = torch.full((n, int(per_target.max())), -1, dtype=torch.long, device=q.device)
    table[owner[order], rank] = order  # (n, M): each target's candidates, best first
    kept = torch.full((n, k), -1, dtype=torch.long, device=q.device)
    count = torch.zeros(n, dtype=torch.long, device=q.device)
    everyone = torch.arange(n, device=q.device)
    for j in range(table.shape[1]):
        index = table[:, j]
        ok = (index >= 0) & torch.isfinite(score[index.clamp_min(0)]) & (count < k)
        if not bool(ok.any()):
            continue
        near = _distance(q[kept.clamp_min(0)], q[index.clamp_min(0)][:, None], wrapped)  # (n, k)
        apart = ((near >= SEPARATION) | (kept < 0)).all(-1)
        take = ok & apart
        kept[everyone[take], count[take]] = index[take]
        count = count + take.long()
    # each target's best candidate where none succeeded: its first round's answer (its best seed)
    first = torch.zeros(n, dtype=torch.long, device=q.device)
    first[rows[0]] = torch.arange(rows[0].shape[0], device=q.device)
    return _Kept(candidates, kept, count, torch.where(count > 0, kept[:, 0], first))


def _scores(robot: Robot, problem: Problem, objective: str, q: Tensor, owner: Tensor) -> Tensor:
    """Each candidate's rank by ``objective``, lower first (``owner``: each candidate's target)."""
    reference = problem.warm_start if objective == "closest" else problem.posture
    return objective_scores(robot, objective, q, None if reference is None else reference[owner])


def objective_scores(robot: Robot, objective: str, q: Tensor, reference: Tensor | None) -> Tensor:
    """The rank (C,) of configurations ``q`` (C, nq) by ``objective``, lower first: their order (``"first"``), minus
    their manipulability, or their joint distance to ``reference`` (C, nq) (the warm start or the posture)."""
    if objective == "first":
        return torch.arange(q.shape[0], dtype=q.dtype, device=q.device)
    if objective == "manipulability":  # Yoshikawa's sqrt(det(J J^T)) (J^T J with more rows than joints)
        jac = robot.kinematics(q, jacobian=True)[1]
        jac = jac.flatten(-3, -2) if jac.dim() == q.dim() + 2 else jac  # several frames: their rows stacked
        gram = jac @ jac.transpose(-1, -2) if jac.shape[-2] <= jac.shape[-1] else jac.transpose(-1, -2) @ jac
        return -torch.linalg.det(gram).clamp_min(0).sqrt()
    assert reference is not None  # check_objective
    return _distance(q, reference, _wrapping(robot))


def best_goals(robot: Robot, result: IKResult, objective: str, reference: Tensor | None) -> tuple[IKResult, Tensor]:
    """Per row of a flat goal-set ``result`` (n, G, ...), the answer for its best goal, and that goal (n,) int64:
    of the goals solved, the first by ``objective`` (``reference`` (n, G, nq): the warm start or posture per
    candidate); where none was solved, the one of the least pose error (in units of the errors' largest)."""
    n, goals = result.success.shape
    q = result.q.reshape(n * goals, -1)
    score = objective_scores(robot, objective, q, None if reference is None else reference.reshape(n * goals, -1))
    score = score.reshape(n, goals)
    if objective == "first":
        score = score.remainder(goals)  # the goal's index: the first goal solved
    error = result.position_error + result.orientation_error  # where none solved: the nearest miss
    rank = torch.where(result.success, score, torch.inf)
    goal = torch.where(result.success.any(-1), rank.argmin(-1), error.argmin(-1))

    def take(x: Tensor) -> Tensor:
        at = goal.reshape(n, 1, *([1] * (x.dim() - 2))).expand(n, 1, *x.shape[2:])
        return x.gather(1, at).squeeze(1)

    return result.map(take), goal


def _wrapping(robot: Robot) -> Tensor:
    """(nq,) bool: the coordinates compared modulo a turn (continuous and full-turn revolute joints)."""
    joints = robot.continuous | robot.full_turn
    base = torch.zeros(robot.nq - joints.shape[0], dtype=torch.bool, device=joints.device)
    return torch.cat((base, joints))


def _distance(a: Tensor, b: Tensor, wrapped: Tensor) -> Tensor:
    """Joint distance (...) between ``a`` and ``b`` (..., nq), ``wrapped`` coordinates modulo a turn."""
    gap = a - b
    turned = torch.remainder(gap + torch.pi, 2 * torch.pi) - torch.pi
    return torch.where(wrapped, turned, gap).norm(dim=-1)


def _concat(results: list[IKResult]) -> IKResult:
    """The rows of ``results`` one after the other."""

    def cat(name: str) -> Tensor | None:
        parts = [getattr(r, name) for r in results]
        return None if parts[0] is None else torch.cat(parts)

    fields = {name: cat(name) for name in vars(results[0])}
    return IKResult(**fields)  # type: ignore[arg-type]


def _random_starts(problem: Problem, rows: Tensor) -> Problem:
    """The targets ``rows`` (repeats allowed) as a problem of their own, every seed from a random start (no warm
    start, no seed table; the posture pulls but seeds nothing)."""
    scenes = problem.obstacles if len(problem.obstacles) == 1 else tuple(problem.obstacles[r] for r in rows.tolist())
    return replace(
        problem,
        batch=torch.Size([rows.shape[0]]),
        target=problem.target[rows],
        weights=problem.weights[rows],
        warm_start=None,
        posture=None if problem.posture is None else problem.posture[rows],
        posture_seeds=False,
        nearest_start=False,
        obstacles=scenes,
        terms=problem.terms_of(rows),
    )
