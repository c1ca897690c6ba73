"""Model sources (URDF text, MJCF, xacro, sloppy files), the parser's reasons, and the default end-effector frame."""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, UnsupportedModelError
from ik_layer.robots import REGISTRY

LIMIT = '<limit lower="-2" upper="2" effort="1" velocity="1"/>'


def joint(name: str, parent: str, child: str, kind: str = "revolute", xyz: str = "0 0 0.3", extra: str = LIMIT) -> str:
    axis = "" if kind == "fixed" else '<axis xyz="0 1 0"/>'
    return (
        f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}"/>{axis}{extra if kind != "fixed" else ""}</joint>'
    )


def urdf(*joints: str) -> str:
    """A URDF of ``joints`` and the links they name."""
    links = dict.fromkeys(re.findall(r'link="(\w+)"', "".join(joints)))
    return f'<robot name="r">{"".join(f"<link name={n!r}/>" for n in links)}{"".join(joints)}</robot>'


# A two-joint arm, then a sensor link on the base, last in the file (today's default frame before issue 14).
ARM_WITH_IMU = urdf(joint("j1", "base", "a"), joint("j2", "a", "b"), joint("imu", "base", "imu_link", "fixed"))


def test_urdf_text_loads_like_the_file(write_urdf, rng):
    planar = REGISTRY["planar3"].urdf.read_text()
    from_text, from_file = ik_layer.load_robot(planar), ik_layer.load_robot(write_urdf(planar))
    q = from_file.random_q((50,), generator=rng)
    torch.testing.assert_close(from_text.fk_jacobian(q), from_file.fk_jacobian(q), atol=0, rtol=0)
    assert from_text.name == from_file.name == "planar3"


def test_meshes_and_package_paths_are_never_read(pin_reference, rng):
    mesh = '<visual><geometry><mesh filename="package://no_such_package/meshes/arm.stl"/></geometry></visual>'
    text = ARM_WITH_IMU.replace('<link name="a"/>', f'<link name="a">{mesh}</link>')
    robot = ik_layer.load_robot(text)
    q = robot.random_q((20,), generator=rng)
    pose, _ = pin_reference(robot, q)
    np.testing.assert_allclose(robot.fk(q).numpy(), pose, atol=1e-10, rtol=0)


def test_blank_line_before_the_xml_declaration(write_urdf):
    with_mimic = urdf(joint("j1", "base", "a"), joint("j2", "a", "b", extra=LIMIT + '<mimic joint="j1"/>'))
    leftover = "<gazebo><xacro:unexpanded value='1'/></gazebo>"  # an undeclared namespace prefix
    text = "\n\n" + '<?xml version="1.0"?>\n' + with_mimic.replace("</robot>", leftover + "</robot>")
    path = write_urdf(text)
    assert ik_layer.load_robot(path, "a").joint_names == ["j1"]
    robot = ik_layer.load_robot(path, "b")  # the mimic scan still reads this file
    assert robot.joint_names == ["j1"] and list(robot.mimic) == ["j2"]


def test_missing_limit_gives_the_parsers_reason(write_urdf):
    path = write_urdf(urdf(joint("j1", "base", "a", extra="")))
    with pytest.raises(UnsupportedModelError, match="could not parse") as info:
        ik_layer.load_robot(path)
    assert "j1" in str(info.value) and "does not specify limits" in str(info.value)


def test_limit_without_bounds_is_unbounded_not_frozen():
    bare = '<limit effort="1" velocity="1"/>'
    robot = ik_layer.load_robot(
        urdf(joint("j1", "base", "a", extra=bare), joint("j2", "a", "b", "prismatic", extra=bare))
    )
    assert robot.continuous.tolist() == [True, False]
    assert robot.lower.tolist() == [-np.pi, -ik_layer.model.limits.PRISMATIC_HALF_RANGE]
    assert robot.upper.tolist() == [np.pi, ik_layer.model.limits.PRISMATIC_HALF_RANGE]


