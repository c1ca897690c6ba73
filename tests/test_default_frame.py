"""The default end-effector frame (:mod:`ik_layer.model.default_frame`): on every example-robot-data robot that loads,
on small models that isolate each rule, and the log line that names it."""

from __future__ import annotations

import itertools
import logging
import re

import pinocchio as pin
import pytest

import ik_layer
from ik_layer.model.joints import frame_id
from ik_layer.robots import REGISTRY
from ik_layer.testing import example_robot_data_dir

# (URDF in example-robot-data's robots/, default frame, dof). Arms end at their flange or tool frame, never a
# finger; quadrupeds at a foot (the last leg of the file: legs tie); humanoids at the hand of their longest arm.
ERD_DEFAULTS = [
    ("a1_description/urdf/a1.urdf", "RR_foot", 3),
    # Alex: the seventh arm joint is named RightGripperYaw (a yaw, not a gripper); the hand below it branches into
    # fingers (psyonic, sake) shorter than the arm, so the frame is the hand's base, with all seven arm joints.
    ("alex_description/urdf/alex_nub_hands.urdf", "rightNub", 10),
    ("alex_description/urdf/alex_psyonic_hands.urdf", "RightPsyonicAbilityBaseLink", 10),
    ("alex_description/urdf/alex_sake_hands.urdf", "RightSakePalmLink", 10),
    ("alexander_description/urdf/alexander_v1.lowerBodyOnly.urdf", "RIGHT_FOOT", 6),  # not the foot's IMU
    # A hand on its own: fingers are all that moves, so a fingertip it is (the last finger of the file).
    ("allegro_hand_description/urdf/allegro_left_hand.urdf", "link_11.0_tip", 4),
    ("allegro_hand_description/urdf/allegro_right_hand.urdf", "link_11.0_tip", 4),
    # Kinova's fingers are fixed frames beside its end_effector site on the sixth joint: the site wins by name.
    ("anymal_b_simple_description/robots/anymal-kinova.urdf", "j2s6s200_end_effector", 6),
    ("anymal_b_simple_description/robots/anymal.urdf", "RH_FOOT", 3),
    ("anymal_c_simple_description/urdf/anymal.urdf", "RH_FOOT", 3),
    ("asr_twodof_description/urdf/TwoDofs.urdf", "Tip", 2),
    # Z1: jointGripper moves the gripper's jaw; the frame is the gripper's fixed half on the sixth joint.
    ("b1_description/urdf/b1-z1.urdf", "gripperStator", 6),
    ("b1_description/urdf/b1.urdf", "RR_foot", 3),
    # Baxter: the mimic fingers are left out; right_hand is the flange (its camera and range frames are sensors).
    ("baxter_description/urdf/baxter.urdf", "right_hand_link", 7),
    ("bolt_description/robots/bolt.urdf", "FR_FOOT", 3),
    ("borinot_description/urdf/borinot_flying_arm_2.urdf", "flying_arm_2__ee", 2),
    ("centauro_description/urdf/centauro.urdf", "ball2_tip", 7),  # torso yaw + six arm joints; legs have six
    ("double_pendulum_description/urdf/double_pendulum.urdf", "link2", 2),
    ("double_pendulum_description/urdf/double_pendulum_continuous.urdf", "link2", 2),
    ("double_pendulum_description/urdf/double_pendulum_simple.urdf", "link3", 2),
    ("finger_edu_description/robots/finger_edu.urdf", "finger_tip_link", 3),  # a one-finger robot: its tip
    ("g1_description/urdf/g1_29dof_rev_1_0.urdf", "right_rubber_hand", 10),  # waist (3) + arm (7)
    ("g1_description/urdf/g1_29dof_with_hand_rev_1_0.urdf", "right_hand_palm_link", 10),  # not a thumb link
    ("go1_description/urdf/go1.urdf", "RR_foot", 3),
    ("go2_description/urdf/go2.urdf", "RR_foot", 3),
    ("hextilt_description/urdf/hextilt_flying_arm_5.urdf", "flying_arm_5__gripper", 5),
    ("human_description/robots/human.urdf", "right_hand", 13),
    ("hyq_description/robots/hyq_no_sensors.urdf", "rh_foot", 3),
    ("icub_description/robots/icub.urdf", "r_hand_dh_frame", 10),
    ("icub_description/robots/icub_reduced.urdf", "r_hand_dh_frame", 10),
    ("iris_description/robots/iris.urdf", "iris__rotor_3", 1),  # a drone: only its rotors turn
    ("kinova_description/robots/kinova.urdf", "j2s6s200_end_effector", 6),
    ("laikago_description/urdf/laikago.urdf", "RR_foot", 3),
    # Panda: the hand's tool centre point, the seven arm joints; the fingers (a mimic pair) are left out.
    ("panda_description/urdf/panda.urdf", "panda_hand_tcp", 7),
    ("panda_description/urdf/panda_collision.urdf", "panda_hand_tcp", 7),
    ("pr2_description/urdf/pr2.urdf", "r_gripper_tool_frame", 8),  # torso lift + arm, PR2's own tool frame
    ("quadruped_description/urdf/quadruped.urdf", "FR_contact", 2),
    ("romeo_description/urdf/romeo.urdf", "r_wrist", 8),  # not RFinger11Link: the hand's fingers are left out
    ("romeo_description/urdf/romeo_laas_small.urdf", "RArm_effector", 8),
    ("romeo_description/urdf/romeo_small.urdf", "r_wrist", 8),  # not r_gripper, below the gripper joint
    ("simple_humanoid_description/urdf/simple_humanoid.urdf", "r_wrist", 10),
    ("simple_humanoid_description/urdf/simple_humanoid_classical.urdf", "r_wrist", 10),
    # SO-100/101: the sixth joint (named gripper) only opens the jaw; five arm joints to the gripper body.
    ("so_arm_description/urdf/so100.urdf", "gripper", 5),
    ("so_arm_description/urdf/so101.urdf", "gripper_frame_link", 5),
    ("solo_description/robots/solo.urdf", "HR_FOOT", 2),
    ("solo_description/robots/solo12.urdf", "HR_FOOT", 3),
    # Talos: the flange after the wrist's force-torque sensor, where the gripper attaches: torso (2) + arm (7),
    # without the gripper joint (it leads the gripper's mimic joints).
    ("talos_data/robots/talos_full_v2.urdf", "wrist_right_ft_tool_link", 9),
    ("talos_data/robots/talos_full_v2_box.urdf", "wrist_right_ft_tool_link", 9),
    ("talos_data/robots/talos_left_arm.urdf", "wrist_left_ft_tool_link", 6),
    ("talos_data/robots/talos_reduced.urdf", "wrist_right_ft_tool_link", 9),
    ("talos_data/robots/talos_reduced_box.urdf", "wrist_right_ft_tool_link", 9),
    ("talos_data/robots/talos_reduced_corrected.urdf", "wrist_right_ft_tool_link", 9),
    # TIAGo: torso lift + seven arm joints. Its hand's fingers (seven joints each, without mimic) branch off the
    # wrist and are shorter than the eight joints above it; of the tool frames fixed there the hand's is last.
    ("tiago_description/robots/tiago.urdf", "hand_tool_link", 8),
    ("tiago_description/robots/tiago_dual.urdf", "hand_right_tool_link", 8),
    ("tiago_description/robots/tiago_no_hand.urdf", "wrist_ft_tool_link", 8),
    ("tiago_pro_description/robots/tiago_pro.urdf", "arm_right_tool_link", 8),
    ("ur_description/urdf/ur10_joint_limited_robot.urdf", "tool0", 6),
    ("ur_description/urdf/ur10_robot.urdf", "tool0", 6),
    ("ur_description/urdf/ur3_gripper.urdf", "tool0", 6),
    ("ur_description/urdf/ur3_joint_limited_robot.urdf", "tool0", 6),
    ("ur_description/urdf/ur3_robot.urdf", "tool0", 6),
    ("ur_description/urdf/ur5_gripper.urdf", "tool0", 6),
    ("ur_description/urdf/ur5_joint_limited_robot.urdf", "tool0", 6),
    ("ur_description/urdf/ur5_robot.urdf", "tool0", 6),
    ("xarm_description/urdf/xarm7.urdf", "link_eef", 7),
    ("z1_description/urdf/z1.urdf", "gripperStator", 6),
]

