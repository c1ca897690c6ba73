"""The stage contract of an IK request in the engine worker: decode -> submit -> collect -> encode.

The worker (:mod:`ik_layer.server.worker`) only schedules: which requests start, how many of their rows go to
the engine and when, when the engine steps, deadlines and cancellation. What happens to a request's data is
one of the four stages of :class:`IKStages`, each the face of its own module:

1. decode (:mod:`ik_layer.server.decode`): jobs -> checked problems, or the error of an invalid one;
2. submit: rows of a problem -> a part on the engine;
3. collect (:mod:`ik_layer.server.predict`): a job's finished parts -> its answers -> its prediction;
4. encode (:mod:`ik_layer.server.encode`): a prediction -> the JSON answer.

A job that asks for several solutions (or ranks them by an objective) runs a
:class:`ik_layer.core.solutions.SolutionSearch` between submit and collect: each round's problem is submitted in parts,
and its joined answers start the next.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from torch import Tensor

from ik_layer import IKLayerError, IKResult, Problem, Robot
from ik_layer.core.solutions import SolutionSearch, objective_problem
from ik_layer.engine import Engine, Request
from ik_layer.server import encode
from ik_layer.server.decode import IKJob, frame_keys, prepare
from ik_layer.server.predict import Prediction, assemble, joined

__all__ = ["IKStages"]


class IKStages:
    """The stages of the IK requests of one robot, run in its worker's thread.

    Args:
        robot: the robot the requests are for.
    """

    def __init__(self, robot: Robot) -> None:
        self.robot = robot
        self._seeds = itertools.count(1)  # one random stream per part
        self._sphere_links = [link for link, _centre, _radius in robot.collision_spheres]

    def decode(self, jobs: Sequence[IKJob]) -> list[Problem[Tensor | np.ndarray] | IKLayerError]:
        """The checked problem of each job, or the error that refuses it.

        The jobs are checked together (:func:`~ik_layer.server.decode.prepare`); if that fails, each alone, so that
        an invalid job cannot fail its neighbours.
        """
        if not jobs:
            return []
        try:
            return list(prepare(self.robot, jobs))
        except IKLayerError:
            return [self._decode_alone(job) for job in jobs]

    def search(self, job: IKJob, problem: Problem[Tensor | np.ndarray]) -> SolutionSearch | None:
        """The search for ``job``'s solutions over its checked ``problem``, pulled towards its objective; None for a
        job of one solve (:attr:`IKJob.searches`)."""
        if not job.searches:
            return None
        pulled = objective_problem(self.robot, problem.on_device(self.robot), job.objective)
        return SolutionSearch(self.robot, pulled, job.num_solutions, job.objective)

    def submit(self, engine: Engine, problem: Problem[Tensor | np.ndarray], rows: slice, deadline: float) -> Request:
        """Queue the rows ``rows`` of ``problem`` on ``engine`` as a part of their own, with its own random stream."""
        return engine.submit(problem.select(rows), next(self._seeds), deadline)

    def solve(
        self, engine: Engine, problem: Problem[Tensor | np.ndarray], deadline: float
    ) -> IKResult[Tensor | np.ndarray]:
        """Solve the whole of ``problem`` on ``engine``, idle, at once (:meth:`Engine.solve_arrays`: the answers a
        part of all its rows would get, with the same random stream; numpy arrays where the host holds them)."""
        return engine.solve_arrays(problem, next(self._seeds), deadline)

    def answers(self, parts: Sequence[Request]) -> IKResult:
        """The answers of a problem's finished parts, in row order."""
        return joined(parts)

    def collect(self, job: IKJob, answers: IKResult[Tensor | np.ndarray]) -> Prediction:
        """The prediction of ``job`` from its answers: its problem's, or its search's result.

        Raises:
            IKLayerError: the answer cannot be sent (non-finite values).
        """
        return assemble(self.robot, job, answers)

    def encode(self, prediction: Prediction) -> bytes:
        """The JSON body answering a request with ``prediction``."""
        return encode.ik_response(self.robot.name, prediction, frame_keys(self.robot), self._sphere_links)

    def _decode_alone(self, job: IKJob) -> Problem[Tensor | np.ndarray] | IKLayerError:
        try:
            return prepare(self.robot, [job])[0]
        except IKLayerError as err:
            return err