MJCF = """<mujoco model="mj_arm"><compiler angle="radian"/><worldbody>
  <body name="b1" pos="0 0 0.1"><joint name="j1" type="hinge" axis="0 0 1" range="-1.5 1.5" limited="true"/>
    <geom type="capsule" size="0.02" fromto="0 0 0 0.3 0 0"/>
    <body name="b2" pos="0.3 0 0"><joint name="j2" type="slide" axis="1 0 0" range="-0.1 0.2" limited="true"/>
      <geom type="sphere" size="0.02"/>
      <body name="b3" pos="0.2 0 0"><joint name="j3" type="hinge" axis="0 1 0"/>
        <geom type="sphere" size="0.02"/><site name="tool" pos="0 0 0.1"/></body></body></body>
</worldbody></mujoco>"""


@pytest.mark.parametrize("compiler", ['<compiler angle="degree"/>', ""], ids=["degree", "default"])
def test_mjcf_in_degrees_keeps_slide_ranges_in_metres(compiler):
    """MuJoCo's default angle unit is the degree: hinge ranges convert to radians, slide ranges stay metres
    (Pinocchio 4.1 converts both; the loader undoes it for slides)."""
    text = MJCF.replace('<compiler angle="radian"/>', compiler).replace('range="-1.5 1.5"', 'range="-90 45"')
    robot = ik_layer.load_robot(text)
    expected_lower = torch.tensor([-math.pi / 2, -0.1], dtype=torch.float64)
    expected_upper = torch.tensor([math.pi / 4, 0.2], dtype=torch.float64)
    torch.testing.assert_close(robot.lower[:2], expected_lower, rtol=0, atol=1e-12)
    torch.testing.assert_close(robot.upper[:2], expected_upper, rtol=0, atol=1e-12)


