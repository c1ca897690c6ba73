"""The ``ik-layer`` command line: list robots, run FK, batch IK and trajectories on files, serve, benchmark, view.

Every subcommand returns an exit code: 0 on success, 2 on bad input (a one-line
message on stderr, no traceback), 130 when interrupted with Ctrl-C; ``serve``
becomes the server, and exits with its status (0 after Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from ik_layer.api import solve
from ik_layer.cli.files import (
    BASE_COLUMNS,
    POSE_COLUMNS,
    Rows,
    Table,
    check_output,
    drop_invalid,
    format_lines,
    invalid_poses,
    invalid_q,
    pose_columns,
    q_columns,
    read_q,
    read_targets,
    write_csv,
    write_table,
)
from ik_layer.collision.scene import load_scene
from ik_layer.collision.shapes import Obstacle
from ik_layer.core.options import OPTION_SPECS, OptionSpec, SolveOptions
from ik_layer.core.result import ROW_STATUS, IKResult
from ik_layer.core.solutions import OBJECTIVES
from ik_layer.exceptions import CLIError, IKLayerError, InputFileError
from ik_layer.loading import load_robot
from ik_layer.model.lie import matrix_to_pose
from ik_layer.model.robot import Robot
from ik_layer.robots import REGISTRY
from ik_layer.trajectory.solve import TrajectoryResult, solve_trajectory

__all__ = ["main"]

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_SOURCE_ROOT = Path(__file__).resolve().parents[2]
_PASS_THROUGH = ("serve", "bench")  # subcommands whose unknown arguments go to the program they run


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ik-layer`` command line on ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    parser = build_parser()
    args, passed_on = parser.parse_known_args(argv)
    if passed_on and args.command not in _PASS_THROUGH:
        parser.error(f"unrecognized arguments: {' '.join(passed_on)}")
    args.passed_on = passed_on
    try:
        return args.run(args)
    except BrokenPipeError:  # e.g. `ik-layer robots | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (IKLayerError, OSError) as err:
        message = " ".join(line.strip() for line in str(err).splitlines())  # one line, whatever a parser said
        print(f"ik-layer {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"ik-layer {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with the ``robots``, ``fk``, ``solve``, ``trajectory``, ``serve``, ``bench`` and ``view``
    subcommands."""
    parser = argparse.ArgumentParser(prog="ik-layer", description="Differentiable batched inverse kinematics.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    robots = sub.add_parser("robots", help="list the built-in robots with their joints and limits")
    robots.add_argument("--floating-base", action="store_true", help="list them on a free-flyer base")
    robots.set_defaults(run=run_robots)

    fk = sub.add_parser("fk", help="end-effector poses of joint configurations")
    _robot_arguments(fk)
    fk.add_argument(
        "q_file",
        type=Path,
        help="configurations: .csv (header: joint names, after base.x ... base.qw with --floating-base), .npy/.npz, "
        ".jsonl",
    )
    fk.add_argument("-o", "--output", type=Path, help="output .csv/.npz/.jsonl (default: CSV on stdout)")
    fk.set_defaults(run=run_fk)

    ik = sub.add_parser("solve", help="solve IK for every target of a file")
    _robot_arguments(ik)
    ik.add_argument("targets_file", type=Path, help="targets: .csv (x,y,z,qx,qy,qz,qw), .npy/.npz, .jsonl")
    ik.add_argument("-o", "--output", type=Path, required=True, help="output .csv/.npz/.jsonl")
    ik.add_argument("--batch-size", type=_positive, default=1024, help="targets per solver call (default 1024)")
    ik.add_argument("--warm-start", type=Path, help="warm starts: one configuration per target (or one for all)")
    ik.add_argument("--random-seed", type=int, help="seed of the solver's random generator (reproducible runs)")
    ik.add_argument(
        "--num-solutions",
        type=_positive,
        default=1,
        help="up to this many distinct solutions per target, one output row each (a solution column numbers them)",
    )
    ik.add_argument(
        "--goal-set",
        type=_positive,
        metavar="G",
        help="goal sets: every G consecutive targets are one row's candidate poses; the row reaches one of them (the "
        "first solved by --objective), one output row per row with a goal column (0..G-1) naming it; warm starts "
        "are per row",
    )
    ik.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="first",
        help="how solutions rank, best first: as found, closest to --warm-start (TRAC-IK's Distance), most "
        "manipulable (Manip1) or closest to the posture (default first)",
    )
    ik.add_argument(
        "--timeout",
        type=_seconds,
        help="the most seconds each solver call (--batch-size rows) may take; rows unsolved then keep their best "
        "configuration so far, status deadline (default: the iteration budgets alone)",
    )
    ik.add_argument(
        "--scene",
        type=Path,
        help="obstacles every answer keeps --collision-margin clear of: a YAML/JSON list of {type: sphere, center, "
        "radius}, {type: box, pose, size} and {type: capsule, a, b, radius} in the base frame [m] (adds a "
        "min_distance column)",
    )
    ik.add_argument(
        "--spheres",
        type=Path,
        help="the robot's collision spheres (YAML/JSON, link: [{center, radius}]); default: the built-in robot's, "
        "or spheres covering the URDF's collision primitives",
    )
    for spec in OPTION_SPECS.values():
        flag = "--" + spec.name.replace("_", "-")
        help_text = f"{spec.help}: {spec.describe_range()} (default {spec.default:g})"
        ik.add_argument(flag, type=_option_type(spec), default=spec.default, help=help_text)
    ik.set_defaults(run=run_solve)
    _trajectory_parser(sub)

    serve = sub.add_parser(
        "serve", help="start the HTTP service; further arguments go to python -m ik_layer.server", add_help=False
    )
    serve.set_defaults(run=run_serve)

    bench = sub.add_parser(
        "bench", help="run bench/report.py from a source checkout (--quick, --out DIR, ...)", add_help=False
    )
    bench.set_defaults(run=run_bench)

    view = sub.add_parser("view", help="interactive 3D viewer in the browser: drag the target, IK follows")
    view.add_argument("robot", help=f"built-in robot ({', '.join(sorted(REGISTRY))}) or a URDF path")
    view.add_argument("--urdf", type=Path, help="URDF whose visual meshes to draw (default: ROBOT's own file)")
    view.add_argument("--package-dir", type=Path, action="append", default=[], help="folder of package:// meshes")
    view.add_argument("--ee-frame", help="end-effector frame (default: the robot's)")
    view.add_argument("--host", default="127.0.0.1", help="interface to serve on (default 127.0.0.1)")
    view.add_argument("--port", type=int, default=8080, help="port of the page (default 8080)")
    view.add_argument("--scene", type=Path, help="obstacles to draw and solve among, each draggable (see solve)")
    view.add_argument("--self-collision", action="store_true", help="keep the arm clear of itself too")
    view.set_defaults(run=run_view)
    return parser