# example-robot-data's URDFs that do not load, and why.
ERD_REFUSED = {
    "hector_description/robots/quadrotor_base.urdf": "no frame of 'hector' has a joint the robot can move",
    "iris_description/robots/iris_simple.urdf": "no frame of 'iris' has a joint the robot can move",
    "ur_description/urdf/ur3.urdf": "could not parse URDF",  # a xacro left unexpanded
}


@pytest.mark.filterwarnings("ignore:joints .* have equal lower and upper limits")  # the double pendulums
@pytest.mark.parametrize(("relative", "frame", "dof"), ERD_DEFAULTS, ids=[r for r, _, _ in ERD_DEFAULTS])
def test_default_frame_of_example_robot_data(erd_urdf, relative, frame, dof):
    robot = ik_layer.load_robot(erd_urdf(relative))
    assert (robot.ee_frame, robot.dof) == (frame, dof)


@pytest.mark.filterwarnings("ignore:joints .* have equal lower and upper limits")
@pytest.mark.parametrize(("relative", "frame", "dof"), ERD_DEFAULTS, ids=[r for r, _, _ in ERD_DEFAULTS])
def test_a_base_frame_on_the_chain_keeps_the_default_frame(erd_urdf, relative, frame, dof):
    """From the link its first joint moves (the link it hangs from, for a one-joint chain), the same frame, that
    joint locked: TIAGo from ``torso_lift_link`` keeps ``hand_tool_link``, not a fingertip 14 joints deep."""
    whole = ik_layer.load_robot(erd_urdf(relative), collision=None)
    model = whole.full_model
    chain = model.supports[model.frames[frame_id(model, frame)].parentJoint]
    first = next(j for j in chain if model.names[j] in whole.joint_names)
    hangs = first if dof > 1 else model.parents[first]
    base = next(f.name for f in model.frames if f.parentJoint == hangs and f.type == pin.FrameType.BODY)
    robot = ik_layer.load_robot(erd_urdf(relative), base_frame=base, collision=None)
    locked = [model.names[first]] if dof > 1 else []
    assert robot.ee_frame == frame
    assert robot.joint_names == [n for n in whole.joint_names if n not in locked]


