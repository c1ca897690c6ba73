"""Robot collision models (ik_layer.collision.fitting, .model, ik_layer.loading): spheres that cover URDF collision
primitives and convex hulls, the built-in panda's, ur5e's and iiwa14's shipped spheres regenerated and checked against
the published geometry, sphere centres and their Jacobians against Pinocchio and finite differences, self-collision
pairs, bad input refused."""

from __future__ import annotations

import importlib.util
import logging
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch
import yaml

import ik_layer
from ik_layer import IKLayerError
from ik_layer.collision.fitting import (
    MAX_CELLS,
    box_spheres,
    cylinder_spheres,
    hull_reach,
    hull_spheres,
    urdf_spheres,
)
from ik_layer.collision.model import MAX_SELF_PAIRS, RobotSpheres
from ik_layer.collision.spheres import LinkSpheres
from ik_layer.testing import example_robot_data_dir, random_bases

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[1]
ERD = example_robot_data_dir()
needs_erd = pytest.mark.skipif(ERD is None, reason="example-robot-data not installed")
PANDA_URDF = "panda_description/urdf/panda_collision.urdf"
PANDA_SRDF = "panda_description/srdf/panda.srdf"
HULLS = ROOT / "tests" / "data" / "robot_hulls.npz"
MESHED = ["ur5e", "iiwa14"]  # built-in robots whose spheres cover published collision meshes
needs_robosuite = pytest.mark.skipif(importlib.util.find_spec("robosuite") is None, reason="robosuite not installed")
needs_pybullet = pytest.mark.skipif(importlib.util.find_spec("pybullet_data") is None, reason="pybullet not installed")
MESH_SOURCES = [  # each meshed robot, with what the script needs to regenerate it
    pytest.param("ur5e", marks=[needs_erd, needs_robosuite]),  # robosuite's meshes
    pytest.param("iiwa14", marks=needs_pybullet),  # pybullet_data's kuka_iiwa
]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def covered(points: np.ndarray, spheres: list[tuple[list[float], float]]) -> np.ndarray:
    """Whether each point (n, 3) lies inside one of ``spheres`` (to 1e-12)."""
    centres = np.array([c for c, _ in spheres])
    radii = np.array([r for _, r in spheres])
    gaps = np.linalg.norm(points[:, None, :] - centres[None], axis=-1) - radii
    return (gaps <= 1e-12).any(axis=1)


