"""Obstacles from plain data: the CLI's scene files and the ``obstacles`` of HTTP requests.

A scene is a list of obstacles in the robot's base frame, each a mapping of its ``type`` and that shape's fields
(metres; quaternions x, y, z, w)::

    {"type": "sphere", "center": [x, y, z], "radius": r}
    {"type": "box", "pose": [x, y, z, qx, qy, qz, qw], "size": [sx, sy, sz]}    # or pose: a 4x4 by rows
    {"type": "capsule", "a": [x, y, z], "b": [x, y, z], "radius": r}

A scene file (YAML or JSON) holds that list, or a mapping with the list under ``obstacles``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import yaml

from ik_layer.collision.shapes import MAX_OBSTACLES, Box, Capsule, Obstacle, Sphere, check_obstacles
from ik_layer.exceptions import IKLayerError

__all__ = ["MAX_SCENE_BYTES", "SHAPE_FIELDS", "load_scene", "obstacles_from"]

SHAPE_FIELDS: dict[str, tuple[type[Obstacle], tuple[str, ...]]] = {
    "sphere": (Sphere, ("center", "radius")),
    "box": (Box, ("pose", "size")),
    "capsule": (Capsule, ("a", "b", "radius")),
}
"""Each obstacle type's shape and its fields, in the constructor's order."""

MAX_SCENE_BYTES = 1 << 20
"""The largest scene file read."""


def obstacles_from(data: object, name: str = "obstacles") -> tuple[Obstacle, ...]:
    """The obstacles of a scene given as plain data (see the module's docstring).

    Raises:
        IKLayerError: not a list of such mappings, an unknown type, a missing or unknown field, a bad value (the
            message names the entry and field: ``obstacles[2].radius``), or more than
            :data:`~ik_layer.collision.shapes.MAX_OBSTACLES` obstacles.
    """
    if not isinstance(data, list):
        raise IKLayerError(f"{name} must be a list of obstacles, got {type(data).__name__}")
    if len(data) > MAX_OBSTACLES:
        raise IKLayerError(f"{name}: {len(data)} obstacles, more than {MAX_OBSTACLES}")
    return check_obstacles([_obstacle(entry, f"{name}[{k}]") for k, entry in enumerate(data)])


def load_scene(path: str | Path) -> tuple[Obstacle, ...]:
    """The obstacles of a scene file (YAML or JSON, at most :data:`MAX_SCENE_BYTES`).

    Raises:
        IKLayerError: the file cannot be read or parsed, or its obstacles are invalid (:func:`obstacles_from`).
    """
    path = Path(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_SCENE_BYTES + 1)
    except OSError as err:
        raise IKLayerError(f"cannot read scene file {path}: {err.strerror or err}") from err
    if len(raw) > MAX_SCENE_BYTES:
        raise IKLayerError(f"scene file {path} is larger than {MAX_SCENE_BYTES} bytes")
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else yaml.safe_load(raw)
    except (ValueError, RecursionError, yaml.YAMLError) as err:
        raise IKLayerError(
            f"scene file {path} is not valid {path.suffix.lstrip('.').upper() or 'YAML'}: {err}"
        ) from err
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - {"obstacles"})
        if unknown:
            raise IKLayerError(f"scene file {path}: unknown keys {unknown}; the obstacles go under 'obstacles'")
        data = data.get("obstacles", [])
    return obstacles_from(data, f"{path.name}: obstacles")


def _obstacle(entry: object, name: str) -> Obstacle:
    """One obstacle from its mapping; errors name ``name``."""
    if not isinstance(entry, Mapping):
        raise IKLayerError(f"{name} must be a mapping with a 'type', got {type(entry).__name__}")
    kind = entry.get("type")
    if kind not in SHAPE_FIELDS:
        raise IKLayerError(f"{name}.type must be one of {sorted(SHAPE_FIELDS)}, got {kind!r}")
    shape, fields = SHAPE_FIELDS[kind]
    missing = [field for field in fields if field not in entry]
    unknown = sorted(set(entry) - {"type", *fields})
    if missing or unknown:
        problem = f"misses {missing}" if missing else f"has unknown fields {unknown}"
        raise IKLayerError(f"{name} ({kind}) {problem}; a {kind} takes {list(fields)}")
    for field in fields:
        if not _numbers(entry[field]):
            raise IKLayerError(f"{name}.{field} must be a number or a list of numbers")
    try:
        return shape(*(entry[field] for field in fields))
    except IKLayerError as err:
        raise type(err)(f"{name}: {err}") from err


def _numbers(value: object) -> bool:
    """Whether ``value`` is a number or a (nested) list of numbers, booleans excluded."""
    if isinstance(value, list):
        return all(_numbers(item) for item in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)