@pytest.mark.parametrize(("relative", "reason"), ERD_REFUSED.items(), ids=list(ERD_REFUSED))
def test_example_robot_data_refused(erd_urdf, relative, reason):
    with pytest.raises(ik_layer.UnsupportedModelError, match=re.escape(reason)):
        ik_layer.load_robot(erd_urdf(relative))


def test_the_table_lists_every_example_robot_data_urdf():
    root = example_robot_data_dir()
    if root is None:
        pytest.skip("example-robot-data is not installed (pip install example-robot-data)")
    listed = {r for r, _, _ in ERD_DEFAULTS} | set(ERD_REFUSED)
    unlisted = sorted(str(p.relative_to(root)) for p in root.rglob("*.urdf") if str(p.relative_to(root)) not in listed)
    assert not unlisted, f"add these URDFs of example-robot-data at {root} to ERD_DEFAULTS or ERD_REFUSED"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_built_in_robots_keep_their_frame(name):
    assert ik_layer.load_robot(name).ee_frame == REGISTRY[name].ee_frame


# --------------------------------------------------------------------------- each rule on a small model

LIMIT = '<limit lower="-2" upper="2" effort="1" velocity="1"/>'


def chain(*links: str, kind: str = "revolute", joint: str = "{child}_joint", extra: str = "") -> str:
    """Joints linking ``links`` one after the other (the first is the parent of the second...)."""
    axis = "" if kind == "fixed" else f'<axis xyz="0 1 0"/>{LIMIT}{extra}'
    return "".join(
        f'<joint name="{joint.format(child=child)}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="0 0 0.2"/>{axis}</joint>'
        for parent, child in itertools.pairwise(links)
    )


