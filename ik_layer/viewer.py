"""An interactive 3D viewer of a robot and its IK, in the browser, built on viser (the ``view`` extra).

``ik-layer view ROBOT`` (or :class:`Viewer` from Python) serves a page showing the robot, a draggable
gizmo for the end-effector target and one slider per joint. Dragging the gizmo re-solves IK with
:func:`ik_layer.solve`, warm-started from the configuration on screen; moving a slider shows that
configuration (FK) and brings the target along. The panel shows whether the target was reached and
the errors.

With obstacles (``--scene FILE``, or ``obstacles=[...]``) each obstacle has a gizmo of its own: dragging it
re-solves the target among the moved obstacles, so the arm moves around it; the robot's collision spheres are
drawn (a checkbox hides them) and the panel gives the least distance.

The robot is drawn from its URDF's visual meshes and primitives when the file has them and they can
be found (``package://`` URIs are looked up beside the URDF and in ``package_dirs``), otherwise as
capsules between the joint origins; frame axes mark the joints and the end effector.
"""

from __future__ import annotations

import math
import threading
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pinocchio as pin
import torch
from torch import Tensor

from ik_layer.api import solve
from ik_layer.collision.shapes import Box, Capsule, Obstacle, Sphere, check_obstacles, flattened
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import check_collision
from ik_layer.core.result import IKResult
from ik_layer.exceptions import IKLayerError
from ik_layer.loading import load_robot
from ik_layer.model.joints import motion_axis
from ik_layer.model.lie import as_transform, matrix_to_pose
from ik_layer.model.robot import Robot
from ik_layer.robots import REGISTRY

try:
    import trimesh
    import viser
except ImportError as err:  # pragma: no cover - depends on the install
    raise ImportError("the viewer needs the view extra: pip install -e '.[view]' in a checkout of ik-layer") from err

__all__ = ["Viewer", "Visual", "load_visuals"]

_LINK_COLOR = (150, 170, 200)
_JOINT_COLOR = (70, 80, 100)
_MESH_COLOR = (190, 190, 190)
_SPHERE_COLOR = (90, 200, 120)
_OBSTACLE_COLOR = (220, 120, 60)


@dataclass(frozen=True)
class Visual:
    """One ``<visual>`` of a URDF, loaded.

    Attributes:
        link: the link it belongs to.
        origin: (4, 4) its placement in the link's frame.
        mesh: its geometry (a file's mesh, scaled, or a box, cylinder or sphere).
        color: RGB (0-255) from the URDF's material, or None to keep the mesh file's own colours.
    """

    link: str
    origin: np.ndarray
    mesh: trimesh.Trimesh
    color: tuple[int, int, int] | None


def load_visuals(urdf: str | Path, package_dirs: Sequence[str | Path] = ()) -> tuple[list[Visual], list[str]]:
    """The visuals of a URDF file, and one line per visual that could not be loaded (missing mesh file...).

    ``package://PKG/rest`` is looked up as ``DIR/PKG/rest`` for each of ``package_dirs`` and each folder above
    the URDF, and as ``DIR/rest`` for a folder ``DIR`` named ``PKG`` above it; relative paths start at the
    URDF's folder.
    """
    path = Path(urdf)
    root = ET.parse(path).getroot()
    materials = {m.get("name"): _rgb(m) for m in root.findall("material")}
    visuals: list[Visual] = []
    problems: list[str] = []
    for link in root.findall("link"):
        name = link.get("name", "")
        for visual in link.findall("visual"):
            try:
                mesh = _geometry(visual.find("geometry"), path.parent, package_dirs)
            except (OSError, ValueError, ImportError) as err:
                problems.append(f"link {name!r}: {err}")
                continue
            if mesh is None:
                continue
            material = visual.find("material")
            color = None if material is None else _rgb(material) or materials.get(material.get("name"))
            visuals.append(Visual(name, _origin(visual.find("origin")), mesh, color))
    return visuals, problems


def _rgb(material: ET.Element) -> tuple[int, int, int] | None:
    color = material.find("color")
    if color is None or not color.get("rgba"):
        return None
    r, g, b = (float(x) for x in color.get("rgba", "").split()[:3])
    return round(255 * r), round(255 * g), round(255 * b)


def _origin(origin: ET.Element | None) -> np.ndarray:
    if origin is None:
        return np.eye(4)
    xyz = np.array([float(x) for x in origin.get("xyz", "0 0 0").split()])
    rpy = np.array([float(x) for x in origin.get("rpy", "0 0 0").split()])
    return pin.SE3(pin.rpy.rpyToMatrix(rpy), xyz).homogeneous


