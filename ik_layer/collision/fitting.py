"""Spheres that cover a URDF's collision geometry: every point of each primitive lies inside one of its spheres.

A ``<sphere>`` is kept as it is. A ``<cylinder>`` (axis along its z) is cut into ``n`` equal slabs, each inside the
sphere through its rims: radius ``sqrt(r^2 + (h/2)^2)`` for slabs of height ``h <= r``. A ``<box>`` is cut into
near-cubic cells, each inside the sphere through its corners. A ``<capsule>`` (an extension some parsers read)
is its cylinder plus a sphere at each end. Meshes are not fitted: :func:`urdf_spheres` says so, and a sphere file
(:mod:`ik_layer.collision.spheres`) covers them instead.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Collection

import numpy as np

from ik_layer.exceptions import IKLayerError, UnsupportedModelError

__all__ = ["MAX_CELLS", "box_spheres", "cylinder_spheres", "urdf_spheres"]

MAX_CELLS = 64
"""The most spheres one box or cylinder is cut into (longer ones get longer cells, still covered)."""

Spheres = list[tuple[list[float], float]]  # (centre in the link frame, radius)


def cylinder_spheres(radius: float, length: float) -> Spheres:
    """Spheres covering the cylinder of ``radius`` and ``length`` centred at the origin, axis z."""
    n = min(MAX_CELLS, max(1, math.ceil(length / radius)))
    height = length / n
    cover = math.hypot(radius, height / 2)
    return [([0.0, 0.0, -length / 2 + height * (k + 0.5)], cover) for k in range(n)]


def box_spheres(size: tuple[float, float, float]) -> Spheres:
    """Spheres covering the box of full side lengths ``size`` centred at the origin, axes aligned."""
    edge = min(size)
    while True:
        counts = [max(1, math.ceil(side / edge - 1e-9)) for side in size]
        if counts[0] * counts[1] * counts[2] <= MAX_CELLS:
            break
        edge *= 1.25
    cell = [side / n for side, n in zip(size, counts, strict=True)]
    cover = 0.5 * math.sqrt(sum(c * c for c in cell))
    centres = [[-side / 2 + c * (k + 0.5) for k in range(n)] for side, c, n in zip(size, cell, counts, strict=True)]
    return [([x, y, z], cover) for x in centres[0] for y in centres[1] for z in centres[2]]


def urdf_spheres(urdf: str, links: Collection[str]) -> dict[str, list[dict[str, object]]]:
    """Spheres covering the collision primitives of the URDF text ``urdf``, per link (the shape of a sphere file:
    ``{link: [{center, radius}]}``, centres in the link frames), for the ``links`` of the model.

    Raises:
        UnsupportedModelError: a link of the model has mesh collision geometry (not fitted: give a sphere file), or
            the URDF is not readable XML.
    """
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as err:
        raise UnsupportedModelError(f"cannot read the URDF's collision geometry: {err}") from err
    spheres: dict[str, list[dict[str, object]]] = {}
    for link in root.iter("link"):
        name = link.get("name", "")
        if name not in links:
            continue
        for k, collision in enumerate(link.findall("collision")):
            where = f"{name}: collision {k}"
            rot, pos = _origin(collision.find("origin"), where)
            for centre, radius in _primitive(collision.find("geometry"), where):
                spheres.setdefault(name, []).append({"center": (rot @ centre + pos).tolist(), "radius": radius})
    return spheres


def _primitive(geometry: ET.Element | None, where: str) -> Spheres:
    """The spheres covering one ``<geometry>``, in its own frame."""
    shape = None if geometry is None else next(iter(geometry), None)
    if shape is None:
        raise IKLayerError(f"{where}: a collision without geometry")
    if shape.tag == "sphere":
        return [([0.0, 0.0, 0.0], _length(shape, "radius", where))]
    if shape.tag == "cylinder":
        return cylinder_spheres(_length(shape, "radius", where), _length(shape, "length", where))
    if shape.tag == "capsule":
        radius, length = _length(shape, "radius", where), _length(shape, "length", where)
        ends = [([0.0, 0.0, z], radius) for z in (-length / 2, length / 2)]
        return cylinder_spheres(radius, length) + ends
    if shape.tag == "box":
        size = _numbers(shape.get("size"), 3, f"{where}: box size")
        if min(size) <= 0:
            raise IKLayerError(f"{where}: box size must be positive, got {size}")
        return box_spheres((size[0], size[1], size[2]))
    raise UnsupportedModelError(
        f"{where}: {shape.tag} collision geometry is not fitted with spheres; give a sphere file "
        "(load_robot(..., collision='spheres.yml'))"
    )


def _origin(origin: ET.Element | None, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Rotation and translation of an ``<origin xyz rpy>`` (fixed axes: ``R = Rz(yaw) Ry(pitch) Rx(roll)``)."""
    if origin is None:
        return np.eye(3), np.zeros(3)
    roll, pitch, yaw = _numbers(origin.get("rpy", "0 0 0"), 3, f"{where}: origin rpy")
    cr, sr, cp, sp, cy, sy = (f(a) for a in (roll, pitch, yaw) for f in (math.cos, math.sin))
    rot = np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )
    return rot, np.array(_numbers(origin.get("xyz", "0 0 0"), 3, f"{where}: origin xyz"))


def _numbers(text: str | None, count: int, what: str) -> list[float]:
    try:
        values = [float(v) for v in (text or "").split()]
    except ValueError:
        values = []
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise IKLayerError(f"{what} must be {count} finite numbers, got {text!r}")
    return values


def _length(shape: ET.Element, name: str, where: str) -> float:
    value = _numbers(shape.get(name), 1, f"{where}: {shape.tag} {name}")[0]
    if value <= 0:
        raise IKLayerError(f"{where}: {shape.tag} {name} must be positive, got {value:g}")
    return value
