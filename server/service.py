"""Schemas <-> tensors: everything the routes need from ik-layer, with no FastAPI in sight."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

import ik_layer
from ik_layer import IKLayerError, NonFiniteError, Robot
from ik_layer.lie import matrix_to_pose
from server.schemas import IKRequest, IKSolution, Pose, RobotInfo
from server.settings import Settings

__all__ = [
    "FieldError",
    "IKJob",
    "SolverOptions",
    "TooManyRows",
    "default_options",
    "fk_poses",
    "ik_job",
    "load_robots",
    "parse_robot_spec",
    "robot_info",
    "solve_jobs",
    "warm_up",
]


class FieldError(IKLayerError):
    """A request field is invalid for this robot; ``loc`` names it as FastAPI's validation errors do."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class TooManyRows(Exception):
    """A request holds more targets or configurations than the server takes in one request (413)."""


@dataclass(frozen=True)
class SolverOptions:
    """The solver options of a request, all resolved; requests with equal options share batches."""

    position_tolerance: float
    orientation_tolerance: float
    max_iterations: int
    num_seeds: int


@dataclass(frozen=True)
class IKJob:
    """One IK request as CPU tensors in the robot's dtype.

    Attributes:
        targets: (n, 7) poses ``[x, y, z, qx, qy, qz, qw]``, quaternions normalised.
        seed: (n, dof) warm starts, or None.
        options: resolved solver options.
        gradient: whether the request asked for dq/d(target twist).
    """

    targets: Tensor
    seed: Tensor | None
    options: SolverOptions
    gradient: bool

    @property
    def rows(self) -> int:
        """Number of targets."""
        return self.targets.shape[0]


def parse_robot_spec(spec: str) -> tuple[str, str | None]:
    """``"ur5e"`` -> ``("ur5e", None)``; ``"arm.urdf:tool0"`` -> ``("arm.urdf", "tool0")``."""
    path, sep, frame = spec.rpartition(":")
    if sep and path.lower().endswith(".urdf") and frame:
        return path, frame
    return spec, None


def load_robots(specs: Iterable[str], device: torch.device, dtype: torch.dtype) -> dict[str, Robot]:
    """Load every robot of ``specs`` (see :func:`parse_robot_spec`), keyed by robot name.

    Raises:
        IKLayerError: a robot cannot be loaded.
        ValueError: two specs give robots of the same name.
    """
    robots: dict[str, Robot] = {}
    for spec in specs:
        source, frame = parse_robot_spec(spec)
        robot = ik_layer.load_robot(source, frame, dtype=dtype, device=device)
        if robot.name in robots:
            raise ValueError(f"two robots are named {robot.name!r} (from {spec!r}); load each name once")
        robots[robot.name] = robot
    return robots


def warm_up(robot: Robot, options: SolverOptions) -> None:
    """One tiny FK, solve and gradient, so the first request does not pay for lazy initialisation."""
    q = ((robot.lower + robot.upper) / 2)[None]
    target = robot.fk(q)
    result = ik_layer.solve(robot, target, max_iterations=min(options.max_iterations, 4), num_seeds=options.num_seeds)
    ik_layer.target_gradient(robot, result.q)


def robot_info(robot: Robot) -> RobotInfo:
    """The public description of a robot."""
    return RobotInfo(
        name=robot.name,
        dof=robot.dof,
        joint_names=list(robot.joint_names),
        lower=robot.lower.tolist(),
        upper=robot.upper.tolist(),
        ee_frame=robot.ee_frame,
    )


def default_options(settings: Settings) -> SolverOptions:
    """The solver options of a request that sets none."""
    return SolverOptions(
        position_tolerance=settings.position_tolerance,
        orientation_tolerance=settings.orientation_tolerance,
        max_iterations=settings.max_iterations,
        num_seeds=settings.num_seeds,
    )