def urdf(*joints: str) -> str:
    links = dict.fromkeys(re.findall(r'link="([\w.]+)"', "".join(joints)))
    return f'<robot name="r">{"".join(f"<link name={n!r}/>" for n in links)}{"".join(joints)}</robot>'


ARM = chain("base", "l1", "l2", "l3")


def test_fingers_that_branch_off_a_wrist_are_left_out():
    """Three fingers of two joints below a three-joint arm: the wrist, not a fingertip (five joints deep)."""
    fingers = [chain("l3", f"{f}1", f"{f}2") for f in "abc"]
    robot = ik_layer.load_robot(urdf(ARM, *fingers))
    assert (robot.ee_frame, robot.joint_names) == ("l3", ["l1_joint", "l2_joint", "l3_joint"])


def test_a_torso_carrying_longer_arms_is_not_a_hand():
    """A one-joint torso with two three-joint arms: the end of an arm (the last of the file)."""
    arms = [chain("torso", f"{side}1", f"{side}2", f"{side}3") for side in ("left", "right")]
    robot = ik_layer.load_robot(urdf(chain("base", "torso"), *arms))
    assert robot.ee_frame == "right3" and robot.dof == 4


def test_a_gripper_joint_is_left_out_by_its_name_and_a_wrist_named_after_the_gripper_is_not():
    jaw = chain("l3", "jaw_link", joint="jointGripper")
    assert ik_layer.load_robot(urdf(ARM, jaw)).ee_frame == "l3"
    wrist = chain("l3", "l4", joint="RightGripperYaw")
    assert ik_layer.load_robot(urdf(ARM, wrist)).ee_frame == "l4"


def test_the_leader_of_a_mimic_joint_is_a_gripper_drive():
    left = chain("l3", "left_pad", joint="g1")
    right = chain("l3", "right_pad", joint="g2", extra='<mimic joint="g1"/>')
    robot = ik_layer.load_robot(urdf(ARM, left, right))
    assert robot.ee_frame == "l3" and robot.dof == 3


@pytest.mark.parametrize(
    ("fixed", "expected"),
    [
        (["flange", "camera_link", "tool0"], "tool0"),  # tool over flange; a camera never
        (["tcp", "tool0"], "tcp"),
        (["l3_imu", "l3_ft_sensor"], "l3"),  # sensors after any other name
        (["a", "b"], "b"),  # no name to go by: the last frame
    ],
)
def test_names_decide_among_the_frames_fixed_at_the_end(fixed, expected):
    links = "".join(chain("l3", name, kind="fixed") for name in fixed)
    assert ik_layer.load_robot(urdf(ARM, links)).ee_frame == expected


def test_a_hand_alone_gets_a_fingertip():
    fingers = [chain("palm", f"{f}1", f"{f}_tip", joint="{child}_finger") for f in "ab"]
    assert ik_layer.load_robot(urdf(*fingers)).ee_frame == "b_tip"


# --------------------------------------------------------------------------- the log line


def test_the_default_frame_is_logged_with_the_moving_joints(caplog):
    with caplog.at_level(logging.INFO, logger="ik_layer"):
        ik_layer.load_robot(urdf(ARM, chain("l3", "tool0", kind="fixed")))
    lines = [r.getMessage() for r in caplog.records if r.name == "ik_layer"]
    assert lines == ["r: no ee_frame given, using 'tool0' (see ik_layer.model.default_frame); moving joints: "
                     "l1_joint, l2_joint, l3_joint"]  # fmt: skip


@pytest.mark.parametrize("kwargs", [{"name_or_path": "ur5e"}, {"name_or_path": urdf(ARM), "ee_frame": "l2"}])
def test_no_log_line_when_the_frame_is_not_a_default(caplog, kwargs):
    with caplog.at_level(logging.INFO, logger="ik_layer"):
        ik_layer.load_robot(**kwargs)
    assert not [r for r in caplog.records if r.name == "ik_layer"]