def _geometry(geometry: ET.Element | None, folder: Path, package_dirs: Sequence[str | Path]) -> trimesh.Trimesh | None:
    """The mesh of a ``<geometry>`` element (None if it is empty)."""
    shape = None if geometry is None else next(iter(geometry), None)
    if shape is None:
        return None
    numbers = {key: [float(x) for x in value.split()] for key, value in shape.attrib.items() if key != "filename"}
    if shape.tag == "box":
        return trimesh.creation.box(extents=numbers["size"])
    if shape.tag == "cylinder":
        return trimesh.creation.cylinder(radius=numbers["radius"][0], height=numbers["length"][0])
    if shape.tag == "sphere":
        return trimesh.creation.icosphere(subdivisions=2, radius=numbers["radius"][0])
    if shape.tag != "mesh":
        raise ValueError(f"unsupported geometry <{shape.tag}>")
    filename = shape.get("filename", "")
    found = _resolve(filename, folder, package_dirs)
    if found is None:
        raise OSError(f"mesh {filename!r} not found (give its package folder with --package-dir)")
    mesh = trimesh.load(found, force="mesh")
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise ValueError(f"mesh {str(found)!r} holds no triangles")
    if "scale" in numbers:
        mesh.apply_scale(numbers["scale"] if len(numbers["scale"]) == 3 else numbers["scale"][0])
    return mesh


def _resolve(filename: str, folder: Path, package_dirs: Sequence[str | Path]) -> Path | None:
    """The file a URDF mesh ``filename`` names, or None."""
    if filename.startswith("package://"):
        package, _, rest = filename.removeprefix("package://").partition("/")
        candidates = []
        for base in [*map(Path, package_dirs), folder, *folder.parents]:
            candidates.append(base / package / rest)
            if base.name == package:
                candidates.append(base / rest)
    elif filename.startswith("file://"):
        candidates = [Path(unquote(urlparse(filename).path))]
    else:
        candidates = [folder / filename]
    return next((c for c in candidates if c.is_file()), None)


def _wxyz(rotation: np.ndarray) -> np.ndarray:
    x, y, z, w = pin.Quaternion(np.asarray(rotation, dtype=np.float64)).coeffs()
    return np.array([w, x, y, z])


def _z_to(direction: np.ndarray) -> np.ndarray:
    """A rotation taking +z to the unit vector ``direction``."""
    z = np.array([0.0, 0.0, 1.0])
    return pin.Quaternion.FromTwoVectors(z, direction).matrix()