def _robot_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``fk`` and ``solve``: robot, frame, device, dtype, invalid-row policy."""
    parser.add_argument("robot", help=f"built-in robot ({', '.join(sorted(REGISTRY))}) or a URDF path")
    parser.add_argument("--ee-frame", help="end-effector frame (default: the robot's)")
    parser.add_argument(
        "--ee-frames",
        type=_names,
        help="comma-separated end-effector frames, all solved at once (pose columns FRAME.x ... FRAME.qw)",
    )
    parser.add_argument(
        "--active-joints", type=_names, help="comma-separated joints the solver moves (default: the chain's)"
    )
    parser.add_argument(
        "--locked",
        type=_locked_joint,
        action="append",
        default=[],
        metavar="JOINT=VALUE",
        help="hold a joint at a value [rad or m] (repeatable)",
    )
    parser.add_argument(
        "--floating-base",
        action="store_true",
        help="put the robot on a free-flyer base: configurations start with its pose in the world, columns "
        f"{' '.join(BASE_COLUMNS)} [m; a quaternion, normalised], then the joints; poses and targets are in the world",
    )
    parser.add_argument(
        "--base-frame",
        help="the frame the chains start from (a torso, a camera): poses and targets are in it; the joints that "
        "move it stay locked (default: the model's root)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="(default cpu)")
    parser.add_argument("--dtype", choices=tuple(_DTYPES), default="float64", help="(default float64)")
    parser.add_argument(
        "--on-invalid",
        choices=("skip", "error"),
        default="error",
        help="rows with NaN values or zero quaternions: skip or refuse",
    )


def _trajectory_parser(sub: argparse._SubParsersAction) -> None:
    """The ``trajectory`` subcommand: one clip of frames, one per row of a targets file."""
    clip = sub.add_parser(
        "trajectory",
        help="solve a clip of targets (one frame per row) frame after frame within joint velocity limits",
        description="Solve the clip of a targets file, one frame per row in time order, as "
        "ik_layer.solve_trajectory does: no joint steps more than its velocity limit times --dt between frames.",
    )
    _robot_arguments(clip)
    clip.add_argument("targets_file", type=Path, help="the clip: .csv (x,y,z,qx,qy,qz,qw), .npy/.npz, .jsonl")
    clip.add_argument("--dt", type=_seconds, required=True, help="time between frames [s]")
    clip.add_argument("-o", "--output", type=Path, help="output .csv/.npz/.jsonl (default: CSV on stdout)")
    clip.add_argument(
        "--velocity-limit",
        type=_velocities,
        metavar="V[,V...]",
        help="joint velocity limits [rad/s or m/s]: one for every joint, or one per joint (default: the model's "
        "<limit velocity>)",
    )
    clip.add_argument(
        "--acceleration", type=_non_negative, default=0.0, help="weight of the acceleration cost (default 0: none)"
    )
    clip.add_argument(
        "--warm-start",
        type=Path,
        help="the configuration the robot rests at before the first frame: a file of one configuration",
    )
    clip.add_argument("--posture", type=Path, help="a preferred configuration every frame is pulled towards")
    clip.add_argument(
        "--posture-weight", type=_non_negative, default=0.01, help="weight of the posture cost (default 0.01)"
    )
    clip.add_argument("--random-seed", type=int, help="seed of the solver's random generator (reproducible runs)")
    clip.add_argument(
        "--chunk-size",
        type=_positive,
        default=256,
        help="frames per solver call (default 256), the last answer carried to the next chunk as its warm start: "
        "the same answers as one call without --acceleration; with it the clip is solved in one call",
    )
    clip.add_argument(
        "--progress",
        action="store_true",
        help="show the progress line on stderr even when it is not a terminal (it shows on a terminal anyway)",
    )
    for spec in OPTION_SPECS.values():
        if spec.name in _TRAJECTORY_REFUSED:
            continue
        flag = "--" + spec.name.replace("_", "-")
        help_text = f"{spec.help}: {spec.describe_range()} (default {spec.default:g})"
        clip.add_argument(flag, type=_option_type(spec), default=spec.default, help=help_text)
    clip.set_defaults(run=run_trajectory)


_TRAJECTORY_REFUSED = ("centring", "manipulability", "self_collision")  # secondary terms solve_trajectory refuses


def _velocities(text: str) -> float | list[float]:
    """``V`` or ``V,V,...``: positive velocity limits."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not all(v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"velocity limits must be > 0, got {text!r}")
    return values[0] if len(values) == 1 else values


