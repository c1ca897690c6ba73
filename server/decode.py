"""Stage 1, decode: a request body -> a validated model -> CPU tensors in the robot's dtype, checked against it.

:func:`parse` runs pydantic (:mod:`ik_layer.server.schemas`: strict JSON types, bounds) and reports at most
:data:`MAX_REPORTED_ERRORS` errors, without echoing the input. What is left needs the robot (its number of joints)
or the server's limits (rows per request, time limits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import torch
from pydantic import BaseModel, ValidationError
from torch import Tensor

from ik_layer import OPTION_SPECS, Robot, SolveOptions
from ik_layer.server.exceptions import FieldError, InvalidBody, TooManyRows
from ik_layer.server.schemas import FKRequest, IKRequest
from ik_layer.server.settings import Settings

__all__ = ["MAX_REPORTED_ERRORS", "IKJob", "fk_configurations", "ik_job", "parse"]

MAX_REPORTED_ERRORS = 10
"""Validation errors listed in a 422 answer at most (the answer says how many there were)."""

M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], body: bytes) -> M:
    """``body`` (JSON) validated as ``model``, strictly typed.

    Raises:
        InvalidBody: malformed JSON or invalid values; holds the first :data:`MAX_REPORTED_ERRORS` errors.
    """
    try:
        return model.model_validate_json(body, strict=True)
    except ValidationError as err:
        errors = err.errors(include_url=False, include_context=False, include_input=False)
        raise InvalidBody(errors[:MAX_REPORTED_ERRORS], err.error_count()) from None


@dataclass(frozen=True)
class IKJob:
    """One IK request as CPU tensors in the robot's dtype.

    Attributes:
        targets: (n, 7) poses ``[x, y, z, qx, qy, qz, qw]``, quaternions normalised.
        warm_start: (n, dof) warm starts, or None.
        options: the solver options, the server's defaults for those the request left out; jobs with equal
            options may share a batch.
        gradient: whether the request asked for dq/d(target twist).
        timeout: time limit of the request [s], from its arrival.
    """

    targets: Tensor
    warm_start: Tensor | None
    options: SolveOptions
    gradient: bool
    timeout: float

    @property
    def rows(self) -> int:
        """Number of targets."""
        return self.targets.shape[0]


def ik_job(robot: Robot, request: IKRequest, settings: Settings) -> IKJob:
    """The job of an IK request: targets, warm starts, options and time limit.

    Raises:
        TooManyRows: more targets than ``settings.max_targets``.
        FieldError: a warm-start row of the wrong length, or a timeout over ``settings.max_timeout``.
    """
    _check_rows("targets", len(request.targets), settings.max_targets)
    timeout = settings.timeout if request.timeout is None else request.timeout
    if timeout > settings.max_timeout:
        raise FieldError(
            ("body", "timeout"), f"timeout is {timeout:g} s; this server allows at most {settings.max_timeout:g} s"
        )
    options = SolveOptions.build(settings.solve_options(), **{name: getattr(request, name) for name in OPTION_SPECS})
    targets = torch.tensor([t.position + t.orientation for t in request.targets], dtype=robot.dtype)
    warm_start = None if request.warm_start is None else _configurations(robot, request.warm_start, "warm_start")
    return IKJob(targets, warm_start, options, gradient=request.return_gradient, timeout=timeout)


def fk_configurations(robot: Robot, request: FKRequest, settings: Settings) -> Tensor:
    """The (n, dof) configurations of an FK request.

    Raises:
        TooManyRows: more configurations than ``settings.max_targets``.
        FieldError: a configuration of the wrong length.
    """
    _check_rows("q", len(request.q), settings.max_targets)
    return _configurations(robot, request.q, "q")


def _check_rows(field: str, rows: int, limit: int) -> None:
    if rows > limit:
        raise TooManyRows(f"{field} has {rows} entries; this server takes at most {limit} per request", limit)


def _configurations(robot: Robot, rows: list[list[float]], field: str) -> Tensor:
    """(n, dof) tensor of ``rows``, each checked to hold ``robot.dof`` values."""
    for i, row in enumerate(rows):
        if len(row) != robot.dof:
            raise FieldError(
                ("body", field, i), f"{field}[{i}] has {len(row)} values but {robot.name} has {robot.dof} joints"
            )
    return torch.tensor(rows, dtype=robot.dtype)