class Viewer:
    """A viser server showing ``robot``, a target gizmo and joint sliders; IK re-solved on every drag.

    Args:
        robot: a built-in name, a URDF path or a loaded :class:`ik_layer.Robot` (solved in float64 on the CPU) with
            one end-effector frame on a fixed base (others raise an :class:`~ik_layer.IKLayerError`).
        urdf: the URDF whose visuals to draw (default: ``robot``'s own file); its links are matched by name,
            so a kinematics-only built-in robot can be drawn with a full description's meshes.
        ee_frame: the end-effector frame (default: the robot's).
        options: solver options of the re-solves (default: :class:`SolveOptions` defaults).
        host, port: where to serve the page (port 0: a free one).
        package_dirs: folders holding the packages of ``package://`` mesh URIs.
        verbose: let viser print its banner and connection log.

    Attributes:
        robot: the robot solved for.
        server: the :class:`viser.ViserServer`.
        gizmo: the target's transform controls.
        obstacles: the obstacles, one shape each (a batched shape is split), as they are now.
        obstacle_gizmos: each obstacle's transform controls.
        q: (dof,) the configuration on screen.
        result: the last IK answer (None before the first solve).
        meshes_drawn: number of URDF visuals drawn (0: the links are drawn as capsules).
        problems: visuals of the URDF that could not be drawn, one line each.
    """

    def __init__(
        self,
        robot: str | Path | Robot,
        *,
        urdf: str | Path | None = None,
        ee_frame: str | None = None,
        options: SolveOptions | None = None,
        host: str = "127.0.0.1",
        port: int = 8080,
        package_dirs: Sequence[str | Path] = (),
        verbose: bool = False,
        obstacles: Sequence[Obstacle] = (),
    ) -> None:
        if isinstance(robot, Robot):
            if robot.ee_frames is not None or robot.floating_base:
                raise IKLayerError(
                    f"the viewer drives one end-effector frame on a fixed base; {robot.name!r} has "
                    + (
                        "a floating base"
                        if robot.floating_base
                        else f"end-effector frames {list(robot.ee_frames or ())}"
                    )
                    + ": load it with ee_frame=... (and floating_base=False) to view it"
                )
            self.robot = robot.to(device="cpu", dtype=torch.float64)
        else:
            self.robot = load_robot(robot, ee_frame)
            if urdf is None and str(robot) not in REGISTRY and Path(robot).is_file():
                urdf = robot
        self.options = options if options is not None else SolveOptions()
        self.obstacles = _single_shapes(check_obstacles(list(obstacles)))
        check_collision(self.robot, self.options, (tuple(self.obstacles),))
        self.result: IKResult | None = None
        self.problems: list[str] = []
        self._lock = threading.RLock()
        self._syncing = False
        self._model = self.robot.full_model
        self._data = self._model.createData()
        self._ee = self._model.getFrameId(self.robot.ee_frame)
        lower, upper = self.robot.lower, self.robot.upper
        self.q = torch.zeros(self.robot.dof, dtype=torch.float64).clamp(lower, upper)

        self.server = viser.ViserServer(host=host, port=port, label=f"ik-layer: {self.robot.name}", verbose=verbose)
        self._radius = self._link_radius()
        self._draw_robot(urdf, package_dirs)
        self.gizmo = self.server.scene.add_transform_controls(
            "/target", scale=7 * self._radius, line_width=3.0, depth_test=False
        )
        self.server.scene.add_frame("/target/axes", axes_length=5 * self._radius, axes_radius=self._radius / 5)

        def on_drag(_event: object) -> None:
            self.on_gizmo_update()

        self.gizmo.on_update(on_drag)
        self.obstacle_gizmos = [self._draw_obstacle(k, shape) for k, shape in enumerate(self.obstacles)]
        self._build_panel()
        self.set_q(self.q)
        self.aim_camera()

    @property
    def url(self) -> str:
        """The page's address."""
        return f"http://{self.server.get_host()}:{self.server.get_port()}"

    def set_target(self, target: Tensor | np.ndarray | Sequence[float], *, move_gizmo: bool = True) -> IKResult:
        """Solve IK for ``target`` ((7,) pose ``[x, y, z, qx, qy, qz, qw]`` or (4, 4)) from the shown configuration.

        The answer (the best configuration, reached or not) is shown, the sliders follow and the panel says
        whether the target was reached; the gizmo moves to ``target`` unless ``move_gizmo`` is False.
        """
        transform = as_transform(torch.as_tensor(np.asarray(target, dtype=np.float64)), "target")
        if transform.shape != (4, 4):
            raise IKLayerError(f"target must be one pose (7,) or transform (4, 4), got {tuple(transform.shape)}")
        with self._lock:
            result = solve(self.robot, transform, self.options, warm_start=self.q, obstacles=self.obstacles)
            self.result = result
            self._show(result.q)
            if move_gizmo:
                self._place_gizmo(transform)
            self._report(result)
            return result

    def on_gizmo_update(self) -> IKResult:
        """Re-solve for the gizmo's pose (what a drag in the browser calls)."""
        with self._lock:
            x, y, z = (float(v) for v in self.gizmo.position)
            w, qx, qy, qz = (float(v) for v in self.gizmo.wxyz)
            return self.set_target([x, y, z, qx, qy, qz, w], move_gizmo=False)

    def move_obstacle(self, k: int, pose: Tensor | np.ndarray | Sequence[float]) -> IKResult:
        """Move obstacle ``k`` to ``pose`` ((7,) ``[x, y, z, qx, qy, qz, qw]`` or (4, 4): its centre's pose, a
        capsule's midpoint with its axis along z) and re-solve the target among the moved obstacles."""
        if not 0 <= k < len(self.obstacles):
            raise IKLayerError(f"obstacle {k} does not exist: the viewer has {len(self.obstacles)}")
        transform = as_transform(torch.as_tensor(np.asarray(pose, dtype=np.float64)), "pose")
        with self._lock:
            self.obstacles[k] = _placed(self.obstacles[k], transform)
            position, wxyz = _position_wxyz(transform)
            self.obstacle_gizmos[k].position, self.obstacle_gizmos[k].wxyz = position, wxyz
            return self.on_gizmo_update()

    def set_q(self, q: Tensor | np.ndarray | Sequence[float]) -> Tensor:
        """Show configuration ``q`` (dof,) (clamped into the limits), put the target at its end effector; its pose."""
        q = self.robot.check_q(torch.as_tensor(np.asarray(q, dtype=np.float64)).reshape(self.robot.dof))
        q = q.clamp(self.robot.lower, self.robot.upper)
        with self._lock:
            self._show(q)
            pose = self.robot.fk(q)
            self._place_gizmo(pose)
            self.result = None
            self._status.content = "Target at the end effector (joint sliders: forward kinematics)."
            return pose

    def ee_pose(self) -> Tensor:
        """(7,) pose of the end effector as drawn."""
        pose = self._data.oMf[self._ee]
        x, y, z, w = pin.Quaternion(pose.rotation).coeffs()
        return torch.tensor([*pose.translation, x, y, z, w], dtype=torch.float64)

    def close(self) -> None:
        """Stop serving."""
        self.server.stop()

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- drawing ---------------------------------------------------------------------------------------------

    def _link_radius(self) -> float:
        """A radius for link capsules: 2.5 % of the chain's length, within [5 mm, 60 mm]."""
        model = self._model
        length = sum(float(np.linalg.norm(model.jointPlacements[j].translation)) for j in range(1, model.njoints))
        length += float(np.linalg.norm(model.frames[self._ee].placement.translation))
        return min(max(0.025 * length, 0.005), 0.06)

    def _draw_robot(self, urdf: str | Path | None, package_dirs: Sequence[str | Path]) -> None:
        scene, model, r = self.server.scene, self._model, self._radius
        scene.add_grid("/grid", width=2.0, height=2.0, cell_size=0.1, section_size=0.5)
        self._joint_nodes = [
            scene.add_frame(f"/robot/joint_{j}", show_axes=j > 0, axes_length=3 * r, axes_radius=r / 8)
            for j in range(model.njoints)
        ]
        self._ee_node = scene.add_frame("/robot/ee", axes_length=5 * r, axes_radius=r / 5)
        meshes = self._draw_visuals(urdf, package_dirs) if urdf is not None else 0
        self._capsules: list[viser.MeshHandle] = []
        for j in range(1, model.njoints):
            self._capsule(model.parents[j], model.jointPlacements[j].translation, f"link_{j}")
            self._joint_marker(j)
        frame = model.frames[self._ee]
        self._capsule(frame.parentJoint, frame.placement.translation, "to_ee")
        self.meshes_drawn = meshes
        self.spheres_drawn = self._draw_spheres()
        for handle in self._capsules:
            handle.visible = meshes == 0

    def _capsule(self, joint: int, offset: np.ndarray, name: str) -> None:
        """A capsule from joint ``joint``'s origin to ``offset`` in its frame (nothing for zero length)."""
        length = float(np.linalg.norm(offset))
        if length < 1e-6:
            return
        mesh = trimesh.creation.capsule(height=length, radius=self._radius, count=[16, 16])
        handle = self.server.scene.add_mesh_simple(
            f"/robot/joint_{joint}/{name}",
            mesh.vertices,
            mesh.faces,
            color=_LINK_COLOR,
            position=np.asarray(offset) / 2,
            wxyz=_wxyz(_z_to(np.asarray(offset) / length)),
        )
        self._capsules.append(handle)

    def _joint_marker(self, j: int) -> None:
        """A short cylinder along the axis of a moving joint."""
        jm = self._model.joints[j]
        if jm.nv != 1:
            return
        linear, angular = motion_axis(jm)
        axis = angular if np.linalg.norm(angular) > 1e-9 else linear
        mesh = trimesh.creation.cylinder(radius=1.35 * self._radius, height=3.2 * self._radius, sections=24)
        handle = self.server.scene.add_mesh_simple(
            f"/robot/joint_{j}/axis",
            mesh.vertices,
            mesh.faces,
            color=_JOINT_COLOR,
            wxyz=_wxyz(_z_to(axis / np.linalg.norm(axis))),
        )
        self._capsules.append(handle)

    def _draw_spheres(self) -> list[viser.MeshHandle]:
        """The robot's collision spheres on their links (hidden unless obstacles or self-collision are on)."""
        spheres = self.robot.collision
        if spheres is None:
            return []
        handles = []
        shown = bool(self.obstacles) or bool(self.options.self_collision)
        for k, (link, centre, radius) in enumerate(self.robot.collision_spheres):
            frame = self._model.frames[self._model.getFrameId(link)]
            ball = trimesh.creation.icosphere(subdivisions=2, radius=float(radius))
            handle = self.server.scene.add_mesh_simple(
                f"/robot/joint_{frame.parentJoint}/sphere_{k}",
                ball.vertices,
                ball.faces,
                color=_SPHERE_COLOR,
                opacity=0.45,
                position=frame.placement.act(np.asarray(centre, dtype=np.float64)),
            )
            handle.visible = shown
            handles.append(handle)
        return handles

    def _draw_obstacle(self, k: int, shape: Obstacle) -> viser.TransformControlsHandle:
        """Obstacle ``k`` drawn under a gizmo of its own; dragging it moves the obstacle and re-solves."""
        mesh, transform = _obstacle_mesh(shape)
        position, wxyz = _position_wxyz(torch.as_tensor(transform))
        gizmo = self.server.scene.add_transform_controls(
            f"/obstacles/{k}", scale=4 * self._radius, line_width=2.0, position=position, wxyz=wxyz
        )
        self.server.scene.add_mesh_simple(
            f"/obstacles/{k}/shape", mesh.vertices, mesh.faces, color=_OBSTACLE_COLOR, opacity=0.8
        )

        def on_drag(_event: object) -> None:
            x, y, z = (float(v) for v in gizmo.position)
            w, qx, qy, qz = (float(v) for v in gizmo.wxyz)
            self.move_obstacle(k, [x, y, z, qx, qy, qz, w])

        gizmo.on_update(on_drag)
        return gizmo

    def _draw_visuals(self, urdf: str | Path, package_dirs: Sequence[str | Path]) -> int:
        """Draw the URDF's visuals on the links of the model with their names; the number drawn."""
        visuals, self.problems = load_visuals(urdf, package_dirs)
        drawn = 0
        for i, visual in enumerate(visuals):
            if not self._model.existFrame(visual.link):
                self.problems.append(f"link {visual.link!r}: not in the robot's model")
                continue
            frame = self._model.frames[self._model.getFrameId(visual.link)]
            local = frame.placement.homogeneous @ visual.origin
            name = f"/robot/joint_{frame.parentJoint}/visual_{i}"
            pose = {"position": local[:3, 3], "wxyz": _wxyz(local[:3, :3])}
            colors = visual.mesh.visual
            if visual.color is None and colors is not None and colors.kind is not None:
                self.server.scene.add_mesh_trimesh(name, visual.mesh, **pose)
            else:
                mesh = visual.mesh
                self.server.scene.add_mesh_simple(
                    name, mesh.vertices, mesh.faces, color=visual.color or _MESH_COLOR, **pose
                )
            drawn += 1
        return drawn

    def _build_panel(self) -> None:
        gui, robot = self.server.gui, self.robot
        gui.add_markdown(f"**{robot.name}**: {robot.dof} joints, end effector `{robot.ee_frame}`")
        self._status = gui.add_markdown("")
        self._sliders = []
        with gui.add_folder("Joints (FK)"):
            for name, lo, hi in zip(robot.joint_names, robot.lower.tolist(), robot.upper.tolist(), strict=True):
                slider = gui.add_slider(
                    name, min=lo, max=hi, step=(hi - lo) / 1000, initial_value=min(max(0.0, lo), hi)
                )
                slider.on_update(lambda _event: self._on_slider())
                self._sliders.append(slider)
        capsules = gui.add_checkbox("Links as capsules", initial_value=self.meshes_drawn == 0)
        capsules.on_update(lambda _event: self._show_capsules(capsules.value))
        if self.spheres_drawn:
            shown = bool(self.obstacles) or bool(self.options.self_collision)
            spheres = gui.add_checkbox("Collision spheres", initial_value=shown)
            spheres.on_update(lambda _event: self._show_spheres(spheres.value))

        def random_target(_event: object) -> None:
            self.set_target(self.robot.fk(self.robot.random_q()))

        def home(_event: object) -> None:
            self.set_q(torch.zeros(self.robot.dof, dtype=torch.float64))

        gui.add_button("Random reachable target").on_click(random_target)
        gui.add_button("Home").on_click(home)

    def _show_capsules(self, visible: bool) -> None:
        for handle in self._capsules:
            handle.visible = visible

    def _show_spheres(self, visible: bool) -> None:
        for handle in self.spheres_drawn:
            handle.visible = visible

    def _on_slider(self) -> None:
        """A slider moved: show FK of all the sliders (unless it is :meth:`_show` moving them, in this thread)."""
        with self._lock:
            if not self._syncing:
                self.set_q([s.value for s in self._sliders])

    def _show(self, q: Tensor) -> None:
        """Move the drawing and the sliders to ``q``."""
        self.q = q.detach().to(torch.float64).clone()
        full = self.robot.to_full_pinocchio_q(self.q).numpy()
        pin.framesForwardKinematics(self._model, self._data, full)
        with self.server.atomic():
            for node, placement in zip(self._joint_nodes, self._data.oMi, strict=True):
                node.position, node.wxyz = placement.translation, _wxyz(placement.rotation)
            ee = self._data.oMf[self._ee]
            self._ee_node.position, self._ee_node.wxyz = ee.translation, _wxyz(ee.rotation)
        self._syncing = True
        try:
            for slider, value in zip(self._sliders, self.q.tolist(), strict=True):
                slider.value = value  # type: ignore[misc]  # viser: a method between the getter and the setter
        finally:
            self._syncing = False

    def _place_gizmo(self, transform: Tensor) -> None:
        self.gizmo.position, self.gizmo.wxyz = _position_wxyz(transform)

    def _report(self, result: IKResult) -> None:
        ok = bool(result.success)
        head = "**Target reached**" if ok else "**Target not reached** (best configuration shown)"
        self._status.content = (
            f"{head} after {int(result.iterations)} iterations  \n"
            f"position error {float(result.position_error):.2e} m, "
            f"orientation error {float(result.orientation_error):.2e} rad"
        )
        if result.min_distance is not None:
            self._status.content += f"  \nleast distance {float(result.min_distance):.3f} m (collision spheres)"

    def aim_camera(self) -> None:
        """Point the initial camera of new pages (and "Reset view") at the robot as drawn and the target."""
        frames = [p.translation for p in self._data.oMi] + [self._data.oMf[self._ee].translation]
        points = np.array([*frames, np.asarray(self.gizmo.position, dtype=np.float64)])
        low, high = points.min(axis=0), points.max(axis=0)
        size = max(float(np.linalg.norm(high - low)), 0.5)
        direction = np.array([1.0, -1.3, 0.8]) / math.sqrt(1 + 1.69 + 0.64)
        center = (low + high) / 2
        self.server.initial_camera.look_at = tuple(center)
        self.server.initial_camera.position = tuple(center + 1.25 * size * direction)


