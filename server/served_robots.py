"""Robots at start-up: parse the robot specs of the settings, load each robot, warm it up.

A spec is a built-in name (``"ur5e"``), a model file with an optional end-effector frame
(``"arm.urdf:tool0"``; URDF, MJCF ``.xml`` or ``.xacro``), or ``"@robots.json"``: a JSON list of
:class:`RobotSpec` objects, for what a string cannot say (a name of its own, several end-effector frames,
a floating base, active or locked joints, collision spheres). Each robot is served by a solver engine
(:class:`ik_layer.engine.Engine`); a robot the engine refuses stops the server at start, and
:func:`warm_up` runs every kind of request on it once before the server reports ready.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

import ik_layer
from ik_layer import IKLayerError, Robot, SolveOptions, matrix_to_pose
from ik_layer.engine import Engine, warm_up_kernels
from ik_layer.model.sources import MODEL_SUFFIXES

__all__ = ["RobotSpec", "ServedRobot", "load_robots", "parse_robot_spec", "robot_specs", "warm_up"]


class RobotSpec(BaseModel):
    """One robot to serve, as :func:`ik_layer.load_robot` takes it, under ``name`` (default: the model's)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="built-in name or model file (URDF, MJCF .xml, .xacro)")
    name: str | None = Field(None, min_length=1, description="name in the API (default: the robot's own)")
    ee_frame: str | None = Field(None, description="the end-effector frame (default: the model's)")
    ee_frames: list[str] | None = Field(
        None,
        min_length=1,
        description="several end-effector frames solved at once (not with ee_frame); one name is the same as ee_frame",
    )
    floating_base: StrictBool = Field(False, description="a free-flyer base: q starts with the base pose")
    base_frame: str | None = Field(
        None, min_length=1, description="the frame the chains start from: poses and targets in it (default: the root)"
    )
    active_joints: list[str] | None = None
    locked: dict[str, float] | None = Field(None, description="joint name -> value [rad or m] held fixed")
    collision: str | None = Field(
        "auto",
        min_length=1,
        description="the collision spheres, as load_robot(..., collision=...) takes them: a sphere file (YAML or "
        'JSON), "auto" (the built-in robot\'s, else spheres covering a URDF\'s collision primitives), "fit" (a '
        "URDF's collision meshes covered too), or null: none",
    )

    @model_validator(mode="after")
    def _one_way_to_name_frames(self) -> RobotSpec:
        if self.ee_frame is not None and self.ee_frames is not None:
            raise ValueError("give ee_frame or ee_frames, not both")
        return self

    def frames(self) -> tuple[str | None, list[str] | None]:
        """``(ee_frame, ee_frames)`` for :func:`ik_layer.load_robot`; one name in ``ee_frames`` loads as
        ``ee_frame`` (a one-frame robot: plain poses in the API)."""
        if self.ee_frames is not None and len(self.ee_frames) == 1:
            return self.ee_frames[0], None
        return self.ee_frame, self.ee_frames


@dataclass(frozen=True)
class ServedRobot:
    """A robot loaded from its spec, and the source of its collision spheres as the spec gave it (``"auto"``,
    ``"fit"``, a sphere file, or None: none)."""

    robot: Robot
    collision: str | None


def parse_robot_spec(spec: str) -> tuple[str, str | None]:
    """``"ur5e"`` -> ``("ur5e", None)``; ``"arm.urdf:tool0"`` -> ``("arm.urdf", "tool0")`` (also .xml, .xacro)."""
    path, sep, frame = spec.rpartition(":")
    if sep and path.lower().endswith(MODEL_SUFFIXES) and frame:
        return path, frame
    return spec, None


def robot_specs(entries: Iterable[str]) -> list[tuple[str, RobotSpec]]:
    """The specs of the settings' ``robots`` entries, ``@file.json`` entries expanded, each with a label naming
    where it comes from (``'arm.urdf:tool0'``, ``robots.json entry 2``).

    Raises:
        IKLayerError: an ``@`` file that cannot be read, is not a JSON list, or holds an entry that is not a
            robot spec (the message names the file and the entry).
    """
    specs: list[tuple[str, RobotSpec]] = []
    for entry in entries:
        if entry.startswith("@"):
            specs.extend(_spec_file(Path(entry[1:])))
        else:
            source, frame = parse_robot_spec(entry)
            specs.append((repr(entry), RobotSpec(source=source, ee_frame=frame)))
    return specs


def load_robots(entries: Iterable[str], device: torch.device, dtype: torch.dtype) -> dict[str, ServedRobot]:
    """Load every robot of the ``robots`` entries (see :func:`robot_specs`), keyed by name.

    Raises:
        IKLayerError: a spec is malformed, a robot cannot be loaded (the message starts with the entry that
            names it: ``robot 'arm.urdf:tool0': ...``) or two specs give robots of the same name.
    """
    robots: dict[str, ServedRobot] = {}
    for label, spec in robot_specs(entries):
        ee_frame, ee_frames = spec.frames()
        try:
            robot = ik_layer.load_robot(
                spec.source,
                ee_frame,
                ee_frames=ee_frames,
                dtype=dtype,
                device=device,
                active_joints=spec.active_joints,
                locked=spec.locked,
                floating_base=spec.floating_base,
                base_frame=spec.base_frame,
                collision=spec.collision,
            )
        except IKLayerError as err:
            raise IKLayerError(f"robot {label}: {err}") from err
        robot.name = spec.name or robot.name
        if robot.name in robots:
            raise IKLayerError(f"robot {label}: a second robot named {robot.name!r}; give each a name")
        robots[robot.name] = ServedRobot(robot, spec.collision)
    return robots


def _spec_file(path: Path) -> list[tuple[str, RobotSpec]]:
    """The specs of a robots.json file, labelled by their place in it."""
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise IKLayerError(f"robot spec file {str(path)!r}: {err.strerror or err}") from err
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise IKLayerError(f"robot spec file {str(path)!r} is not JSON: {err}") from err
    if not isinstance(items, list):
        raise IKLayerError(
            f"robot spec file {str(path)!r} must hold a JSON list of robot specs, got {type(items).__name__}"
        )
    return [(f"{str(path)!r} entry {i}", _spec(path, i, item)) for i, item in enumerate(items, start=1)]


def _spec(path: Path, index: int, item: object) -> RobotSpec:
    """Entry ``index`` (from 1) of the robots.json file ``path``."""
    if isinstance(item, str):
        raise IKLayerError(
            f"robot spec file {str(path)!r} entry {index}: {item!r} is a string; write an object such as "
            f'{{"source": {json.dumps(item)}}}'
        )
    try:
        return RobotSpec.model_validate(item)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in err.errors())
        raise IKLayerError(f"robot spec file {str(path)!r} entry {index}: {problems}") from err


def warm_up(engine: Engine, options: SolveOptions) -> None:
    """Run every kind of request once on ``engine`` (a worker's, before it starts), so that no first request compiles
    or loads a kernel: a tiny FK and gradient, and a tiny solve of every kernel the engine can launch
    (:func:`ik_layer.engine.warm_up_kernels`).

    Args:
        engine: the engine to warm up.
        options: the server's default solver options (the warm-up's solves run a few iterations).
    """
    robot = engine.robot
    q = robot.neutral_q()[None]
    matrix_to_pose(robot.fk(q))
    ik_layer.target_gradient(robot, q)
    warm_up_kernels(engine, options)
