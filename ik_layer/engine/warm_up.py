"""An engine's kernels built before its first request: :func:`warm_up_kernels`.

The engine compiles its kernel per set of secondary terms and collision term that the slots in flight use together,
and records its launch at the first use (:class:`~ik_layer.engine.launch.BlockLauncher`): seconds on a cold warp
cache, a fraction of a second from it. A service runs every combination once before it reports ready, so that no
request pays for it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from ik_layer.collision.shapes import Sphere
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.engine.scheduler import Engine
from ik_layer.exceptions import IKLayerError
from ik_layer.model.lie import matrix_to_pose
from ik_layer.terms import BUILT_IN, POSTURE, SecondaryTerm

__all__ = ["warm_up_kernels"]

_ITERATIONS = 4  # per warm-up solve


def warm_up_kernels(engine: Engine, options: SolveOptions) -> None:
    """Solve once on ``engine`` with each combination of the built-in secondary terms
    (:data:`ik_layer.terms.BUILT_IN`), with and without the collision term (an obstacle), so that every kernel it
    can launch is compiled and recorded.

    Combinations the robot refuses (manipulability off a serial arm, collision without spheres) are left out: no
    request can run them either. The kernels compile in parallel (warp compiles modules in threads), each
    combination first on an engine of its own (of ``engine``'s store), then on ``engine``, which then only records
    its launches.

    Args:
        engine: the engine to warm up (not stepped by another thread meanwhile).
        options: the solver options its requests start from (the warm-up's solves run a few iterations).

    Raises:
        IKLayerError: the robot refuses even a plain solve.
    """
    robot = engine.robot
    joints = ((robot.lower + robot.upper) / 2)[None]
    base = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0] if robot.floating_base else []  # at the origin
    q = torch.cat((joints.new_tensor([base]), joints), -1)
    pose = matrix_to_pose(robot.fk(q))  # as requests give targets
    brief = options.replace(max_iterations=_ITERATIONS, self_collision=0)  # obstacles switch the collision term on
    far_away = Sphere([1e3, 0.0, 0.0], 0.1)  # clear of every answer

    def run(kind: tuple[tuple[SecondaryTerm, ...], bool], on: Engine) -> bool:
        """Solve once with ``kind``'s terms and collision on ``on``; False where the robot refuses that kind."""
        terms, collision = kind
        gains = {
            term.name: float(term in terms) for term in BUILT_IN if term is not POSTURE
        }  # a term's option: its gain
        try:
            problem = Problem.prepare(
                robot,
                pose,
                brief.replace(**gains),
                posture=q if POSTURE in terms else None,
                obstacles=[far_away] if collision else (),
            )
        except IKLayerError:
            if terms or collision:
                return False  # refused for this robot, as every request of this kind is
            raise
        on.solve(problem, seed=0)
        return True

    plain, *others = itertools.product(_subsets(BUILT_IN), (False, True))
    run(plain, engine)  # alone first: what the other kernels share is built once
    engines = [Engine(robot, capacity=brief.num_seeds, store=engine.slots.kind) for _ in others]
    with ThreadPoolExecutor() as pool:
        taken = list(pool.map(run, others, engines))
    for kind, takes in zip(others, taken, strict=True):
        if takes:
            run(kind, engine)


def _subsets(terms: Sequence[SecondaryTerm]) -> Iterator[tuple[SecondaryTerm, ...]]:
    """Every subset of ``terms``, the empty one first."""
    return itertools.chain.from_iterable(itertools.combinations(terms, k) for k in range(len(terms) + 1))