def _single_shapes(obstacles: Sequence[Obstacle]) -> list[Obstacle]:
    """``obstacles`` with every batched shape split into its shapes (float64, CPU), one gizmo each."""
    single: list[Obstacle] = []
    for shape in obstacles:
        flat = flattened(shape, torch.float64, torch.device("cpu"))
        fields = vars(flat)
        for i in range(math.prod(shape.batch)):
            single.append(type(flat)(**{name: value[i] for name, value in fields.items()}))
    return single


def _obstacle_mesh(shape: Obstacle) -> tuple[trimesh.Trimesh, np.ndarray]:
    """A mesh of ``shape`` in its own frame, and that frame's (4, 4) placement: a ball at its centre, a box at its
    pose, a capsule at its midpoint with its axis along z."""
    placement = np.eye(4)
    if isinstance(shape, Sphere):
        placement[:3, 3] = shape.center.numpy()
        return trimesh.creation.icosphere(subdivisions=2, radius=float(shape.radius)), placement
    if isinstance(shape, Box):
        return trimesh.creation.box(extents=shape.size.numpy()), shape.pose.numpy()
    a, b = shape.a.numpy(), shape.b.numpy()
    length = float(np.linalg.norm(b - a))
    placement[:3, :3] = _z_to((b - a) / length) if length > 0 else np.eye(3)
    placement[:3, 3] = (a + b) / 2
    return trimesh.creation.capsule(height=length, radius=float(shape.radius), count=[16, 16]), placement


def _placed(shape: Obstacle, transform: Tensor) -> Obstacle:
    """``shape`` moved so that its frame (see :func:`_obstacle_mesh`) is at ``transform`` (4, 4)."""
    if isinstance(shape, Sphere):
        return Sphere(transform[:3, 3], shape.radius)
    if isinstance(shape, Box):
        return Box(transform, shape.size)
    half = float((shape.b - shape.a).norm()) / 2 * transform[:3, 2]
    return Capsule(transform[:3, 3] - half, transform[:3, 3] + half, shape.radius)


def _position_wxyz(transform: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """A transform's position and quaternion ``(w, x, y, z)``, as viser takes them."""
    pose = matrix_to_pose(transform.to(torch.float64)).numpy()
    return pose[:3], np.concatenate([pose[6:], pose[3:6]])
