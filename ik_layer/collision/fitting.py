"""Spheres that cover collision geometry: every point of each shape lies inside one of its spheres.

A URDF's primitives (:func:`urdf_spheres`): a ``<sphere>`` is kept as it is. A ``<cylinder>`` (axis along its z) is
cut into ``n`` equal slabs, each inside the sphere through its rims: radius ``sqrt(r^2 + (h/2)^2)`` for slabs of
height ``h <= r``. A ``<box>`` is cut into near-cubic cells, each inside the sphere through its corners. A
``<capsule>`` (an extension some parsers read) is its cylinder plus a sphere at each end. A URDF's meshes are not
fitted: :func:`urdf_spheres` says so, and a sphere file (:mod:`ik_layer.collision.spheres`) covers them instead.

A mesh (:func:`hull_spheres`, which ``scripts/make_robot_spheres.py`` uses for the built-in robots' files): its
convex hull, solid, is cut into convex cells, each inside one sphere (a sphere contains a convex polytope iff it
contains its vertices); :func:`hull_reach` checks any spheres against a hull exactly. Both need SciPy.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pinocchio as pin

from ik_layer.exceptions import IKLayerError, UnsupportedModelError

__all__ = [
    "MAX_CELLS",
    "box_spheres",
    "cylinder_spheres",
    "hull_reach",
    "hull_spheres",
    "mesh_spheres",
    "urdf_spheres",
]

MAX_CELLS = 64
"""The most spheres one box or cylinder is cut into (longer ones get longer cells, still covered)."""

Spheres = list[tuple[list[float], float]]  # (centre in the link frame, radius)

_THIN = 1e-9  # a hull cell whose deepest point lies at most this far inside it [m] counts as without interior


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


def hull_spheres(points: np.ndarray, count: int) -> Spheres:
    """At most ``count`` spheres whose union contains the convex hull (solid) of ``points`` (n, 3).

    The hull is split among ``count`` centres (k-means of points filling it, started from slices along its
    principal axis): each centre's Voronoi cell in the hull is a convex polytope, and its sphere the smallest around
    the polytope's vertices (centre found numerically, radius then measured: covered whatever the optimiser does).
    """
    from scipy.spatial import ConvexHull

    hull = ConvexHull(points)
    inside = _filling(hull.points[hull.vertices], hull.equations, hull.volume)
    centres = _kmeans(inside, count)
    spheres: Spheres = []
    for cell in _power_cells(hull.equations, centres, np.zeros(len(centres))):
        if cell is not None:
            centre = _enclosing_centre(cell)
            spheres.append((centre.tolist(), float(np.linalg.norm(cell - centre, axis=1).max())))
    return spheres


def hull_reach(points: np.ndarray, spheres: Spheres) -> float:
    """How far the convex hull (solid) of ``points`` (n, 3) reaches out of the union of ``spheres`` at worst [m]:
    ``<= 0`` iff the union contains the hull (up to rounding).

    Exact: the spheres' power diagram cuts the hull into convex cells, each point in the cell of the sphere it lies
    deepest in (if in any), so the union contains the hull iff each sphere contains its cell's vertices. A cell
    without interior is skipped: its points are limits of other cells' points.
    """
    from scipy.spatial import ConvexHull

    if not spheres:
        return math.inf
    centres = np.array([c for c, _ in spheres], dtype=np.float64)
    radii = np.array([r for _, r in spheres], dtype=np.float64)
    reach = -math.inf
    for cell, centre, radius in zip(
        _power_cells(ConvexHull(points).equations, centres, radii), centres, radii, strict=True
    ):
        if cell is not None:
            reach = max(reach, float(np.linalg.norm(cell - centre, axis=1).max() - radius))
    return reach


def _filling(vertices: np.ndarray, equations: np.ndarray, volume: float, target: int = 4000) -> np.ndarray:
    """The hull's ``vertices`` and about ``target`` grid points inside it (``equations``: ``a x + b <= 0``)."""
    low, high = vertices.min(axis=0), vertices.max(axis=0)
    step = (volume / target) ** (1 / 3)
    axes = [np.arange(lo + step / 2, hi, step) for lo, hi in zip(low, high, strict=True)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    grid = grid[(grid @ equations[:, :3].T + equations[:, 3] <= 0).all(axis=1)]
    return np.concatenate([vertices, grid])


def _kmeans(points: np.ndarray, count: int, rounds: int = 200) -> np.ndarray:
    """``count`` k-means centres (count, 3) of ``points``, started from equal slices along their principal axis."""
    spread = points - points.mean(axis=0)
    axis = np.linalg.eigh(spread.T @ spread)[1][:, -1]
    slices = np.array_split(np.argsort(points @ axis, kind="stable"), count)
    centres = np.stack([points[s].mean(axis=0) for s in slices])
    for _ in range(rounds):
        label = np.linalg.norm(points[:, None] - centres[None], axis=-1).argmin(axis=1)
        moved = np.stack([points[label == k].mean(axis=0) if (label == k).any() else centres[k] for k in range(count)])
        if np.array_equal(moved, centres):
            break
        centres = moved
    return centres


def _power_cells(equations: np.ndarray, centres: np.ndarray, radii: np.ndarray) -> list[np.ndarray | None]:
    """The vertices of each sphere's power cell within the hull ``equations`` (``a x + b <= 0``); None for a cell
    without interior. Sphere ``i``'s cell: the points where ``|x - c_i|^2 - r_i^2`` is least."""
    from scipy.optimize import linprog
    from scipy.spatial import HalfspaceIntersection

    power = (centres**2).sum(axis=1) - radii**2
    cells: list[np.ndarray | None] = []
    for i in range(len(centres)):
        others = np.arange(len(centres)) != i
        bisectors = np.column_stack([2 * (centres[others] - centres[i]), power[i] - power[others]])
        halfspaces = np.concatenate([equations, bisectors])
        # The deepest point inside (Chebyshev centre): a x + |a| t <= -b, t as large as can be.
        normals = np.linalg.norm(halfspaces[:, :3], axis=1, keepdims=True)
        found = linprog(
            np.array([0.0, 0.0, 0.0, -1.0]),
            A_ub=np.hstack([halfspaces[:, :3], normals]),
            b_ub=-halfspaces[:, 3],
            bounds=[(None, None)] * 3 + [(0, None)],
        )
        if found.status != 0 or found.x[3] <= _THIN:
            cells.append(None)
            continue
        cells.append(HalfspaceIntersection(halfspaces, found.x[:3]).intersections)
    return cells


def _enclosing_centre(points: np.ndarray) -> np.ndarray:
    """A centre near that of the smallest sphere around ``points`` (n, 3): the least largest squared distance."""
    from scipy.optimize import minimize

    start = (points.min(axis=0) + points.max(axis=0)) / 2
    span = float(np.linalg.norm(points - start, axis=1).max()) or 1.0
    unit = (points - start) / span  # the problem in units of its size, near the origin
    found = minimize(
        lambda x: x[3],
        np.array([0.0, 0.0, 0.0, 1.0]),
        jac=lambda x: np.array([0.0, 0.0, 0.0, 1.0]),
        constraints={
            "type": "ineq",
            "fun": lambda x: x[3] - ((unit - x[:3]) ** 2).sum(axis=1),
            "jac": lambda x: np.column_stack([2 * (unit - x[:3]), np.ones(len(unit))]),
        },
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 200},
    )
    centre = start + span * found.x[:3]
    better = np.linalg.norm(points - centre, axis=1).max() < np.linalg.norm(points - start, axis=1).max()
    return centre if better else start