@pytest.mark.parametrize("as_file", [True, False], ids=["file", "text"])
def test_mjcf(write_urdf, pin_reference, rng, as_file):
    robot = ik_layer.load_robot(write_urdf(MJCF, "arm.xml") if as_file else MJCF)
    assert robot.name == "mj_arm" and robot.ee_frame == "tool"  # a site below the longest chain
    assert robot.joint_names == ["j1", "j2", "j3"] and robot.continuous.tolist() == [False, False, True]
    torch.testing.assert_close(robot.lower[:2], torch.tensor([-1.5, -0.1], dtype=torch.float64))
    q = robot.random_q((50,), generator=rng)
    pose, jac = pin_reference(robot, q)
    got_pose, got_jac = robot.fk_jacobian(q)
    np.testing.assert_allclose(got_pose.numpy(), pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(got_jac.numpy(), jac, atol=1e-10, rtol=0)
    # closed form at j1 = j3 = 0: the tool sits at x = 0.3 + 0.2 + j2, z = 0.1 + 0.1
    at = robot.fk(torch.tensor([0.0, 0.05, 0.0], dtype=torch.float64))
    torch.testing.assert_close(at[:3, 3], torch.tensor([0.55, 0.0, 0.2], dtype=torch.float64), atol=1e-12, rtol=0)


XACRO = """<?xml version="1.0"?>
<robot name="xa" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:property name="length" value="0.25"/>
  <xacro:macro name="link_joint" params="i parent">
    <link name="l${i}"/>
    <joint name="j${i}" type="revolute"><parent link="${parent}"/><child link="l${i}"/>
      <origin xyz="${length} 0 0"/><axis xyz="0 0 1"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  </xacro:macro>
  <link name="base"/>
  <xacro:link_joint i="1" parent="base"/>
  <xacro:link_joint i="2" parent="l1"/>
</robot>"""


def test_xacro(write_urdf):
    pytest.importorskip("xacro", reason="the xacro extra is not installed (pip install -e '.[xacro]')")
    robot = ik_layer.load_robot(write_urdf(XACRO, "arm.urdf.xacro"))
    assert robot.joint_names == ["j1", "j2"] and robot.ee_frame == "l2"
    q = torch.tensor([0.3, -0.5], dtype=torch.float64)
    x = 0.25 + 0.25 * np.cos(0.3) + 0.0 * q[1]
    expected = torch.tensor([x, 0.25 * np.sin(0.3), 0.0], dtype=torch.float64)
    torch.testing.assert_close(robot.fk(q)[:3, 3], expected, atol=1e-12, rtol=0)


def test_xacro_without_the_package_says_how_to_install(write_urdf, monkeypatch):
    monkeypatch.setitem(sys.modules, "xacro", None)
    with pytest.raises(IKLayerError, match=r"install the xacro package \(pip install xacro\)"):
        ik_layer.load_robot(write_urdf(XACRO, "arm.xacro"))


def test_broken_xacro_is_an_unsupported_model(write_urdf):
    pytest.importorskip("xacro", reason="the xacro extra is not installed (pip install -e '.[xacro]')")
    with pytest.raises(UnsupportedModelError, match="could not expand xacro"):
        ik_layer.load_robot(write_urdf(XACRO.replace("${length}", "${undefined_property}"), "arm.xacro"))


# --------------------------------------------------------------------------- default end-effector frame


def test_default_frame_skips_a_sensor_link_with_no_joint_above():
    robot = ik_layer.load_robot(ARM_WITH_IMU)
    assert robot.ee_frame == "b" and robot.joint_names == ["j1", "j2"]
    pose, jac = robot.fk_jacobian(torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(pose[:3, 3], torch.tensor([0.0, 0.0, 0.6], dtype=torch.float64))
    assert jac.shape == (6, 2)


def test_frame_with_no_moving_joint_is_refused_with_candidates():
    with pytest.raises(UnsupportedModelError, match="'imu_link'") as info:
        ik_layer.load_robot(ARM_WITH_IMU, "imu_link")
    assert "candidates" not in str(info.value)
    assert "frames with a moving joint above them: a, b" in str(info.value)


def test_model_without_moving_joints_is_refused():
    with pytest.raises(UnsupportedModelError, match="no frame of 'r'"):
        ik_layer.load_robot(urdf(joint("f", "base", "a", "fixed")))


def test_default_frame_is_the_end_of_the_longest_chain_and_ties_pick_the_last():
    long_short = urdf(joint("s1", "base", "d"), joint("j1", "base", "a"), joint("j2", "a", "b"), joint("j3", "b", "c"))
    assert ik_layer.load_robot(long_short).ee_frame == "c"
    tie = urdf(joint("l1", "base", "a"), joint("l2", "a", "b"), joint("r1", "base", "c"), joint("r2", "c", "d"))
    assert ik_layer.load_robot(tie).ee_frame == "d"
    # A fixed link after the last moving joint is the end of the chain.
    tool = urdf(joint("j1", "base", "a"), joint("j2", "a", "b"), joint("t", "b", "c", "fixed"))
    assert ik_layer.load_robot(tool).ee_frame == "c"


def test_default_frame_is_never_below_a_mimic_joint_or_its_leader():
    mimic = LIMIT + '<mimic joint="g1"/>'
    gripper = urdf(
        joint("j1", "base", "a"),
        joint("j2", "a", "b"),
        joint("g1", "b", "c", "prismatic"),
        joint("g2", "b", "d", "prismatic", extra=mimic),
    )
    robot = ik_layer.load_robot(gripper)  # g1 leads a mimic joint: a gripper, the arm ends above it
    assert robot.ee_frame == "b" and robot.joint_names == ["j1", "j2"]
    robot = ik_layer.load_robot(gripper, "c")  # named, the finger moves with its leader
    assert robot.ee_frame == "c" and robot.joint_names == ["j1", "j2", "g1"]
