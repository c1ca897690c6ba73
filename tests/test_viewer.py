"""``ik-layer view``: the page is served, a gizmo update re-solves IK, sliders show FK, URDF visuals are drawn."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

import ik_layer
from ik_layer.collision.cost import CollisionCost
from ik_layer.model.lie import matrix_to_pose, pose_error
from ik_layer.testing import free_port

pytest.importorskip("viser", reason="the viewer needs the view extra (pip install -e '.[view]')")
trimesh = pytest.importorskip("trimesh")

from ik_layer.viewer import Viewer, load_visuals  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def viewer() -> Iterator[Viewer]:
    with Viewer("ur5e", port=free_port()) as running:
        yield running


def drag_gizmo_to(viewer: Viewer, pose: torch.Tensor) -> ik_layer.IKResult:
    """What a drag in the browser does: the gizmo's pose changes, then its update callback runs."""
    x, y, z, qx, qy, qz, qw = pose.tolist()
    viewer.gizmo.position = (x, y, z)
    viewer.gizmo.wxyz = (qw, qx, qy, qz)
    return viewer.on_gizmo_update()


def test_page_is_served(viewer: Viewer) -> None:
    page = httpx.get(viewer.url, timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower() and "<script" in page.text.lower()


def test_gizmo_update_shows_a_configuration_that_solves_the_target(viewer: Viewer) -> None:
    robot = viewer.robot
    target = matrix_to_pose(robot.fk(robot.random_q(generator=torch.Generator().manual_seed(0))))
    result = drag_gizmo_to(viewer, target)
    assert bool(result.success)
    assert torch.equal(viewer.q, result.q)
    error = pose_error(robot.fk(viewer.q), ik_layer.model.lie.pose_to_matrix(target)).abs()
    assert float(error[:3].max()) < 1e-4 and float(error[3:].max()) < 1e-3
    drawn = viewer.ee_pose()  # the end effector as placed in the scene
    torch.testing.assert_close(drawn[:3], target[:3], rtol=0, atol=1e-4)
    assert float(torch.dot(drawn[3:], target[3:]).abs()) > 1 - 1e-6  # same rotation (q and -q)
    assert [s.value for s in viewer._sliders] == viewer.q.tolist()
    assert "Target reached" in viewer._status.content


def test_small_drag_moves_the_arm_a_little_warm_started(viewer: Viewer) -> None:
    robot = viewer.robot
    start = matrix_to_pose(robot.fk(robot.random_q(generator=torch.Generator().manual_seed(1))))
    before = drag_gizmo_to(viewer, start).q
    nudged = start.clone()
    nudged[:3] += torch.tensor([0.005, -0.003, 0.004], dtype=torch.float64)
    after = drag_gizmo_to(viewer, nudged)
    assert bool(after.success)
    assert float((after.q - before).abs().max()) < 0.1  # stays on the same branch: a small motion for a small drag


def test_sliders_show_forward_kinematics_and_bring_the_target(viewer: Viewer) -> None:
    q = torch.tensor([0.3, -1.2, 1.4, -1.8, -1.57, 0.2], dtype=torch.float64)
    for slider, value in zip(viewer._sliders, q.tolist(), strict=True):
        slider.value = value  # as a slider moved in the page: its callback shows FK of all the sliders
    assert torch.equal(viewer.q, q)
    pose = matrix_to_pose(viewer.robot.fk(q))
    torch.testing.assert_close(viewer.ee_pose()[:3], pose[:3], rtol=0, atol=1e-12)
    np.testing.assert_allclose(viewer.gizmo.position, pose[:3].numpy(), atol=1e-12)
    assert "forward kinematics" in viewer._status.content


URDF = """<?xml version="1.0"?>
<robot name="twolink">
  <material name="red"><color rgba="1 0 0 1"/></material>
  <link name="base">
    <visual><geometry><box size="0.2 0.2 0.1"/></geometry><material name="red"/></visual>
  </link>
  <link name="arm">
    <visual>
      <origin xyz="0.25 0 0" rpy="0 1.5707963267948966 0"/>
      <geometry><cylinder radius="0.03" length="0.5"/></geometry>
    </visual>
    <visual>
      <geometry><mesh filename="package://demo_description/meshes/blob.stl" scale="0.5 0.5 0.5"/></geometry>
    </visual>
  </link>
  <link name="tip">
    <visual><geometry><sphere radius="0.04"/></geometry></visual>
    <visual><geometry><mesh filename="meshes/missing.stl"/></geometry></visual>
  </link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="arm"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="arm"/><child link="tip"/><origin xyz="0.5 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/>
  </joint>
</robot>
"""


@pytest.fixture
def urdf_with_visuals(tmp_path: Path) -> Path:
    package = tmp_path / "demo_description"
    (package / "meshes").mkdir(parents=True)
    trimesh.creation.box(extents=(0.2, 0.4, 0.6)).export(package / "meshes" / "blob.stl")
    (package / "urdf").mkdir()
    path = package / "urdf" / "twolink.urdf"
    path.write_text(URDF)
    return path


def test_urdf_visuals_are_loaded_and_missing_meshes_reported(urdf_with_visuals: Path) -> None:
    visuals, problems = load_visuals(urdf_with_visuals)
    assert [v.link for v in visuals] == ["base", "arm", "arm", "tip"]
    box, cylinder, blob, sphere = visuals
    np.testing.assert_allclose(box.mesh.extents, [0.2, 0.2, 0.1], atol=1e-12)
    assert box.color == (255, 0, 0) and cylinder.color is None
    np.testing.assert_allclose(cylinder.origin[:3, 3], [0.25, 0, 0])
    np.testing.assert_allclose(cylinder.origin[:3, 2], [1, 0, 0], atol=1e-12)  # rpy: the cylinder's z along x
    np.testing.assert_allclose(blob.mesh.extents, [0.1, 0.2, 0.3], atol=1e-9)  # package:// found, scale applied
    assert sphere.mesh.extents[0] == pytest.approx(0.08, rel=1e-2)
    assert len(problems) == 1 and "missing.stl" in problems[0] and "'tip'" in problems[0]


def test_viewer_draws_meshes_of_a_urdf_path(urdf_with_visuals: Path) -> None:
    with Viewer(urdf_with_visuals, port=free_port()) as viewer:
        assert viewer.robot.dof == 2 and viewer.meshes_drawn == 4 and len(viewer.problems) == 1
        assert not any(h.visible for h in viewer._capsules)  # meshes drawn: capsules hidden
        target = matrix_to_pose(viewer.robot.fk(torch.tensor([0.4, -0.7], dtype=torch.float64)))
        result = viewer.set_target(target)
        assert bool(result.success)
        torch.testing.assert_close(viewer.ee_pose()[:3], target[:3], rtol=0, atol=1e-4)


def forward_lines(stream: Iterable[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def test_cli_view_serves_until_ctrl_c() -> None:
    """Ctrl-C once the viewer says it is ready (it serves its page before its first solve is done): exit 0."""
    port = free_port()
    command = [sys.executable, "-m", "ik_layer", "view", "planar3", "--port", str(port)]
    env = dict(os.environ, PYTHONFAULTHANDLER="1")  # SIGABRT then prints every thread's stack (see below)
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Ctrl-C as at a terminal: a test run started in the background (`cmd &` in a script) ignores SIGINT, and its
        # children would inherit that (the viewer then sleeps through the signal).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=forward_lines, args=(process.stdout, lines), daemon=True).start()
    seen = []
    try:
        deadline = time.monotonic() + 120
        while not any("(Ctrl-C to stop)" in line for line in seen):
            assert process.poll() is None and time.monotonic() < deadline, "the viewer did not start: " + "".join(seen)
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
        page = httpx.get(f"http://127.0.0.1:{port}", timeout=10)
        assert page.status_code == 200 and "<html" in page.text.lower()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a hang: fail with the stacks of the viewer's threads
            process.send_signal(signal.SIGABRT)
            process.wait(timeout=30)
            time.sleep(1)  # the reader thread drains the pipe
    while not lines.empty():
        seen.append(lines.get())
    output = "".join(seen)
    assert process.returncode == 0, output
    assert f"planar3 at http://127.0.0.1:{port}" in output


def test_viewer_refuses_robots_it_cannot_drive(tiny_urdf: Path) -> None:
    several = ik_layer.load_robot(tiny_urdf, ee_frames=["tool", "side_tip"])
    with pytest.raises(ik_layer.IKLayerError, match=r"one end-effector frame on a fixed base.*\['tool', 'side_tip'\]"):
        Viewer(several, port=free_port())
    floating = ik_layer.load_robot(tiny_urdf, "tool", floating_base=True)
    with pytest.raises(ik_layer.IKLayerError, match="has a floating base"):
        Viewer(floating, port=free_port())


def test_dragging_an_obstacle_re_solves_around_it() -> None:
    robot = ik_layer.load_robot("panda")
    ball = ik_layer.Sphere([0.8, 0.6, 0.9], 0.08)  # out of the way at first
    box = ik_layer.Box([2.0, 0.0, 0.0, 0, 0, 0, 1], [0.1, 0.2, 0.3])
    with Viewer(robot, port=free_port(), obstacles=[ball, box]) as shown:
        assert len(shown.spheres_drawn) == len(robot.collision_spheres) and len(shown.obstacle_gizmos) == 2
        q0 = robot.random_q(generator=torch.Generator().manual_seed(3))
        shown.set_q(q0)
        target = shown.ee_pose()
        first = drag_gizmo_to(shown, target)
        assert bool(first.success) and first.min_distance is not None
        # the ball onto the elbow's spheres: the arm must move away from it and still reach the target
        elbow = robot.collision.centres(robot, shown.q, jacobian=False)[0][robot.collision.link_index == 4].mean(0)
        moved = shown.move_obstacle(0, [*elbow.tolist(), 0.0, 0.0, 0.0, 1.0])
        assert torch.allclose(shown.obstacles[0].center, elbow)
        cost = CollisionCost.of(robot, shown.obstacles, shown.options)
        assert cost is not None and moved.min_distance is not None
        torch.testing.assert_close(moved.min_distance, cost.min_distance(robot, moved.q), atol=1e-12, rtol=0)
        assert float(cost.min_distance(robot, first.q)) < 0  # where the arm was, it now collides
        assert bool(moved.success) and float(moved.min_distance) >= 0.0  # moved around it, the target still reached
        assert torch.equal(shown.q, moved.q)
        error = pose_error(robot.fk(moved.q), ik_layer.model.lie.pose_to_matrix(target)).abs()
        assert float(error[:3].max()) < 1e-4 and float(error[3:].max()) < 1e-3
        with pytest.raises(ik_layer.IKLayerError, match="obstacle 5 does not exist"):
            shown.move_obstacle(5, [0, 0, 0, 0, 0, 0, 1])


def test_obstacles_need_collision_spheres() -> None:
    with pytest.raises(ik_layer.IKLayerError, match="no collision spheres"):
        Viewer("planar3", port=free_port(), obstacles=[ik_layer.Sphere([0, 0, 0], 0.1)])