def urdf_spheres(urdf: str, links: Collection[str], meshes: bool = False) -> dict[str, list[dict[str, object]]]:
    """Spheres covering the collision primitives of the URDF text ``urdf``, per link (the shape of a sphere file:
    ``{link: [{center, radius}]}``, centres in the link frames), for the ``links`` of the model; ``meshes``: its
    meshes are left out (:func:`mesh_spheres` covers them).

    Raises:
        UnsupportedModelError: a link of the model has mesh collision geometry (and ``meshes`` is False), or the
            URDF is not readable XML.
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
            if meshes and collision.find("geometry/mesh") is not None:
                continue
            rot, pos = _origin(collision.find("origin"), where)
            for centre, radius in _primitive(collision.find("geometry"), where):
                spheres.setdefault(name, []).append({"center": (rot @ centre + pos).tolist(), "radius": radius})
    return spheres


def mesh_spheres(urdf_path: Path, model: pin.Model, links: Collection[str]) -> dict[str, list[dict[str, object]]]:
    """Spheres covering the convex hull of every collision mesh of the URDF file ``urdf_path`` on the ``links``
    of ``model`` (its kinematics), per link, centres in the link frames: :func:`hull_spheres` of each mesh, 2 to
    8 spheres as elongated as it is. Meshes are read by Pinocchio (``package://`` looked up in the folders above
    the file).

    Raises:
        UnsupportedModelError: Pinocchio cannot read the URDF's collision geometry (a mesh not found...).
    """
    folders = [str(folder) for folder in urdf_path.parents]
    try:
        geometry = pin.buildGeomFromUrdf(model, str(urdf_path), pin.COLLISION, package_dirs=folders)
    except (ValueError, RuntimeError) as err:
        raise UnsupportedModelError(f"cannot read the collision meshes of {urdf_path}: {err}") from err
    spheres: dict[str, list[dict[str, object]]] = {}
    for item in geometry.geometryObjects:
        link = model.frames[item.parentFrame]
        if link.name not in links or not hasattr(item.geometry, "vertices"):
            continue
        local = link.placement.inverse() * item.placement  # the mesh in its link's frame
        points = np.asarray(item.geometry.vertices()) * np.asarray(item.meshScale)
        points = points @ local.rotation.T + local.translation
        spread = np.sort(np.ptp(points - points.mean(axis=0), axis=0))
        count = min(8, max(2, math.ceil(2 * spread[2] / max(spread[1], 1e-9))))
        spheres.setdefault(link.name, []).extend(
            {"center": centre, "radius": radius} for centre, radius in hull_spheres(points, count)
        )
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