def _non_negative(text: str) -> float:
    value = float(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _locked_joint(text: str) -> tuple[str, float]:
    """``JOINT=VALUE`` -> ``(JOINT, VALUE)``."""
    name, sep, value = text.partition("=")
    try:
        if not (sep and name.strip()):
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected JOINT=VALUE (a number), got {text!r}") from None


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _option_type(spec: OptionSpec) -> Callable[[str], int | float]:
    """argparse ``type`` of a solver option: parse, then check against the option's bounds."""

    def parse(text: str) -> int | float:
        try:
            return spec.check(spec.kind(text))
        except ValueError as err:  # IKLayerError is a ValueError too
            raise argparse.ArgumentTypeError(f"must be {spec.describe_range()}, got {text!r}") from err

    parse.__name__ = spec.kind.__name__  # argparse names the type in its messages
    return parse


def run_robots(args: argparse.Namespace) -> int:
    """Print each built-in robot: name, dof, default frame, description, joint limits (and the base's columns
    with ``--floating-base``)."""
    for name in sorted(REGISTRY):
        robot = load_robot(name, floating_base=args.floating_base)
        print(f"{name}: {robot.dof} dof, ee_frame={robot.ee_frame}  ({REGISTRY[name].description})")
        if robot.floating_base:
            print(f"  {'base':<24} {' '.join(BASE_COLUMNS)} (pose in the world, unbounded)")
        for joint, lo, hi in zip(robot.joint_names, robot.lower.tolist(), robot.upper.tolist(), strict=False):
            print(f"  {joint:<24} [{lo:+.4f}, {hi:+.4f}]")
    return EXIT_OK


def run_fk(args: argparse.Namespace) -> int:
    """Write the end-effector pose of every configuration of ``args.q_file``."""
    robot = _robot(args)
    if args.output is not None:
        check_output(args.output)
    rows = read_q(args.q_file, q_columns(robot.joint_names, robot.floating_base))
    rows, skipped = drop_invalid(rows, invalid_q(rows.values, robot.floating_base), args.on_invalid, _q_invalid(robot))
    _report_skipped(rows.path, skipped)
    q = torch.as_tensor(rows.values, dtype=robot.dtype, device=robot.device)
    columns = pose_columns(robot.ee_frames)
    pose = matrix_to_pose(robot.fk(q)).detach().cpu().double().numpy().reshape(len(q), len(columns))
    table = Table({"line": rows.lines, "pose": pose}, {"pose": columns})
    if args.output is None:
        write_csv(sys.stdout, table)
    else:
        write_table(args.output, table)
    return EXIT_OK


def run_solve(args: argparse.Namespace) -> int:
    """Solve every target of ``args.targets_file`` in chunks, with a progress bar; write the results."""
    robot = _robot(args, args.spheres or "auto")
    obstacles = () if args.scene is None else load_scene(args.scene)
    check_output(args.output)
    targets, warm_start, skipped = _solve_inputs(args, robot)
    if args.goal_set is None:
        _report_skipped(targets.path, skipped)
    else:
        _report_skipped(targets.path, skipped, f"row(s) of {args.goal_set} goals", "starting at")
    generator = torch.Generator(device=robot.device)
    if args.random_seed is None:
        generator.seed()
    else:
        generator.manual_seed(args.random_seed)
    chunks: list[IKResult] = []
    start = time.perf_counter()
    try:
        _solve_chunks(args, robot, targets.values, warm_start, obstacles, generator, chunks)
    except KeyboardInterrupt:
        done = _write_results(args.output, robot, targets.lines, chunks, args.num_solutions)
        print(
            f"ik-layer solve: interrupted; wrote the {done} of {len(targets.lines)} rows solved so far "
            f"to {args.output}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    _write_results(args.output, robot, targets.lines, chunks, args.num_solutions)
    _print_summary(chunks, time.perf_counter() - start, args.output)
    return EXIT_OK


def _solve_inputs(args: argparse.Namespace, robot: Robot) -> tuple[Rows, np.ndarray | None, list[int]]:
    """Valid targets, their warm starts (None without ``--warm-start``) and the skipped target lines."""
    targets = read_targets(args.targets_file, robot.ee_frames)
    invalid = invalid_poses(targets.values)
    if args.goal_set is not None:
        targets, invalid = _goal_rows(targets, invalid, args.goal_set)
    warm_start = None
    if args.warm_start is not None:
        columns = q_columns(robot.joint_names, robot.floating_base)
        start_rows = _warm_start_rows(read_q(args.warm_start, columns), len(targets.lines))
        start_invalid = invalid_q(start_rows.values, robot.floating_base)
        drop_invalid(start_rows, start_invalid, args.on_invalid, _q_invalid(robot))  # refuses the file in error mode
        invalid = invalid | start_invalid
        warm_start = start_rows.values[~invalid]
    valid, skipped = drop_invalid(targets, invalid, args.on_invalid)
    return valid, warm_start, skipped


def _goal_rows(targets: Rows, invalid: np.ndarray, goals: int) -> tuple[Rows, np.ndarray]:
    """``targets`` as rows of ``goals`` consecutive poses each (a row's line: its first goal's), and which rows are
    invalid: those with an invalid goal."""
    n = len(targets.lines)
    if n % goals:
        raise InputFileError(f"{targets.path}: {n} targets do not make rows of --goal-set {goals} goals each")
    values = targets.values.reshape(n // goals, -1)
    return Rows(values, targets.lines[::goals], targets.path), np.asarray(invalid.reshape(-1, goals).any(axis=1))


def _q_invalid(robot: Robot) -> str:
    """What makes a configuration row invalid (see :func:`ik_layer.cli.files.invalid_q`), for error messages."""
    if robot.floating_base:
        return f"NaN or non-numeric values, or a zero base quaternion ({', '.join(BASE_COLUMNS[3:])} all 0)"
    return "NaN or non-numeric values"


def _warm_start_rows(rows: Rows, num_targets: int) -> Rows:
    """Warm starts with one row per target: as read, or a single row repeated."""
    if len(rows.values) == 1:
        return Rows(np.repeat(rows.values, num_targets, axis=0), np.repeat(rows.lines, num_targets), rows.path)
    if len(rows.values) != num_targets:
        raise InputFileError(
            f"{rows.path}: {len(rows.values)} warm starts for {num_targets} targets; give one per target or one for all"
        )
    return rows


def _solve_chunks(
    args: argparse.Namespace,
    robot: Robot,
    targets: np.ndarray,
    warm_start: np.ndarray | None,
    obstacles: Sequence[Obstacle],
    generator: torch.Generator,
    chunks: list[IKResult],
) -> None:
    """Solve ``targets`` (N, 7 * F) ``args.batch_size`` rows at a time, appending each result to ``chunks``."""
    options = SolveOptions(**{name: getattr(args, name) for name in OPTION_SPECS})
    done = succeeded = 0
    with tqdm(
        total=len(targets), unit="row", file=sys.stderr, disable=None, mininterval=0.5, dynamic_ncols=True
    ) as bar:
        for begin in range(0, len(targets), args.batch_size):
            rows = slice(begin, begin + args.batch_size)
            chunk = torch.as_tensor(targets[rows], dtype=robot.dtype, device=robot.device)
            goals = () if args.goal_set is None else (args.goal_set,)
            chunk = chunk.reshape(len(chunk), *goals, *robot.target_shape[:-2], len(POSE_COLUMNS))
            start = (
                None
                if warm_start is None
                else torch.as_tensor(warm_start[rows], dtype=robot.dtype, device=robot.device)
            )
            result = solve(
                robot, chunk, options, warm_start=start, obstacles=obstacles, generator=generator, timeout=args.timeout,
                num_solutions=args.num_solutions, objective=args.objective, goal_set=args.goal_set is not None,
            )  # fmt: skip
            chunks.append(result.reshaped((len(chunk) * args.num_solutions,)))  # a row per solution
            done += result.success.numel()
            succeeded += int(result.success.sum())
            bar.update(len(chunk))
            bar.set_postfix(success=f"{succeeded / done:.1%}", refresh=False)


def run_trajectory(args: argparse.Namespace) -> int:
    """Solve the clip of ``args.targets_file`` in chunks of frames, with a progress line; write one row per frame."""
    robot = _robot(args)
    if args.output is not None:
        check_output(args.output)
    if args.on_invalid == "skip":
        raise CLIError("--on-invalid skip: a clip cannot skip a frame (its time steps would change); fix the rows")
    targets = read_targets(args.targets_file, robot.ee_frames)
    targets, _ = drop_invalid(targets, invalid_poses(targets.values), "error")
    columns = q_columns(robot.joint_names, robot.floating_base)
    warm_start = None if args.warm_start is None else _one_configuration(args.warm_start, columns, robot)
    posture = None if args.posture is None else _one_configuration(args.posture, columns, robot)
    generator = torch.Generator(device=robot.device)
    if args.random_seed is None:
        generator.seed()
    else:
        generator.manual_seed(args.random_seed)
    poses = torch.as_tensor(targets.values, dtype=robot.dtype, device=robot.device)
    poses = poses.reshape(len(poses), *robot.target_shape[:-2], len(POSE_COLUMNS))
    start = time.perf_counter()
    result = trajectory_in_chunks(
        robot, poses, args, warm_start=warm_start, posture=posture, generator=generator, progress=args.progress
    )
    fields = {name: getattr(result, name).detach().cpu().numpy() for name in _TRAJECTORY_FIELDS}
    fields["status"] = np.array([ROW_STATUS[code] for code in fields["status"].tolist()], dtype=str)  # as solve's
    table = Table({"line": targets.lines, **fields}, {"q": columns})
    if args.output is None:
        write_csv(sys.stdout, table)
    else:
        write_table(args.output, table)
    seconds = time.perf_counter() - start
    n, ok = len(targets.lines), int(result.success.sum())
    print(
        f"ik-layer trajectory: {ok}/{n} frames solved ({ok / n:.1%}) in {seconds:.2f} s "
        f"({n / max(seconds, 1e-9):.0f} frames/s); largest velocity ratio {float(result.velocity_ratio.max()):.3f}; "
        f"{int(result.bounded.sum())} frame(s) solved in their velocity box"
        + ("" if args.output is None else f"; wrote {args.output}"),
        file=sys.stderr,
    )
    return EXIT_OK


_TRAJECTORY_FIELDS = (
    "q", "success", "position_error", "orientation_error", "max_step", "velocity_ratio", "bounded", "status",
)  # fmt: skip


def trajectory_in_chunks(
    robot: Robot,
    poses: torch.Tensor,
    args: argparse.Namespace,
    *,
    warm_start: torch.Tensor | None,
    posture: torch.Tensor | None,
    generator: torch.Generator,
    progress: bool = False,
) -> TrajectoryResult:
    """:func:`~ik_layer.solve_trajectory` of the clip ``poses`` (T, [F,] 7), ``args.chunk_size`` frames per call.

    Each chunk starts from the last answer of the one before as its warm start, with the same generator: frame ``t``
    depends on the frame before it only, so the answers are those of one call. With ``args.acceleration`` a frame
    depends on the two frames before it, which a warm start cannot carry: the clip is then solved in one call.
    """
    options = SolveOptions(**{name: getattr(args, name) for name in OPTION_SPECS if name not in _TRAJECTORY_REFUSED})
    frames = len(poses)
    size = args.chunk_size if args.acceleration == 0 else frames
    limit = args.velocity_limit
    if isinstance(limit, list):
        limit = torch.tensor(limit, dtype=robot.dtype, device=robot.device)
    parts: list[TrajectoryResult] = []
    with tqdm(
        total=frames, unit="frame", file=sys.stderr, disable=False if progress else None, mininterval=0.5,
        dynamic_ncols=True,
    ) as bar:  # fmt: skip
        for begin in range(0, frames, size):
            part = solve_trajectory(
                robot, poses[begin : begin + size], options, dt=args.dt, velocity_limit=limit,
                acceleration=args.acceleration, warm_start=warm_start, posture=posture,
                posture_weight=args.posture_weight, generator=generator,
            )  # fmt: skip
            parts.append(part)
            warm_start = part.q[-1]
            bar.update(len(part.q))
            solved = sum(int(p.success.sum()) for p in parts)
            bar.set_postfix(success=f"{solved / (begin + len(part.q)):.1%}", refresh=False)
    return TrajectoryResult(*(torch.cat([getattr(p, name) for p in parts]) for name in _TRAJECTORY_FIELDS))


def _one_configuration(path: Path, columns: list[str], robot: Robot) -> torch.Tensor:
    """The one configuration (nq,) of a file (``--warm-start``, ``--posture``)."""
    rows = read_q(path, columns)
    drop_invalid(rows, invalid_q(rows.values, robot.floating_base), "error", _q_invalid(robot))
    if len(rows.values) != 1:
        raise InputFileError(f"{rows.path}: {len(rows.values)} configurations; give one (the clip's)")
    return torch.as_tensor(rows.values[0], dtype=robot.dtype, device=robot.device)


def _write_results(path: Path, robot: Robot, lines: np.ndarray, chunks: list[IKResult], solutions: int) -> int:
    """Write the solved chunks (q, success, errors, iterations, status and, with obstacles or self-collision, the
    least distance per row, with goal sets the goal reached; ``solutions`` rows per target, numbered by a
    ``solution`` column when more than one) to ``path``; return the row count."""
    q = _gather(chunks, "q", np.float64).reshape(-1, robot.nq)
    columns = {
        "line": np.repeat(lines, solutions)[: len(q)],
        "q": q,
        "success": _gather(chunks, "success", np.bool_),
        "position_error": _gather(chunks, "position_error", np.float64),
        "orientation_error": _gather(chunks, "orientation_error", np.float64),
        "iterations": _gather(chunks, "iterations", np.int64),
        "status": np.array([ROW_STATUS[code] for code in _gather(chunks, "status", np.int32).tolist()], dtype=str),
    }
    if solutions > 1:
        columns["solution"] = np.tile(np.arange(solutions), len(lines))[: len(q)]
    if chunks and chunks[0].min_distance is not None:
        columns["min_distance"] = _gather(chunks, "min_distance", np.float64)
    if chunks and chunks[0].goal is not None:
        columns["goal"] = _gather(chunks, "goal", np.int64)
    table = Table(columns, {"q": q_columns(robot.joint_names, robot.floating_base)})
    write_table(path, table)
    return len(q) // solutions


def _gather(chunks: list[IKResult], field: str, dtype: type) -> np.ndarray:
    """One field of every chunk, concatenated on the host (empty without chunks)."""
    parts = [getattr(c, field).detach().cpu().numpy().astype(dtype) for c in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _print_summary(chunks: list[IKResult], seconds: float, output: Path) -> None:
    """One line on stderr: success count and rate, speed, median errors, output file."""
    success = _gather(chunks, "success", np.bool_)
    n, ok = len(success), int(success.sum())
    if n == 0:
        print(f"ik-layer solve: no valid targets; wrote an empty {output}", file=sys.stderr)
        return
    pos = float(np.median(_gather(chunks, "position_error", np.float64)))
    ori = float(np.median(_gather(chunks, "orientation_error", np.float64)))
    print(
        f"ik-layer solve: {ok}/{n} solved ({ok / n:.1%}) in {seconds:.2f} s ({n / max(seconds, 1e-9):.0f} rows/s); "
        f"median error {pos:.2e} m, {ori:.2e} rad; wrote {output}",
        file=sys.stderr,
    )


def _robot(args: argparse.Namespace, collision: str | Path | None = None) -> Robot:
    """Load ``args.robot`` with its frame and joints, on the requested device and dtype; ``collision``: its
    collision model, as :func:`~ik_layer.load_robot` takes it."""
    return load_robot(
        args.robot,
        args.ee_frame,
        ee_frames=args.ee_frames,
        active_joints=args.active_joints,
        locked=dict(args.locked) or None,
        floating_base=args.floating_base,
        base_frame=args.base_frame,
        dtype=_DTYPES[args.dtype],
        device=_device(args.device),
        collision=collision,
    )


def _device(choice: str) -> torch.device:
    """``cpu``, ``cuda`` (checked available) or ``auto`` (CUDA when there is one)."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise CLIError("--device cuda: no CUDA device is available (use --device cpu or auto)")
    return torch.device(choice)


def _report_skipped(path: Path, lines: list[int], rows: str = "row(s)", at: str = "at") -> None:
    if lines:
        where = f"{at} line(s) {format_lines(lines)}"
        print(f"ik-layer: skipped {len(lines)} invalid {rows} of {path} {where}", file=sys.stderr)


def run_serve(args: argparse.Namespace) -> int:
    """Replace this process with ``python -m ik_layer.server`` and the remaining arguments (needs the ``server``
    extra).

    The server is then this process, not a child: the signals a service manager sends to ``ik-layer serve``
    (SIGTERM, SIGINT, SIGHUP) reach it, its exit status is the command's, and nothing is left running after it.
    The library itself never imports the server.
    """
    if importlib.util.find_spec("fastapi") is None:
        raise CLIError("the HTTP service needs the server extra: pip install -e '.[server]' in a checkout of ik-layer")
    sys.stdout.flush()  # exec drops what Python has not written yet
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "ik_layer.server", *args.passed_on])


def run_bench(args: argparse.Namespace) -> int:
    """Run ``bench/report.py`` of the source checkout in a child process and return its exit code."""
    report = _SOURCE_ROOT / "bench" / "report.py"
    if not report.is_file():
        raise CLIError(f"{report} not found: `ik-layer bench` runs from a source checkout of ik-layer")
    python_path = os.pathsep.join(filter(None, (str(_SOURCE_ROOT), os.environ.get("PYTHONPATH"))))
    env = dict(os.environ, PYTHONPATH=python_path)
    return _run_child([sys.executable, str(report), *args.passed_on], cwd=_SOURCE_ROOT, env=env)


def run_view(args: argparse.Namespace) -> int:
    """Serve the viewer of ``args.robot`` until Ctrl-C (needs the ``view`` extra)."""
    if importlib.util.find_spec("viser") is None:
        raise CLIError("the viewer needs the view extra: pip install -e '.[view]' in a checkout of ik-layer")
    from ik_layer.viewer import Viewer

    viewer = Viewer(
        args.robot,
        urdf=args.urdf,
        ee_frame=args.ee_frame,
        host=args.host,
        port=args.port,
        package_dirs=args.package_dir,
        options=SolveOptions(self_collision=int(args.self_collision)),
        obstacles=() if args.scene is None else load_scene(args.scene),
    )
    for problem in viewer.problems:
        print(f"ik-layer view: not drawn: {problem}", file=sys.stderr)
    print(f"ik-layer view: {viewer.robot.name} at {viewer.url} (Ctrl-C to stop)", file=sys.stderr)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        viewer.close()


def _run_child(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> int:
    """Run ``command`` and return its exit code; Ctrl-C reaches the child too, and we wait for it to stop."""
    with subprocess.Popen(command, cwd=cwd, env=env) as child:
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.wait()
            raise
