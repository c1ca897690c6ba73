"""Write the built-in robots' collision spheres (``robots/spheres/<name>.yml``) from published collision geometry.

panda: example-robot-data's ``panda_collision.urdf`` (cylinders and spheres, the shapes of Franka's own collision
model) and ``panda.srdf`` (MoveIt's disabled pairs). The script first checks that the published model's links sit
where the built-in robot's do (forward kinematics at random configurations, 1e-9 m), then covers each primitive
with spheres (:mod:`ik_layer.collision.fitting`: every point of it lies inside one) and writes the file; the
``self_collision_ignore`` pairs are the SRDF's and those the loader finds touching at the neutral configuration.

ur5e: robosuite's collision meshes (``models/assets/robots/ur5e``: ``robot.xml``, an MJCF model, and its STL files).
Each built-in link takes the collision geoms of the MJCF bodies its joint moves, placed by the fixed transform
between the two frames at q = 0 (robosuite's base is the built-in's turned half a turn about z, ROS's ``base_link``
against ``base``). robosuite's lengths differ from the published DH ones by up to 0.7 mm (0.163 m against
0.1625 m, ...): the script measures how far each mesh's points land apart at random configurations (1.8 mm at
most), refuses more than 5 mm, and grows every radius by the largest gap plus 1 mm. Each link's spheres cover its
meshes' convex hull (:func:`~ik_layer.collision.fitting.hull_spheres`); the hulls' vertices in the built-in link
frames go to ``tests/data/robot_hulls.npz``, against which the tests check the shipped spheres without robosuite.
The ignored pairs: adjacent links, those touching at the neutral configuration, and those whose meshes never meet
(``NEVER``, checked with coal).

iiwa14: pybullet's collision meshes (``pybullet_data/kuka_iiwa``: ``model.urdf``, an LBR iiwa 14 R820, and its
``meshes/link_0.stl`` .. ``link_7.stl``; robosuite's iiwa is the LBR iiwa 7 R800, which the 5 mm check refuses). The
same as ur5e's, the URDF read by Pinocchio: each built-in link takes the meshes of the pybullet links its joint moves,
placed by the fixed transform between the two frames at q = 0; they land within 1e-9 m of the built-in links at
random configurations (the built-in's pi / 2 is rounded to 1e-9), so every radius grows by 1.1 mm (1 mm, rounded up).
The files' SHA-256 is checked against pybullet 3.2.7's (``PYBULLET``), the release the header names. Ignored beyond
adjacent links: four pairs whose meshes stay at least 30 mm apart (``NEVER``).

``tests/test_collision_model.py`` checks the shipped files against the same geometry; the hulls of robots not
regenerated stay in ``tests/data/robot_hulls.npz`` as they are.

Run: ``python scripts/make_robot_spheres.py [--out FOLDER] [--hulls FILE] [--robots NAME ...] [--robosuite PATH]
[--pybullet PATH]`` (panda needs the ``test`` extra's example-robot-data; ur5e robosuite, installed or given as its
package folder or wheel; iiwa14 pybullet's ``pybullet_data``, installed or given as that folder or pybullet's wheel).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import math
import re
import sys
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
import torch
import yaml

import ik_layer
from ik_layer.collision.fitting import hull_reach, hull_spheres, urdf_spheres
from ik_layer.testing import example_robot_data_dir

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "robots" / "spheres"
HULLS = ROOT / "tests" / "data" / "robot_hulls.npz"
SOURCES = {"panda": ("panda_description/urdf/panda_collision.urdf", "panda_description/srdf/panda.srdf")}
MESHES = {"ur5e": ("ur5e", math.pi)}
"""Built-in robot: (its robosuite folder, the yaw of the built-in base frame in robosuite's [rad])."""
PYBULLET = {
    "iiwa14": ("kuka_iiwa/model.urdf", "3.2.7", "683fd67757030c18faa0af078ff8307fa6dbe14560c7bff85f82cdc3f9581c40"),
}
"""Built-in robot: (its URDF in pybullet_data, the pybullet release it was checked against, the SHA-256 of that URDF
and its collision meshes, in the URDF's order)."""
NEVER = {
    "ur5e": (("wrist_1_link", "wrist_3_link"),),
    "iiwa14": (
        ("iiwa_link_0", "iiwa_link_2"),  # hulls >= 50 mm apart, spheres overlap at 21 % of configurations
        ("iiwa_link_1", "iiwa_link_3"),  # hulls >= 57 mm apart, spheres overlap at 1.6 %
        ("iiwa_link_3", "iiwa_link_5"),  # hulls >= 58 mm apart, spheres overlap at 1.7 %
        ("iiwa_link_5", "iiwa_link_7"),  # meshes >= 30 mm apart; link_5's hull (its wrist fork) reaches link_7's
    ),
}
"""Link pairs also ignored: their meshes never meet, where their spheres would (ur5e: 39 % of random
configurations; MoveIt's UR SRDFs disable the pair too; iiwa14: the links two apart about the shoulder, the elbow
and the wrist, whose middle link's joint limits, +-120 degrees, keep them apart; the spheres of link_5 and link_7
overlap at 6 % of configurations, as the convex hull of link_5's fork reaches where the fork is open); checked at
1000 random configurations (no closer than twice the growth)."""
MAX_GAP = 5e-3
"""The most the published meshes may move apart from the built-in links [m]."""
MARGIN = 1e-3
"""Added to every radius beyond the measured gap [m]."""
SPHERES_PER_LINK = (4, 8)
"""The fewest and most spheres on one link: more on elongated links (three per width along their length)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the files go (default: {OUT})")
    parser.add_argument("--hulls", type=Path, default=HULLS, help=f"the meshes' hulls for the tests ({HULLS})")
    every = [*SOURCES, *MESHES, *PYBULLET]
    parser.add_argument("--robots", nargs="+", choices=every, default=every)
    parser.add_argument("--robosuite", type=Path, help="robosuite's package folder or wheel (default: installed)")
    parser.add_argument("--pybullet", type=Path, help="pybullet_data's folder or pybullet's wheel (default: installed)")
    args = parser.parse_args()
    for name in args.robots:
        if name in SOURCES:
            write_primitive_spheres(name, args.out)
    hulls: dict[str, np.ndarray] = {}
    meshed = [name for name in args.robots if name in MESHES]
    if meshed:
        read, version = robosuite_files(args.robosuite)
        for name in meshed:
            hulls.update(write_mesh_spheres(name, read, version, args.out))
    urdfs = [name for name in args.robots if name in PYBULLET]
    if urdfs:
        read_pybullet = pybullet_files(args.pybullet)
        for name in urdfs:
            hulls.update(write_pybullet_spheres(name, read_pybullet, args.out))
    if hulls:
        # The other robots' hulls already stored stay as they are.
        made = {key.split(":")[1] for key in hulls}
        kept: dict[str, np.ndarray] = {}
        if args.hulls.exists():
            with np.load(args.hulls) as stored:
                kept = {key: stored[key] for key in stored.files if key.split(":")[1] not in made}
        args.hulls.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.hulls, **kept, **hulls)
    return 0


def write_primitive_spheres(name: str, out: Path) -> None:
    """Write ``name``'s spheres from example-robot-data's primitives."""
    data = example_robot_data_dir()
    if data is None:
        raise SystemExit("example-robot-data not found (pip install example-robot-data)")
    urdf, srdf = SOURCES[name]
    builtin = ik_layer.load_robot(name, collision=None)
    published = ik_layer.load_robot(data / urdf, builtin.ee_frame, srdf=data / srdf)
    links = [link for link in published.collision.links if link in {f.name for f in builtin.model.frames}]
    q = builtin.random_q(64, generator=torch.Generator().manual_seed(0))
    gap = (builtin.fk(q, frames=links) - published.fk(q, frames=links)).abs().max()
    if gap > 1e-9:
        raise SystemExit(f"{name}: the published model's links differ from the built-in's by {gap:.3g}")
    spheres = urdf_spheres((data / urdf).read_text(), links)
    ignore: dict[str, list[str]] = {}
    for a, b in sorted(published.collision.ignored):
        if a in links and b in links:
            ignore.setdefault(a, []).append(b)
    header = f"# {name}: generated by scripts/make_robot_spheres.py from example-robot-data's {urdf} and {srdf}\n"
    _write(out / f"{name}.yml", header, spheres, ignore)
    print(f"{name}: {sum(len(s) for s in spheres.values())} spheres on {len(spheres)} links")


def write_mesh_spheres(name: str, read: Callable[[str], bytes], version: str, out: Path) -> dict[str, np.ndarray]:
    """Write ``name``'s spheres from robosuite's meshes; return each link's hull vertices (``hull:name:link``, in
    the link's frame) and how much each radius was grown (``grown:name``) [m]."""
    folder, yaw = MESHES[name]
    xml = f"models/assets/robots/{folder}/robot.xml"
    bodies, meshes = _mjcf(read(xml), xml)
    builtin = ik_layer.load_robot(name, collision=None)
    model = builtin.model
    if sum(b.joint is not None for b in bodies.values()) != builtin.dof or model.nq != builtin.dof:
        raise SystemExit(f"{name}: robosuite's joints are not the built-in's {builtin.dof} revolute joints")
    links, q, at_zero, at_q = _builtin_links(builtin)  # link j takes the geoms of the bodies joint j moves
    base = _transform(_rotation(np.array([0.0, 0.0, 1.0]), yaw), np.zeros(3))  # built-in base in robosuite's
    clouds: dict[str, list[np.ndarray]] = {}
    gaps: dict[str, float] = {}
    files: list[str] = []
    for body in bodies.values():
        for points, file in _geoms(body, meshes, read, f"models/assets/robots/{folder}"):
            j = body.moved_by
            # The body's frame in the link's at q = 0; then how far apart its points land at each q.
            fixed = np.linalg.inv(base @ at_zero[j]) @ _mjcf_fk(bodies, body.name, np.zeros((1, builtin.dof)))[0]
            expected = _apply(_mjcf_fk(bodies, body.name, q), points)
            actual = _apply(base @ at_q[:, j] @ fixed, points)
            gap = float(np.linalg.norm(expected - actual, axis=-1).max())
            gaps[links[j]] = max(gaps.get(links[j], 0.0), gap)
            clouds.setdefault(links[j], []).append(_apply(fixed, points))
            files.append(file)
    source = (
        f"robosuite {version}'s collision meshes (models/assets/robots/{folder}: robot.xml, "
        f"{', '.join(dict.fromkeys(files))})"
    )
    return _fit_meshes(name, builtin, clouds, gaps, "robosuite's", source, out)


def write_pybullet_spheres(name: str, read: Callable[[str], bytes], out: Path) -> dict[str, np.ndarray]:
    """Write ``name``'s spheres from pybullet_data's URDF and its collision meshes; return the hulls and growth as
    :func:`write_mesh_spheres` does."""
    urdf, version, digest = PYBULLET[name]
    folder = urdf.rpartition("/")[0]
    text = read(urdf)
    published = pin.buildModelFromXML(text.decode())
    builtin = ik_layer.load_robot(name, collision=None)
    model = builtin.model
    revolute = all(j.shortname().startswith("JointModelR") for j in list(published.joints)[1:])
    if published.nq != builtin.dof or published.njoints != model.njoints or not revolute or model.nq != builtin.dof:
        raise SystemExit(f"{name}: pybullet's {urdf} has not the built-in's {builtin.dof} revolute joints")
    links, q, at_zero, at_q = _builtin_links(builtin)  # link j takes the meshes of the links joint j moves
    clouds: dict[str, list[np.ndarray]] = {}
    gaps: dict[str, float] = {}
    files: list[str] = []
    hashed = hashlib.sha256(text)
    for link, place, file in _urdf_meshes(text, urdf):
        data = read(f"{folder}/{file}")
        hashed.update(data)
        points = _apply(place, _stl(data, file))  # in pybullet's link frame
        frame = published.getFrameId(link, pin.FrameType.BODY)
        if frame == len(published.frames):
            raise SystemExit(f"{urdf}: {link} is not a link of the model")
        j = published.frames[frame].parentJoint
        # The mesh's frame in the built-in link's at q = 0; then how far apart its points land at each q.
        fixed = np.linalg.inv(at_zero[j]) @ _urdf_fk(published, frame, np.zeros((1, builtin.dof)))[0]
        expected = _apply(_urdf_fk(published, frame, q), points)
        actual = _apply(at_q[:, j] @ fixed, points)
        gap = float(np.linalg.norm(expected - actual, axis=-1).max())
        gaps[links[j]] = max(gaps.get(links[j], 0.0), gap)
        clouds.setdefault(links[j], []).append(_apply(fixed, points))
        files.append(file)
    if hashed.hexdigest() != digest:
        raise SystemExit(
            f"{name}: pybullet_data's {urdf} and its meshes differ from pybullet {version}'s (sha256 "
            f"{hashed.hexdigest()}, not {digest}): check them and update PYBULLET"
        )
    source_text = f"pybullet {version}'s collision meshes (pybullet_data/{folder}: {urdf.rpartition('/')[2]}, "
    return _fit_meshes(name, builtin, clouds, gaps, "pybullet's", f"{source_text}{', '.join(files)})", out)


def _fit_meshes(
    name: str,
    builtin: ik_layer.Robot,
    clouds: dict[str, list[np.ndarray]],
    gaps: dict[str, float],
    whose: str,
    source: str,
    out: Path,
) -> dict[str, np.ndarray]:
    """Cover each built-in link's ``clouds`` (mesh points in its frame) with spheres grown by the largest of the
    ``gaps`` (how far the meshes land from the built-in links [m]) plus MARGIN; write the file, its header naming
    the ``source``; return the hulls and growth as :func:`write_mesh_spheres` does."""
    from scipy.spatial import ConvexHull

    worst = max(gaps.values())
    print(f"{name}: {whose} meshes land within {_distance(worst)} of the built-in links at 64 configurations")
    print("  " + ", ".join(f"{link} {_distance(gap)}" for link, gap in gaps.items()))
    if worst > MAX_GAP:
        raise SystemExit(
            f"{name}: {whose} links land {worst * 1e3:.1f} mm from the built-in's, more than {MAX_GAP * 1e3:g} mm"
        )
    grow = math.ceil((worst + MARGIN) * 1e4) / 1e4  # up to a tenth of a millimetre
    spheres: dict[str, list[dict[str, object]]] = {}
    hulls: dict[str, np.ndarray] = {}
    for link, cloud in clouds.items():
        hull = ConvexHull(np.concatenate(cloud))
        points = hull.points[hull.vertices]
        tight = hull_spheres(points, _count(points))
        reach = hull_reach(points, tight)
        if reach > 1e-9:
            raise SystemExit(f"{name}: {link}'s spheres leave its hull uncovered by {reach:.3g} m")
        fitted = [(centre, radius + grow) for centre, radius in tight]
        spheres[link] = [{"center": centre, "radius": radius} for centre, radius in fitted]
        hulls[f"hull:{name}:{link}"] = points
        volume = sum(4 / 3 * math.pi * radius**3 for _, radius in fitted) / hull.volume
        largest = max(radius for _, radius in fitted)
        print(f"  {link}: {len(fitted)} spheres, largest radius {largest:.4f} m, volume {volume:.2f} x the hull's")
    hulls[f"grown:{name}"] = np.array(grow)
    never = NEVER.get(name, ())
    for a, b in never:
        apart = _mesh_distance(builtin, a, b, clouds[a], clouds[b])
        print(f"  {a} and {b} ignored: their meshes stay {apart * 1e3:.1f} mm apart at 1000 configurations")
        if apart <= 2 * grow:
            raise SystemExit(f"{name}: the meshes of {a} and {b} come within {apart * 1e3:.1f} mm: not ignored")
    given: dict[str, list[str]] = {}
    for a, b in never:
        given.setdefault(a, []).append(b)
    robot = ik_layer.load_robot(name, collision={"collision_spheres": spheres, "self_collision_ignore": given})
    assert robot.collision is not None
    ignore: dict[str, list[str]] = {}
    for a, b in sorted(robot.collision.ignored):
        ignore.setdefault(a, []).append(b)
    header = (
        f"# {name}: generated by scripts/make_robot_spheres.py from {source}, covering their convex hulls, each "
        f"radius grown by {grow * 1e3:.1f} mm (the meshes land within {_distance(worst)} of the built-in links, "
        f"plus {MARGIN * 1e3:g} mm)\n"
    )
    _write(out / f"{name}.yml", header, spheres, ignore)
    count = sum(len(s) for s in spheres.values())
    print(f"{name}: {count} spheres on {len(spheres)} links; ignored link pairs: {sorted(robot.collision.ignored)}")
    return hulls


def _mesh_distance(
    robot: ik_layer.Robot, a: str, b: str, pieces_a: list[np.ndarray], pieces_b: list[np.ndarray]
) -> float:
    """The least distance between the collision geometry ``pieces_a`` on link ``a`` and ``pieces_b`` on link ``b``
    at 1000 random configurations (coal, which ships with Pinocchio): each piece an STL mesh's triangles (3 n
    vertices) or a box geom's 8 corners (its hull)."""
    import coal

    def shape(points: np.ndarray) -> object:
        if len(points) == 8:  # a box: its corners' hull
            vertices = coal.StdVec_Vec3s()
            vertices.extend(points)
            return coal.Convex.convexHull(vertices, False, None)
        model = coal.BVHModelOBBRSS()
        model.beginModel(len(points) // 3, len(points))
        model.addVertices(points)
        model.addTriangles(np.arange(len(points)).reshape(-1, 3))
        model.endModel()
        return model

    shapes_a, shapes_b = [shape(p) for p in pieces_a], [shape(p) for p in pieces_b]
    poses = robot.fk(robot.random_q(1000, generator=torch.Generator().manual_seed(1)), frames=[a, b]).numpy()
    least = math.inf
    for pose in poses:
        at_a, at_b = (coal.Transform3s(p[:3, :3], p[:3, 3]) for p in pose)
        for one in shapes_a:
            for other in shapes_b:
                found = coal.distance(one, at_a, other, at_b, coal.DistanceRequest(), coal.DistanceResult())
                least = min(least, found)
    return least


def robosuite_files(path: Path | None) -> tuple[Callable[[str], bytes], str]:
    """A reader of robosuite's package files (paths inside its package folder) and its version: ``path`` its
    package folder (its ``robosuite-*.dist-info`` beside it) or wheel; None: the installed one."""
    read, metadata = package_files("robosuite", "robosuite", path, "pip install robosuite, or --robosuite")
    version = re.search(r"^Version: (\S+)$", metadata, re.MULTILINE)
    if version is None:
        raise SystemExit(f"{path}: not robosuite's package folder (with its dist-info beside it) or wheel")
    return read, version.group(1)


def pybullet_files(path: Path | None) -> Callable[[str], bytes]:
    """A reader of pybullet_data's files (paths inside its package folder): ``path`` that folder or pybullet's
    wheel; None: the installed one (their contents are checked by hash, see :data:`PYBULLET`)."""
    return package_files("pybullet_data", "pybullet", path, "pip install pybullet, or --pybullet")[0]


def package_files(package: str, distribution: str, path: Path | None, hint: str) -> tuple[Callable[[str], bytes], str]:
    """A reader of ``package``'s files (paths inside its folder), its failures a SystemExit naming them, and the
    ``distribution``'s METADATA text ("" where not found): ``path`` the package's folder (the dist-info beside it)
    or the distribution's wheel; None: the installed package (``hint``: how to get it)."""
    if path is None:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"{package} not found: {hint} its package folder or wheel")
        path = Path(next(iter(spec.submodule_search_locations)))
    pattern = rf"{distribution}-[^/]+\.dist-info/METADATA"
    if path.is_file():
        try:
            archive = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as err:
            raise SystemExit(f"{path}: not {distribution}'s wheel: {err}") from err
        listed = [n for n in archive.namelist() if re.fullmatch(pattern, n)]
        metadata = archive.read(listed[0]).decode() if listed else ""

        def read(name: str) -> bytes:
            return archive.read(f"{package}/{name}")
    elif path.is_dir():
        listed_files = sorted(p for p in path.parent.glob(f"{distribution}-*.dist-info/METADATA"))
        metadata = listed_files[0].read_text() if listed_files else ""

        def read(name: str) -> bytes:
            return (path / name).read_bytes()
    else:
        raise SystemExit(f"{path}: not {package}'s folder or {distribution}'s wheel")

    def checked(name: str) -> bytes:
        try:
            return read(name)
        except (OSError, KeyError) as err:
            raise SystemExit(f"{path}: cannot read {package}'s {name}: {err}") from err

    return checked, metadata


def _builtin_links(builtin: ik_layer.Robot) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The built-in robot's link of each joint (its first body frame; 0: the base), 64 random configurations, and
    the links' poses (4, 4) at zero and at those configurations: what the published model is compared with."""
    model = builtin.model
    body_frames = [f for f in model.frames if f.type == pin.FrameType.BODY]
    links = [next(f.name for f in body_frames if f.parentJoint == j) for j in range(model.njoints)]
    q = builtin.random_q(64, generator=torch.Generator().manual_seed(0)).numpy()
    at_zero = builtin.fk(torch.zeros(builtin.dof, dtype=builtin.dtype), frames=links).numpy()
    at_q = builtin.fk(torch.from_numpy(q).to(builtin.dtype), frames=links).numpy()
    return links, q, at_zero, at_q


def _urdf_meshes(text: bytes, where: str) -> list[tuple[str, np.ndarray, str]]:
    """Each collision mesh of the URDF ``text``: its link, its placement in the link's frame and its file (relative
    to the URDF's folder); other geometry, scaled meshes and package or absolute paths are refused."""
    found = []
    for link in ET.fromstring(text).iter("link"):
        for collision in link.findall("collision"):
            mesh = collision.find("geometry/mesh")
            file = "" if mesh is None else mesh.get("filename", "")
            if mesh is None or mesh.get("scale", "1 1 1").split() != ["1"] * 3 or ":" in file or file.startswith("/"):
                raise SystemExit(f"{where}: {link.get('name')}: only unscaled meshes beside the URDF are read")
            origin = collision.find("origin")
            origin = ET.Element("origin") if origin is None else origin
            rpy, xyz = _vector(origin, "rpy", [0, 0, 0]), _vector(origin, "xyz", [0, 0, 0])
            found.append((link.get("name", ""), _transform(pin.rpy.rpyToMatrix(*rpy), xyz), file))
    return found


def _urdf_fk(model: pin.Model, frame: int, q: np.ndarray) -> np.ndarray:
    """The pose (B, 4, 4) of ``model``'s ``frame`` at configurations ``q`` (B, nq) (Pinocchio)."""
    data = model.createData()
    poses = []
    for row in q:
        pin.framesForwardKinematics(model, data, row)
        poses.append(data.oMf[frame].homogeneous)
    return np.stack(poses)


@dataclass
class Body:
    """An MJCF body: its placement in its parent's frame, its hinge (axis in its frame, at its origin), the index of
    the joint that moves it (1, 2, ... in the file's order; 0: none) and its collision geoms."""

    name: str
    parent: str | None
    placement: np.ndarray
    joint: int | None
    axis: np.ndarray
    moved_by: int
    geoms: list[ET.Element]


def _mjcf(text: bytes, where: str) -> tuple[dict[str, Body], dict[str, str]]:
    """The bodies of the MJCF ``text`` (by name, parents first) and its mesh assets (name: file); only what
    robosuite's robot files use (pos and quat, hinges at body origins, no defaults): anything else is refused."""
    root = ET.fromstring(text)
    if root.find("default") is not None or root.find("compiler[@meshdir]") is not None:
        raise SystemExit(f"{where}: defaults and mesh folders are not read")
    meshes = {m.get("name", ""): m.get("file", "") for m in root.iter("mesh") if m.get("scale") is None}
    if len(meshes) != len(root.findall("asset/mesh")):
        raise SystemExit(f"{where}: scaled meshes are not read")
    bodies: dict[str, Body] = {}
    count = 0

    def visit(element: ET.Element, parent: Body | None) -> None:
        nonlocal count
        for child in element.findall("body"):
            _plain(child, where)
            hinges = child.findall("joint")
            if len(hinges) > 1 or any(
                h.get("type", "hinge") != "hinge" or _vector(h, "pos", [0, 0, 0]).any() for h in hinges
            ):
                raise SystemExit(f"{where}: body {child.get('name')}: one hinge at the body's origin at most")
            count += len(hinges)
            geoms = [g for g in child.findall("geom") if (g.get("contype"), g.get("conaffinity")) != ("0", "0")]
            body = Body(
                name=child.get("name", ""),
                parent=None if parent is None else parent.name,
                placement=_transform(
                    _quaternion(_vector(child, "quat", [1, 0, 0, 0])), _vector(child, "pos", [0, 0, 0])
                ),
                joint=count if hinges else None,
                axis=_vector(hinges[0], "axis", [0, 0, 1]) if hinges else np.zeros(3),
                moved_by=count if hinges else (0 if parent is None else parent.moved_by),
                geoms=geoms,
            )
            bodies[body.name] = body
            visit(child, body)

    worldbody = root.find("worldbody")
    if worldbody is None:
        raise SystemExit(f"{where}: no worldbody")
    visit(worldbody, None)
    return bodies, meshes


def _geoms(
    body: Body, meshes: dict[str, str], read: Callable[[str], bytes], folder: str
) -> list[tuple[np.ndarray, str]]:
    """Each collision geom's points (n, 3) in ``body``'s frame (a mesh's vertices, a box's corners) and its file."""
    found = []
    for geom in body.geoms:
        _plain(geom, f"{folder}: {body.name}")
        kind = geom.get("type", "sphere")
        if kind == "mesh":
            file = meshes[geom.get("mesh", "")]
            points, label = _stl(read(f"{folder}/{file}"), file), file
        elif kind == "box":
            half = _vector(geom, "size", [0, 0, 0])
            points = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
            label = f"box {geom.get('name', '')}"
        else:
            raise SystemExit(f"{folder}: {body.name}: {kind} geoms are not read")
        place = _transform(_quaternion(_vector(geom, "quat", [1, 0, 0, 0])), _vector(geom, "pos", [0, 0, 0]))
        found.append((_apply(place, points), label))
    return found


def _plain(element: ET.Element, where: str) -> None:
    """Refuse orientations other than ``quat`` and default classes."""
    other = {"euler", "axisangle", "xyaxes", "zaxis", "fromto", "class", "childclass"} & set(element.attrib)
    if other:
        raise SystemExit(f"{where}: {element.tag} {element.get('name', '')}: {sorted(other)} are not read")


def _stl(data: bytes, file: str) -> np.ndarray:
    """The vertices (3 n, 3) of a binary STL file's triangles."""
    count = int.from_bytes(data[80:84], "little") if len(data) >= 84 else -1
    if len(data) != 84 + 50 * count:
        raise SystemExit(f"{file}: not a binary STL file")
    record = np.dtype([("normal", "<f4", 3), ("vertices", "<f4", (3, 3)), ("attribute", "<u2")])
    return np.frombuffer(data, record, count, 84)["vertices"].reshape(-1, 3).astype(np.float64)


def _mjcf_fk(bodies: dict[str, Body], name: str, q: np.ndarray) -> np.ndarray:
    """The pose (B, 4, 4) of body ``name`` in the MJCF world at configurations ``q`` (B, dof)."""
    chain = []
    body: Body | None = bodies[name]
    while body is not None:
        chain.append(body)
        body = None if body.parent is None else bodies[body.parent]
    pose = np.broadcast_to(np.eye(4), (q.shape[0], 4, 4))
    for body in reversed(chain):
        pose = pose @ body.placement
        if body.joint is not None:
            pose = pose @ np.stack(
                [_transform(_rotation(body.axis, angle), np.zeros(3)) for angle in q[:, body.joint - 1]]
            )
    return pose


def _vector(element: ET.Element, name: str, default: list[float]) -> np.ndarray:
    return np.array([float(v) for v in element.get(name, " ".join(map(str, default))).split()], dtype=np.float64)


def _quaternion(wxyz: np.ndarray) -> np.ndarray:
    """The rotation of the quaternion ``(w, x, y, z)``, normalised (as MuJoCo reads it)."""
    w, x, y, z = wxyz / np.linalg.norm(wxyz)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """The rotation by ``angle`` about ``axis``."""
    half = angle / 2
    return _quaternion(np.concatenate([[math.cos(half)], math.sin(half) * axis / np.linalg.norm(axis)]))


def _transform(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = rotation, translation
    return pose


def _apply(pose: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``points`` (n, 3) moved by ``pose`` (..., 4, 4): (..., n, 3)."""
    return points @ np.swapaxes(pose[..., :3, :3], -1, -2) + pose[..., None, :3, 3]


def _distance(length: float) -> str:
    """``length`` [m] written in millimetres to a hundredth, or in metres where that would read 0.00 mm."""
    return f"{length * 1e3:.2f} mm" if length >= 5e-6 else f"{length:.1g} m"


def _count(points: np.ndarray) -> int:
    """How many spheres a hull of ``points`` gets: three per width along its length, within SPHERES_PER_LINK."""
    spread = points - points.mean(axis=0)
    extent = np.sort(np.ptp(spread @ np.linalg.eigh(spread.T @ spread)[1], axis=0))
    fewest, most = SPHERES_PER_LINK
    return int(min(most, max(fewest, math.ceil(3 * extent[2] / extent[1]))))


def _write(path: Path, header: str, spheres: dict[str, list[dict[str, object]]], ignore: dict[str, list[str]]) -> None:
    body = yaml.safe_dump(
        {"collision_spheres": spheres, "self_collision_ignore": ignore},
        sort_keys=False,
        default_flow_style=None,
        width=120,
    )
    path.write_text(header + body)


if __name__ == "__main__":
    sys.exit(main())