def in_cylinder(n: int, radius: float, length: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` points of the solid cylinder (axis z), its rims and end faces included."""
    angle, rho = rng.uniform(0, 2 * math.pi, n), radius * np.sqrt(rng.uniform(0, 1, n))
    rho[: n // 4] = radius  # on the side
    z = rng.uniform(-length / 2, length / 2, n)
    z[n // 4 : n // 2] = rng.choice([-length / 2, length / 2], n // 4)  # on the end faces (with the rims)
    return np.stack([rho * np.cos(angle), rho * np.sin(angle), z], -1)


def in_box(n: int, size: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``n`` points of the solid box, its corners included."""
    points = rng.uniform(-0.5, 0.5, (n, 3)) * size
    points[:8] = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)]) * size
    return points


@pytest.mark.parametrize(("radius", "length"), [(0.09, 0.283), (0.05, 0.01), (0.01, 2.0), (0.3, 0.3)])
def test_cylinder_spheres_cover_the_cylinder(radius: float, length: float) -> None:
    spheres = cylinder_spheres(radius, length)
    assert 1 <= len(spheres) <= MAX_CELLS
    assert covered(in_cylinder(4000, radius, length, np.random.default_rng(0)), spheres).all()
    # Not wastefully large: each sphere within the cylinder's radius and half a slab of it (or its end).
    assert max(r for _, r in spheres) <= math.hypot(radius, max(radius, length / MAX_CELLS) / 2) + 1e-12


@pytest.mark.parametrize("size", [(0.1, 0.1, 0.1), (1.0, 0.5, 0.02), (3.0, 0.01, 0.01), (0.4, 0.3, 0.2)])
def test_box_spheres_cover_the_box(size: tuple[float, float, float]) -> None:
    spheres = box_spheres(size)
    assert 1 <= len(spheres) <= MAX_CELLS
    assert covered(in_box(4000, np.array(size), np.random.default_rng(1)), spheres).all()


def test_urdf_primitives_are_placed_by_their_origins() -> None:
    urdf = """<robot name="r"><link name="a">
      <collision><origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 1.1"/><geometry><cylinder radius="0.05" length="0.4"/>
      </geometry></collision>
      <collision><origin xyz="-0.1 0 0"/><geometry><box size="0.2 0.1 0.05"/></geometry></collision>
      <collision><geometry><sphere radius="0.07"/></geometry></collision>
    </link><link name="b"/></robot>"""
    fitted = urdf_spheres(urdf, ["a", "b"])
    assert list(fitted) == ["a"]
    spheres = [(s["center"], s["radius"]) for s in fitted["a"]]
    rng = np.random.default_rng(2)
    rotation = pin.rpy.rpyToMatrix(0.3, -0.2, 1.1)  # Pinocchio's reading of a URDF's rpy
    cylinder = in_cylinder(2000, 0.05, 0.4, rng) @ rotation.T + np.array([0.1, 0.2, 0.3])
    box = in_box(2000, np.array([0.2, 0.1, 0.05]), rng) + np.array([-0.1, 0, 0])
    ball = rng.normal(size=(2000, 3))
    ball = 0.07 * ball / np.linalg.norm(ball, axis=1, keepdims=True) * rng.uniform(0, 1, (2000, 1)) ** (1 / 3)
    assert covered(np.concatenate([cylinder, box, ball]), spheres).all()


def test_meshes_are_not_fitted() -> None:
    urdf = '<robot name="r"><link name="a"><collision><geometry><mesh filename="a.stl"/></geometry></collision></link>'
    with pytest.raises(ik_layer.UnsupportedModelError, match="a: collision 0: mesh collision geometry"):
        urdf_spheres(urdf + "</robot>", ["a"])


def in_hull(n: int, points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``n`` points of the convex hull of ``points``: the points themselves and random mixtures of a few."""
    picks = rng.integers(0, len(points), (n, 3))
    weights = rng.dirichlet(np.full(3, 0.3), n)
    return np.concatenate([points, np.einsum("nk,nkd->nd", weights, points[picks])])


@pytest.mark.parametrize("count", [1, 3, 6])
@pytest.mark.parametrize("cloud", ["ball", "rod", "box"])
def test_hull_spheres_cover_the_hull(cloud: str, count: int) -> None:
    rng = np.random.default_rng(5)
    if cloud == "box":
        points = in_box(8, np.array([0.3, 0.1, 0.05]), rng)[:8]  # its corners: the box's hull
    else:
        points = rng.normal(size=(200, 3)) * (np.array([0.02, 0.03, 0.4]) if cloud == "rod" else 0.1)
    spheres = hull_spheres(points, count)
    assert 1 <= len(spheres) <= count
    assert hull_reach(points, spheres) <= 1e-9
    assert covered(in_hull(3000, points, rng), [(c, r + 1e-12) for c, r in spheres]).all()
    # Tight: every sphere reaches a point of the hull, and the spheres a little smaller leave some of it out.
    assert hull_reach(points, [(c, r - 1e-6) for c, r in spheres]) > 0
    if count > 1:
        assert max(r for _, r in spheres) < hull_spheres(points, 1)[0][1]


def test_hull_reach_measures_the_solid() -> None:
    cube = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    assert hull_reach(cube, [([0.0, 0.0, 0.0], math.sqrt(3))]) == pytest.approx(0, abs=1e-12)
    assert hull_reach(cube, [([0.0, 0.0, 0.0], 1.5)]) == pytest.approx(math.sqrt(3) - 1.5, abs=1e-12)
    halves = [([-0.5, 0.0, 0.0], math.sqrt(2.25)), ([0.5, 0.0, 0.0], math.sqrt(2.25))]
    assert hull_reach(cube, halves) <= 1e-12
    assert hull_reach(cube, [halves[0], (halves[1][0], 1.45)]) > 0
    # A rod whose ends' spheres hold every vertex but not its middle.
    rod = cube * np.array([1.0, 0.1, 0.1])
    ends = [([-1.0, 0.0, 0.0], 0.2), ([1.0, 0.0, 0.0], 0.2)]
    assert covered(rod, ends).all()
    assert hull_reach(rod, ends) > 0.5


@pytest.mark.parametrize("name", MESH_SOURCES)
def test_shipped_meshed_spheres_are_the_script_output(tmp_path: Path, name: str) -> None:
    """scripts/make_robot_spheres.py regenerates robots/spheres/<name>.yml byte for byte, and its stored hulls."""
    script = str(ROOT / "scripts" / "make_robot_spheres.py")
    hulls = tmp_path / "hulls.npz"
    command = [sys.executable, script, "--out", str(tmp_path), "--hulls", str(hulls), "--robots", name]
    subprocess.run(command, check=True, capture_output=True)
    assert (tmp_path / f"{name}.yml").read_text() == (ROOT / "robots" / "spheres" / f"{name}.yml").read_text()
    with np.load(hulls) as made, np.load(HULLS) as shipped:
        assert made.files and all(key.split(":")[1] == name for key in made.files)
        assert sorted(made.files) == sorted(key for key in shipped.files if key.split(":")[1] == name)
        for key in made.files:
            np.testing.assert_array_equal(made[key], shipped[key])


@pytest.mark.parametrize("name", MESHED)
def test_shipped_meshed_spheres_cover_the_published_meshes(name: str) -> None:
    """The shipped spheres of each link, less the margin the script added to every radius, hold the convex hull of
    the published collision meshes of that link (stored in tests/data, in the built-in link frames)."""
    shipped = yaml.safe_load((ROOT / "robots" / "spheres" / f"{name}.yml").read_text())["collision_spheres"]
    with np.load(HULLS) as stored:
        hulls = {key.split(":")[2]: stored[key] for key in stored.files if key.startswith(f"hull:{name}:")}
        grown = float(stored[f"grown:{name}"])
    assert sorted(hulls) == sorted(shipped) and len(hulls) == ik_layer.load_robot(name).dof + 1
    assert 1e-3 < grown < 6e-3  # the kinematic gap (<= 5 mm) plus 1 mm
    for link, points in hulls.items():
        spheres = [(s["center"], s["radius"] - grown) for s in shipped[link]]
        assert 4 <= len(spheres) <= 8, link
        assert points.dtype == np.float64 and points.shape[1] == 3 and len(points) >= 50, link
        assert hull_reach(points, spheres) <= 1e-9, link
        assert hull_reach(points, [(c, r - 1e-4) for c, r in spheres]) > 0, link  # tight, but for the margin


def test_builtin_ur5e_loads_its_spheres_apart_at_rest() -> None:
    robot = ik_layer.load_robot("ur5e")
    assert robot.collision is not None and 30 <= len(robot.collision) <= 50
    assert robot.collision.links == (
        "base_link",
        "shoulder_link",
        "upper_arm_link",
        "forearm_link",
        "wrist_1_link",
        "wrist_2_link",
        "wrist_3_link",
    )
    assert ("base_link", "forearm_link") not in robot.collision.ignored  # the arm folding onto its base is checked
    assert ("wrist_1_link", "wrist_3_link") in robot.collision.ignored  # their hulls never meet
    # Apart at every joint zero (arm stretched out) and at the usual home pose (arm upright, wrist bent).
    home = torch.tensor([0.0, -math.pi / 2, 0.0, -math.pi / 2, 0.0, 0.0], dtype=F64)
    for q in (robot.neutral_q(), home):
        assert bool((robot.collision.self_distances(robot, q) > 0).all())
    # Folded back onto itself (elbow at -170 degrees): some sphere pair overlaps.
    folded = torch.tensor([0.0, -math.pi / 2, -3.0, 0.0, 0.0, 0.0], dtype=F64)
    assert bool((robot.collision.self_distances(robot, folded) < 0).any())


def test_builtin_iiwa14_loads_its_spheres_apart_standing_straight() -> None:
    robot = ik_layer.load_robot("iiwa14")
    assert robot.collision is not None and 30 <= len(robot.collision) <= 50
    assert robot.collision.links == tuple(f"iiwa_link_{k}" for k in range(8))
    adjacent = {(f"iiwa_link_{k}", f"iiwa_link_{k + 1}") for k in range(7)}
    never = {("iiwa_link_0", "iiwa_link_2"), ("iiwa_link_1", "iiwa_link_3"), ("iiwa_link_3", "iiwa_link_5")}
    never.add(("iiwa_link_5", "iiwa_link_7"))  # the meshes stay 30 mm apart; the hull of link_5's fork does not
    assert robot.collision.ignored == adjacent | never  # nothing touches standing straight
    assert ("iiwa_link_0", "iiwa_link_5") not in robot.collision.ignored  # the forearm folding onto the base
    # Random configurations rarely collide with themselves (with link_5 and link_7 checked: 23 %).
    q = robot.random_q((4000,), generator=torch.Generator().manual_seed(0))
    assert float((robot.collision.self_distances(robot, q).amin(-1) < 0).float().mean()) < 0.02
    # Apart at every joint zero (standing straight up) and with the elbow bent a right angle.
    bent = torch.tensor([0.0, 0.5, 0.0, -math.pi / 2, 0.0, 0.5, 0.0], dtype=F64)
    for q in (robot.neutral_q(), bent):
        assert bool((robot.collision.self_distances(robot, q) > 0).all())
    # Folded (shoulder forward and elbow back, 115 degrees each): the forearm and wrist reach into the base.
    folded = torch.tensor([0.0, 2.0, 0.0, -2.0, 0.0, 0.0, 0.0], dtype=F64)
    distances = robot.collision.self_distances(robot, folded)
    names, pairs = robot.collision.sphere_links, robot.collision.pairs.tolist()
    hit = {tuple(sorted((names[pairs[k][0]], names[pairs[k][1]]))) for k in (distances < 0).nonzero().flatten()}
    assert ("iiwa_link_0", "iiwa_link_5") in hit and ("iiwa_link_0", "iiwa_link_6") in hit


@needs_erd
def test_shipped_panda_spheres_are_the_script_output(tmp_path: Path) -> None:
    """scripts/make_robot_spheres.py regenerates robots/spheres/panda.yml byte for byte."""
    script = str(ROOT / "scripts" / "make_robot_spheres.py")
    subprocess.run(
        [sys.executable, script, "--out", str(tmp_path), "--robots", "panda"], check=True, capture_output=True
    )
    assert (tmp_path / "panda.yml").read_text() == (ROOT / "robots" / "spheres" / "panda.yml").read_text()


@needs_erd
def test_shipped_panda_spheres_cover_the_published_geometry() -> None:
    """Every point of every collision primitive of example-robot-data's panda (on the built-in robot's links) lies
    inside one of the shipped spheres of its link."""
    assert ERD is not None
    model = pin.buildModelFromUrdf(str(ERD / PANDA_URDF))
    geometry = pin.buildGeomFromUrdf(model, str(ERD / PANDA_URDF), pin.COLLISION)
    shipped = yaml.safe_load((ROOT / "robots" / "spheres" / "panda.yml").read_text())["collision_spheres"]
    robot = ik_layer.load_robot("panda")
    rng = np.random.default_rng(3)
    checked = 0
    for obj in geometry.geometryObjects:
        link = model.frames[obj.parentFrame].name
        if link not in shipped:
            assert link not in {f.name for f in robot.model.frames}, f"{link} has geometry but no spheres"
            continue
        shape = obj.geometry
        if type(shape).__name__ == "Cylinder":
            local = in_cylinder(1500, shape.radius, 2 * shape.halfLength, rng)
        else:
            assert type(shape).__name__ == "Sphere", type(shape).__name__
            direction = rng.normal(size=(1500, 3))
            local = shape.radius * direction / np.linalg.norm(direction, axis=1, keepdims=True)
        # The primitive's placement in its link's frame: the frame's placement in the joint, inverted, times the
        # object's placement in the joint.
        in_link = model.frames[obj.parentFrame].placement.inverse() * obj.placement
        points = local @ in_link.rotation.T + in_link.translation
        spheres = [(s["center"], s["radius"]) for s in shipped[link]]
        assert covered(points, spheres).all(), obj.name
        checked += 1
    assert checked >= 20


def test_builtin_panda_loads_its_spheres_and_moves_them_with_the_robot() -> None:
    robot = ik_layer.load_robot("panda")
    assert robot.collision is not None and len(robot.collision) == len(robot.collision_spheres) >= 30
    link, centre, radius = robot.collision_spheres[0]
    assert link == "panda_link0" and centre.shape == (3,) and radius > 0
    moved = robot.to(torch.float32)
    assert moved.collision is not None and moved.collision.centers.dtype == torch.float32
    assert ik_layer.load_robot("panda", collision=None).collision is None
    assert ik_layer.load_robot("planar3").collision is None  # no spheres shipped, no URDF geometry


@pytest.mark.parametrize("frames_robot", ["panda", "erd"])
def test_sphere_centres_and_jacobians_match_pinocchio(frames_robot: str) -> None:
    if frames_robot == "erd":
        if ERD is None:
            pytest.skip("example-robot-data not installed")
        robot = ik_layer.load_robot(ERD / PANDA_URDF, "panda_hand_tcp", floating_base=True)
    else:
        robot = ik_layer.load_robot("panda")
    spheres = robot.collision
    assert spheres is not None
    q = robot.random_q(8, generator=gen(4))
    if robot.floating_base:
        q = random_bases(q, gen(5))
    centres, jac = spheres.centres(robot, q, jacobian=True)
    assert jac is not None
    model, data = robot.model, robot.model.createData()
    for b in range(q.shape[0]):
        q_pin = robot.to_pinocchio_q(q[b]).numpy()
        pin.forwardKinematics(model, data, q_pin)
        pin.updateFramePlacements(model, data)
        for k, link in enumerate(spheres.sphere_links):
            placement = data.oMf[model.getFrameId(link)]
            expected = placement.act(spheres.centers[k].numpy())
            np.testing.assert_allclose(centres[b, k].numpy(), expected, atol=1e-10)
    # The Jacobian against central differences of the centres along each tangent direction.
    step = 1e-6
    for axis in range(robot.dof):
        dq = torch.zeros(q.shape[0], robot.dof, dtype=F64)
        dq[:, axis] = step
        ahead = spheres.centres(robot, robot.integrate(q, dq), jacobian=False)[0]
        behind = spheres.centres(robot, robot.integrate(q, -dq), jacobian=False)[0]
        torch.testing.assert_close(jac[..., axis], (ahead - behind) / (2 * step), atol=1e-7, rtol=1e-6)


@needs_erd
def test_self_collision_pairs_leave_out_rigid_adjacent_and_srdf_pairs() -> None:
    assert ERD is not None
    plain = ik_layer.load_robot(ERD / PANDA_URDF, "panda_hand_tcp")
    with_srdf = ik_layer.load_robot(ERD / PANDA_URDF, "panda_hand_tcp", srdf=ERD / PANDA_SRDF)
    assert plain.collision is not None and with_srdf.collision is not None
    names = plain.collision.sphere_links
    checked = {tuple(sorted((names[i], names[j]))) for i, j in plain.collision.pairs.tolist()}
    assert ("panda_link0", "panda_link1") not in checked  # adjacent
    assert ("panda_hand", "panda_link7") not in checked  # one rigid body (link7, link8, hand)
    assert ("panda_hand", "panda_link6") not in checked  # adjacent through joint 7
    assert ("panda_hand", "panda_link0") in checked and ("panda_link2", "panda_link5") in checked
    assert ("panda_link0", "panda_link4") in plain.collision.ignored or ("panda_link0", "panda_link4") in checked
    assert ("panda_link0", "panda_link4") in with_srdf.collision.ignored  # the SRDF's "Never"
    assert with_srdf.collision.pairs.shape[0] < plain.collision.pairs.shape[0]
    # Every pair is checked once, i < j, on two links, none of them ignored.
    pairs = with_srdf.collision.pairs
    assert bool((pairs[:, 0] < pairs[:, 1]).all()) and len({tuple(p) for p in pairs.tolist()}) == pairs.shape[0]
    for i, j in pairs.tolist():
        a, b = sorted((names[i], names[j]))
        assert a != b and (a, b) not in with_srdf.collision.ignored
    # Nothing overlaps at the neutral configuration (pairs touching there are ignored, as MoveIt's "Default").
    assert bool((with_srdf.collision.self_distances(with_srdf, with_srdf.neutral_q()) >= 0).all())


def test_too_many_self_pairs_leave_world_obstacles_only(caplog: pytest.LogCaptureFixture) -> None:
    """A collision model over MAX_SELF_PAIRS sphere pairs still loads (one INFO line): a solve among obstacles runs,
    one asking for self-collision is refused with the count."""
    robot = ik_layer.load_robot("panda", collision=None)
    count = math.isqrt(2 * MAX_SELF_PAIRS) + 2
    far = torch.tensor([[10.0 * k, 0, 0] for k in range(count)], dtype=F64)  # apart at every configuration
    links = ("panda_link1",) * (count // 2) + ("panda_link5",) * (count - count // 2)
    within = RobotSpheres(robot, LinkSpheres(links, far, torch.full((count,), 0.01, dtype=F64)))
    assert within.pair_count == within.pairs.shape[0] == (count // 2) * (count - count // 2) <= MAX_SELF_PAIRS
    per_link = count // 4 * 2
    ball = {"center": [0.0, 0.0, 0.0], "radius": 0.01}
    with caplog.at_level(logging.INFO, logger="ik_layer"):
        crowded = ik_layer.load_robot("panda", collision={f"panda_link{k}": [ball] * per_link for k in (1, 3, 5, 7)})
    pairs = 6 * per_link**2  # the four links' six pairs, apart at rest
    assert crowded.collision is not None and crowded.collision.pair_count == pairs > MAX_SELF_PAIRS
    assert crowded.collision.pairs.shape == (0, 2)
    assert [r.getMessage() for r in caplog.records if r.name == "ik_layer"] == [
        f"panda: {pairs} sphere pairs to check for self-collision, more than {MAX_SELF_PAIRS}: use fewer spheres or "
        "ignore link pairs (self_collision_ignore); its collision spheres check world obstacles only"
    ]
    target = crowded.fk(crowded.random_q(2, generator=gen(1)))
    with pytest.raises(IKLayerError, match=rf"self_collision: {pairs} sphere pairs .* more than {MAX_SELF_PAIRS}"):
        ik_layer.solve(crowded, target, self_collision=1)
    far_ball = ik_layer.Sphere([2.0, 0.0, 0.0], 0.1)
    for reference in (False, True):
        result = ik_layer.solve(crowded, target, obstacles=[far_ball], generator=gen(2), reference=reference)
        assert bool(result.success.all()) and result.min_distance is not None
        centres = crowded.collision.centres(crowded, result.q, jacobian=False)[0]
        least = (centres - torch.tensor([2.0, 0.0, 0.0], dtype=F64)).norm(dim=-1).amin(-1) - 0.11
        torch.testing.assert_close(result.min_distance, least, atol=1e-9, rtol=0)


@needs_pybullet
def test_a_robot_over_the_self_pair_bound_loads_by_default() -> None:
    """pybullet_data's minitaur (888 spheres on its URDF's primitives) loaded by default, as before collision models
    existed; its spheres check obstacles, not self-collision."""
    import pybullet_data

    path = Path(pybullet_data.getDataPath()) / "quadruped" / "minitaur_rainbow_dash_v1.urdf"
    robot = ik_layer.load_robot(path)
    assert robot.collision is not None and len(robot.collision) == 888
    assert robot.collision.pair_count > MAX_SELF_PAIRS and robot.collision.pairs.shape == (0, 2)
    assert robot.dof == ik_layer.load_robot(path, collision=None).dof == 3


def test_bad_collision_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(IKLayerError, match="collision must be 'auto', a sphere file"):
        ik_layer.load_robot("panda", collision=3)  # type: ignore[arg-type]
    with pytest.raises(IKLayerError, match="cannot read collision spheres"):
        ik_layer.load_robot("panda", collision=tmp_path / "missing.yml")
    with pytest.raises(IKLayerError, match="'nowhere' is not a link of the model"):
        ik_layer.load_robot("panda", collision={"nowhere": [{"center": [0, 0, 0], "radius": 0.1}]})
    with pytest.raises(IKLayerError, match="self_collision_ignore: 'nowhere' is not a link"):
        ik_layer.load_robot(
            "panda",
            collision={"collision_spheres": {"panda_link1": []}, "self_collision_ignore": {"nowhere": []}},
        )
    with pytest.raises(IKLayerError, match="at least one sphere"):
        ik_layer.load_robot("panda", collision={"panda_link1": []})
    with pytest.raises(IKLayerError, match="cannot read SRDF"):
        ik_layer.load_robot("panda", srdf=tmp_path / "missing.srdf")
    bad = tmp_path / "bad.srdf"
    bad.write_text("<robot><disable_collisions")
    with pytest.raises(IKLayerError, match="not valid XML"):
        ik_layer.load_robot("panda", srdf=bad)
    urdf = '<robot name="r"><link name="a"><collision><geometry><box size="1 0 1"/></geometry></collision></link>'
    urdf += '<link name="b"/><joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>'
    urdf += '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>'
    with pytest.raises(IKLayerError, match="box size must be positive"):
        ik_layer.load_robot(urdf)
