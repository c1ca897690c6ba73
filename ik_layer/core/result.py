"""What every solver answers: :class:`IKResult`, and the worst-frame error measure its errors use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Generic, cast

import numpy as np
import torch
from torch import Tensor
from typing_extensions import TypeVar  # a TypeVar with a default (typing's from Python 3.13)

__all__ = ["CANCELLED", "DEADLINE", "EXHAUSTED", "ROW_STATUS", "SOLVED", "IKResult", "frame_errors"]

SOLVED = 1  # met the tolerances (and, with collision, free): the answer
EXHAUSTED = 2  # used its budget without success: the best configuration seen
DEADLINE = 4  # stopped when the solve's time ran out: the best configuration so far
CANCELLED = 5  # stopped because its request was cancelled (the server's)
ROW_STATUS = {SOLVED: "solved", EXHAUSTED: "exhausted", DEADLINE: "deadline", CANCELLED: "cancelled"}
"""Why a target stopped, by the code :attr:`IKResult.status` holds: its name (the server's and the client's)."""

ArrayT = TypeVar("ArrayT", bound=Tensor | np.ndarray, default=Tensor, covariant=True)
"""The kind of an :class:`IKResult`'s fields: tensors from every solver; numpy arrays where
:meth:`ik_layer.client.RemoteIKResult.result` is asked for an answer that came as numpy arrays, and where
:meth:`Engine.solve_arrays <ik_layer.engine.Engine.solve_arrays>` reads them off the host."""

MappedT = TypeVar("MappedT", bound=Tensor | np.ndarray)  # the kind of a mapped result's fields


@dataclass(frozen=True)
class IKResult(Generic[ArrayT]):
    """Solutions of a batch of IK problems; every field has the targets' batch shape ``(...)``.

    Fields are tensors (``IKResult``, i.e. ``IKResult[Tensor]``), as every solver answers; the client's
    :meth:`~ik_layer.client.RemoteIKResult.result` gives its fields as they came, numpy arrays for an answer asked
    with ``numpy=True`` (``IKResult[Tensor | np.ndarray]``).

    Attributes:
        q: (..., nq) best configuration found, inside the joint limits (a floating base first, see
            :class:`~ik_layer.Robot`; nq == dof without one).
        success: (...) bool, both errors within their tolerances (at every end-effector frame).
        position_error: (...) [m] norm of the weighted position error axes (the worst frame's).
        orientation_error: (...) [rad] norm of the weighted rotation-vector error axes (the worst frame's).
        iterations: (...) int64, iterations until success (the budget used if it failed), counted on the target's
            clock: seeds running side by side share it, while a target solved alone (:meth:`Engine.solve
            <ik_layer.engine.Engine.solve>`) runs its seeds one after another and may count past ``max_iterations``.
        min_distance: (...) [m] with obstacles or self-collision: the least signed distance between the robot's
            collision spheres and the obstacles (or each other) at ``q`` (negative: they overlap; a success is at
            least ``collision_margin``); None without.
        closest_pair: (..., 2) int64 with ``min_distance``: its pair, the robot's collision sphere (an index into
            ``robot.collision_spheres``) and the obstacle (an index into the obstacles, a batched shape counting
            each of its batch in order) or, negative, ``-1 - j`` for the robot's sphere ``j`` (self-collision);
            None without.
        status: (...) int32, why each target stopped: a code of :data:`ROW_STATUS` (``SOLVED`` 1,
            ``EXHAUSTED`` 2, ``DEADLINE`` 4: the solve's ``timeout`` ran out first; ``CANCELLED`` 5); ``success``
            is ``status == SOLVED``. None where a result was built without.
        goal: (...) int64 with ``goal_set=True``: the index of the goal each answer reaches (the nearest miss
            where none was reached); else None.
    """

    q: ArrayT
    success: ArrayT
    position_error: ArrayT
    orientation_error: ArrayT
    iterations: ArrayT
    min_distance: ArrayT | None = None
    closest_pair: ArrayT | None = None
    status: ArrayT | None = None
    goal: ArrayT | None = None

    def map(self, fn: Callable[[ArrayT], MappedT]) -> IKResult[MappedT]:
        """This result with ``fn`` applied to each field it holds (fields not measured stay None)."""
        held = {name: getattr(self, name) for name in _FIELDS}
        return IKResult(**{name: None if x is None else fn(x) for name, x in held.items()})  # type: ignore[arg-type]

    def reshaped(self, batch: torch.Size | tuple[int, ...]) -> IKResult[ArrayT]:
        """This result with every field's batch dimensions (``success``'s) reshaped to ``batch``."""
        rows = self.success.ndim

        def reshape(x: Tensor | np.ndarray) -> Tensor | np.ndarray:
            return x.reshape((*batch, *x.shape[rows:]))

        return cast("IKResult[ArrayT]", self.map(reshape))


_FIELDS = tuple(f.name for f in fields(IKResult))  # (dataclasses.fields() walks the class's fields on each call)


def frame_errors(error: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """Position [m] and orientation [rad] error norms (...) over the weighted axes, the worst frame's.

    ``error`` and ``weights`` (..., 6F) hold F frames' ``[p; rotation vector]`` errors and their weights; an axis
    of zero weight is left out (as the fused kernel's ``errors_of``).
    """
    masked = (error * (weights > 0)).unflatten(-1, (-1, 6))
    return masked[..., :3].norm(dim=-1).amax(-1), masked[..., 3:].norm(dim=-1).amax(-1)
