"""Active and locked joints on example-robot-data trees: one arm of a humanoid or a dual-arm robot.

FK and Jacobians against Pinocchio on the full model are in test_kinematics.py (its ``erd-*-locked`` cases);
here: the solver on the reduced problem, locked joints held, and the arguments' errors.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, JointNotFound, UnsupportedModelError
from ik_layer.model.joints import select_joints

TALOS = "talos_data/robots/talos_reduced.urdf"
TORSO = {"torso_1_joint": 0.3, "torso_2_joint": -0.2}
TALOS_LEFT_ARM = [f"arm_left_{i}_joint" for i in range(1, 8)]


@pytest.fixture(scope="module")
def talos_arm(erd_urdf) -> ik_layer.Robot:
    return ik_layer.load_robot(erd_urdf(TALOS), "arm_left_7_link", locked=TORSO)


def full_q_of(robot: ik_layer.Robot, names: list[str], q_full: torch.Tensor) -> torch.Tensor:
    """Entries of the full Pinocchio configurations ``q_full`` of the one-dof, one-q joints ``names``."""
    idx = [robot.full_model.joints[robot.full_model.getJointId(n)].idx_q for n in names]
    return q_full[..., idx]


def test_one_arm_with_the_torso_locked(talos_arm):
    robot = talos_arm
    assert robot.joint_names == TALOS_LEFT_ARM and robot.dof == 7 and robot.full_model.nv == 32
    q_full = robot.to_full_pinocchio_q(robot.random_q((5,), generator=torch.Generator().manual_seed(0)))
    held = full_q_of(robot, list(TORSO), q_full)
    torch.testing.assert_close(held, torch.tensor([[0.3, -0.2]] * 5, dtype=torch.float64), atol=0, rtol=0)


def test_one_arm_solves_and_locked_joints_stay(talos_arm, rng):
    robot = talos_arm
    q = robot.random_q((300,), generator=rng)
    result = ik_layer.solve(robot, robot.fk(q), generator=torch.Generator().manual_seed(3))
    assert result.success.double().mean() >= 0.99
    q_full = robot.to_full_pinocchio_q(result.q)
    torch.testing.assert_close(full_q_of(robot, list(TORSO), q_full), torch.tensor([[0.3, -0.2]] * 300).double())
    # Everything off the arm is at its reference: the answers differ only on the arm's joints.
    others = [n for n in robot.full_model.names[1:] if n not in TALOS_LEFT_ARM]
    assert (full_q_of(robot, others, q_full) == full_q_of(robot, others, q_full[:1])).all()


def test_torso_and_arm_active(erd_urdf, rng, pin_reference):
    robot = ik_layer.load_robot(erd_urdf(TALOS), "arm_left_7_link", active_joints=["torso_2_joint", *TALOS_LEFT_ARM])
    assert robot.joint_names == ["torso_2_joint", *TALOS_LEFT_ARM]
    q = robot.random_q((200,), generator=rng)
    pose, jac = pin_reference(robot, q)
    got_pose, got_jac = robot.fk_jacobian(q)
    np.testing.assert_allclose(got_pose.numpy(), pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(got_jac.numpy(), jac, atol=1e-10, rtol=0)
    result = ik_layer.solve(robot, robot.fk(q), generator=torch.Generator().manual_seed(4))
    assert result.success.double().mean() >= 0.99


def test_dual_arm_default_is_one_arm(erd_urdf):
    robot = ik_layer.load_robot(erd_urdf("tiago_description/robots/tiago_dual.urdf"), "arm_right_tool_link")
    assert robot.full_model.nv == 101
    assert robot.joint_names == ["torso_lift_joint", *(f"arm_right_{i}_joint" for i in range(1, 8))]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({"locked": {"no_such_joint": 0.0}}, JointNotFound, "locked: unknown joint", id="locked-name"),
        pytest.param({"active_joints": ["nope"]}, JointNotFound, "active_joints: unknown joint", id="active-name"),
        pytest.param({"locked": {"j1": float("nan")}}, IKLayerError, r"locked\['j1'\] must be a finite", id="nan"),
        pytest.param({"locked": {"j1": "0.1"}}, IKLayerError, "finite number", id="string-value"),
        pytest.param({"locked": [("j1", 0.1)]}, IKLayerError, "locked must be a mapping", id="not-a-mapping"),
        pytest.param({"active_joints": "j1"}, IKLayerError, "sequence of joint names", id="lone-string"),
        pytest.param({"active_joints": ["j1"], "locked": {"j1": 0.0}}, IKLayerError, "both", id="both"),
        pytest.param({"locked": {"j1": 0.0, "j2": 0.0}}, UnsupportedModelError, "no joint moves", id="all-locked"),
        pytest.param({"active_joints": ["j_side"]}, UnsupportedModelError, "no joint moves", id="active-off-chain"),
    ],
)
def test_bad_joint_arguments(tiny_urdf, write_urdf, kwargs, error, match):
    two = (
        '<robot name="two"><link name="a"/><link name="b"/><link name="c"/><link name="s"/>'
        + "".join(
            f'<joint name="{n}" type="revolute"><parent link="{p}"/><child link="{c}"/><axis xyz="0 0 1"/>'
            '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
            for n, p, c in (("j1", "a", "b"), ("j2", "b", "c"), ("j_side", "a", "s"))
        )
        + "</robot>"
    )
    with pytest.raises(error, match=match):
        ik_layer.load_robot(two, "c", **kwargs)


def test_locked_continuous_joint_holds_cos_and_sin(tiny_urdf):
    robot = ik_layer.load_robot(tiny_urdf, "tool", locked={"j_cont": 2.0})
    assert "j_cont" not in robot.joint_names
    q_full = robot.to_full_pinocchio_q(torch.zeros(robot.dof, dtype=torch.float64))
    idx = robot.full_model.joints[robot.full_model.getJointId("j_cont")].idx_q
    torch.testing.assert_close(q_full[idx : idx + 2], torch.tensor([np.cos(2.0), np.sin(2.0)], dtype=torch.float64))


def test_frames_fixed_to_a_floating_base(tiny_urdf):
    """With a floating base, a frame with no joint above it (the base link) is an end-effector; the free-flyer
    moves it. A fixed base still refuses it, and so does a floating base with no moving joint at all."""
    model = pin.buildModelFromUrdf(str(tiny_urdf))
    tool_chain = ["j_cont", "j_off", "j_prism", "j_neg", "j_cont_off"]
    with pytest.raises(UnsupportedModelError, match="no joint moves between the base and 'base'; frames with"):
        select_joints(model, ["base", "tool"])
    selection = select_joints(model, ["base", "tool"], floating_base=True)
    assert list(selection.model.names[1:]) == tool_chain and selection.ee_frames == ("base", "tool")
    with pytest.raises(UnsupportedModelError, match=r"no joint of 'tiny' moves: end-effector frames \['base'\]"):
        select_joints(model, ["base"], floating_base=True)
    locked = dict.fromkeys([*tool_chain, "j_side"], 0.0)
    with pytest.raises(UnsupportedModelError, match="no joint of 'tiny' moves"):
        select_joints(model, ["tool"], locked=locked, floating_base=True)


def test_frame_rigid_on_a_floating_base_follows_the_base(tiny_urdf, rng):
    """Every joint above ``tool`` locked: the floating base carries it rigidly, as Pinocchio places it."""
    locked = {"j_cont": 0.4, "j_off": -0.3, "j_prism": 0.1, "j_neg": 0.2, "j_cont_off": 1.0}
    robot = ik_layer.load_robot(
        tiny_urdf, ee_frames=["tool"], active_joints=["j_side"], locked=locked, floating_base=True
    )
    assert robot.joint_names == ["j_side"] and (robot.nq, robot.dof) == (8, 7)
    q = robot.random_q((5,), generator=rng)
    q[:, :3] = torch.randn(5, 3, generator=rng, dtype=q.dtype)
    q[:, 3:7] = torch.nn.functional.normalize(torch.randn(5, 4, generator=rng, dtype=q.dtype), dim=-1)
    pose, jac = robot.fk_jacobian(q)
    full, data = robot.full_model, robot.full_model.createData()
    tool, cols = full.getFrameId("tool"), [*range(6), full.joints[full.getJointId("j_side")].idx_v]
    for i, q_full in enumerate(robot.to_full_pinocchio_q(q).numpy()):
        pin.framesForwardKinematics(full, data, q_full)
        np.testing.assert_allclose(pose[i, 0].numpy(), data.oMf[tool].homogeneous, atol=1e-12, rtol=0)
        ref = pin.computeFrameJacobian(full, data, q_full, tool, pin.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(jac[i, 0].numpy(), ref[:, cols], atol=1e-12, rtol=0)  # base twist, j_side (zero)