def ik_job(robot: Robot, request: IKRequest, settings: Settings) -> IKJob:
    """Check ``request`` against the robot and the server's limits and turn it into tensors.

    Raises:
        TooManyRows: more targets than ``settings.max_targets``.
        FieldError: a seed row of the wrong length.
    """
    _check_rows("targets", len(request.targets), settings.max_targets)
    defaults = default_options(settings)
    options = SolverOptions(
        position_tolerance=request.position_tolerance or defaults.position_tolerance,
        orientation_tolerance=request.orientation_tolerance or defaults.orientation_tolerance,
        max_iterations=defaults.max_iterations if request.max_iterations is None else request.max_iterations,
        num_seeds=request.num_seeds or defaults.num_seeds,
    )
    targets = torch.tensor([t.position + t.orientation for t in request.targets], dtype=robot.dtype)
    seed = None if request.seed is None else _configurations(robot, request.seed, "seed")
    return IKJob(targets=targets, seed=seed, options=options, gradient=request.return_gradient)


def solve_jobs(robot: Robot, jobs: Sequence[IKJob]) -> list[list[IKSolution]]:
    """Solve several jobs with equal options as one batch; one list of solutions per job.

    Jobs without warm starts get random seeds in the joint limits for their rows,
    which is what the solver would draw for them anyway.
    """
    options = jobs[0].options
    if any(job.options != options for job in jobs):
        raise ValueError("solve_jobs takes jobs with equal solver options only")
    device = robot.device
    targets = torch.cat([job.targets for job in jobs]).to(device)
    q0 = None
    if any(job.seed is not None for job in jobs):
        q0 = torch.cat([robot.random_q((job.rows,)) if job.seed is None else job.seed.to(device) for job in jobs])
    result = ik_layer.solve(
        robot,
        targets,
        q0=q0,
        num_seeds=options.num_seeds,
        max_iterations=options.max_iterations,
        position_tolerance=options.position_tolerance,
        orientation_tolerance=options.orientation_tolerance,
    )
    _check_finite("solutions", result.q, result.position_error, result.orientation_error)
    wants = torch.cat([torch.full((job.rows,), job.gradient, dtype=torch.bool) for job in jobs])
    gradients: list[list[list[float]] | None] = [None] * len(wants)
    if bool(wants.any()):
        rows = wants.nonzero().squeeze(-1)
        grad = ik_layer.target_gradient(robot, result.q[rows.to(device)])
        _check_finite("gradients", grad)
        for row, value in zip(rows.tolist(), grad.tolist(), strict=False):
            gradients[row] = value
    q, success = result.q.tolist(), result.success.tolist()
    pos, ori, iters = result.position_error.tolist(), result.orientation_error.tolist(), result.iterations.tolist()
    solutions = [
        IKSolution.model_construct(
            q=q[i],
            success=success[i],
            position_error=pos[i],
            orientation_error=ori[i],
            iterations=iters[i],
            gradient=gradients[i],
        )
        for i in range(len(q))
    ]
    out, start = [], 0
    for job in jobs:
        out.append(solutions[start : start + job.rows])
        start += job.rows
    return out


def fk_poses(robot: Robot, q: list[list[float]], settings: Settings) -> list[Pose]:
    """End-effector poses of configurations ``q`` (one list of dof values each).

    Raises:
        TooManyRows: more configurations than ``settings.max_targets``.
        FieldError: a configuration of the wrong length.
    """
    _check_rows("q", len(q), settings.max_targets)
    poses = matrix_to_pose(robot.fk(_configurations(robot, q, "q").to(robot.device))).tolist()
    return [Pose.model_construct(position=p[:3], orientation=p[3:]) for p in poses]


def _check_finite(what: str, *tensors: Tensor) -> None:
    """JSON has no NaN: refuse (422) rather than answer with numbers it cannot carry."""
    if not all(bool(torch.isfinite(t).all()) for t in tensors):
        raise NonFiniteError(f"the solver produced non-finite {what} (singular or extreme targets)")


def _check_rows(field: str, rows: int, limit: int) -> None:
    if rows > limit:
        raise TooManyRows(f"{field} has {rows} entries; this server takes at most {limit} per request")


def _configurations(robot: Robot, rows: list[list[float]], field: str) -> Tensor:
    """(n, dof) tensor of ``rows``, each checked to hold ``robot.dof`` values."""
    for i, row in enumerate(rows):
        if len(row) != robot.dof:
            raise FieldError(
                ("body", field, i), f"{field}[{i}] has {len(row)} values but {robot.name} has {robot.dof} joints"
            )
    return torch.tensor(rows, dtype=robot.dtype)
