"""Mimic joints (``q_m = multiplier * q_leader + offset``) inside a chain.

The oracle is Pinocchio's own mimic model (``buildModelFromXML(text, mimic=True)``: the mimic joint
has no coordinate and its motion is in its leader's Jacobian column), independent of our folding.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError
from ik_layer.model.joints import Mimic

LIMIT = '<limit lower="-1.5" upper="1.5" effort="1" velocity="1"/>'


def joint(name: str, parent: str, child: str, kind: str = "revolute", axis: str = "0 0 1", extra: str = "") -> str:
    return (
        f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="0.1 0.02 0.2" rpy="0.3 -0.2 0.1"/><axis xyz="{axis}"/>{LIMIT}{extra}</joint>'
    )


def mimic(leader: str, multiplier: float, offset: float) -> str:
    return f'<mimic joint="{leader}" multiplier="{multiplier}" offset="{offset}"/>'


# j2 and j6 follow j1 (revolute, inside the chain: their columns add up), j4 follows j3 (prismatic).
CHAIN = (
    '<robot name="coupled">'
    + "".join(f'<link name="{n}"/>' for n in ("base", "a", "b", "c", "d", "e", "tip"))
    + joint("j1", "base", "a")
    + joint("j2", "a", "b", axis="0 1 0", extra=mimic("j1", -2.0, 0.3))
    + joint("j3", "b", "c", "prismatic", axis="1 0 0")
    + joint("j4", "c", "d", "prismatic", axis="0 0 1", extra=mimic("j3", 0.5, 0.01))
    + joint("j6", "d", "e", axis="1 1 0", extra=mimic("j1", 1.5, -0.2))
    + joint("j7", "e", "tip", axis="0 1 1")
    + "</robot>"
)
# j2, on the chain to "b", follows j_side, off that chain.
SIDE = (
    '<robot name="side">'
    + "".join(f'<link name="{n}"/>' for n in ("base", "a", "b", "s"))
    + joint("j1", "base", "a")
    + joint("j2", "a", "b", extra=mimic("j_side", -0.5, 0.1))
    + joint("j_side", "base", "s", axis="1 0 0")
    + "</robot>"
)


def pinocchio_mimic_reference(text: str, robot: ik_layer.Robot, q: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Pose (B, 4, 4) and LOCAL_WORLD_ALIGNED Jacobian (B, 6, dof) of ``robot.ee_frame`` on Pinocchio's mimic model.

    Every joint of ``text`` must be a coordinate or a mimic joint of ``robot`` (nothing locked).
    """
    model = pin.buildModelFromXML(text, True)
    data, frame = model.createData(), model.getFrameId(robot.ee_frame)
    names = [model.names[j] for j in range(1, model.njoints) if model.joints[j].nq > 0]
    order = [robot.joint_names.index(n) for n in names]
    cols = [robot.joint_names.index(n) for n in names]
    poses, jacs = [], []
    for qi in q[:, order].numpy():
        pin.forwardKinematics(model, data, qi)
        pin.updateFramePlacements(model, data)
        poses.append(data.oMf[frame].homogeneous)
        jac = np.zeros((6, robot.dof))
        jac[:, cols] = pin.computeFrameJacobian(model, data, qi, frame, pin.LOCAL_WORLD_ALIGNED)
        jacs.append(jac)
    return np.array(poses), np.array(jacs)


@pytest.fixture(scope="module")
def coupled() -> ik_layer.Robot:
    return ik_layer.load_robot(CHAIN, "tip")


def test_mimic_joints_are_not_coordinates(coupled):
    assert coupled.joint_names == ["j1", "j3", "j7"]
    assert coupled.mimic == {"j2": Mimic("j1", -2.0, 0.3), "j4": Mimic("j3", 0.5, 0.01), "j6": Mimic("j1", 1.5, -0.2)}


def test_fk_and_jacobian_equal_pinocchios_mimic_model(coupled, rng):
    q = coupled.random_q((300,), generator=rng)
    pose, jac = pinocchio_mimic_reference(CHAIN, coupled, q)
    got_pose, got_jac = coupled.fk_jacobian(q)
    np.testing.assert_allclose(got_pose.numpy(), pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(got_jac.numpy(), jac, atol=1e-10, rtol=0)


def full_value(robot: ik_layer.Robot, q_full: torch.Tensor, name: str) -> torch.Tensor:
    return q_full[..., robot.full_model.joints[robot.full_model.getJointId(name)].idx_q]


def test_full_configuration_holds_the_mimic_values(coupled, rng):
    q = coupled.random_q((50,), generator=rng)
    full = coupled.to_full_pinocchio_q(q)
    torch.testing.assert_close(full_value(coupled, full, "j2"), -2.0 * q[:, 0] + 0.3, atol=1e-15, rtol=0)
    torch.testing.assert_close(full_value(coupled, full, "j4"), 0.5 * q[:, 1] + 0.01, atol=1e-15, rtol=0)
    torch.testing.assert_close(full_value(coupled, full, "j6"), 1.5 * q[:, 0] - 0.2, atol=1e-15, rtol=0)


def test_a_leader_off_the_chain_moves(rng, pin_reference):
    robot = ik_layer.load_robot(SIDE, "b")
    assert robot.joint_names == ["j1", "j_side"] and robot.mimic == {"j2": Mimic("j_side", -0.5, 0.1)}
    q = robot.random_q((100,), generator=rng)
    pose, jac = pin_reference(robot, q)  # the reduced model, j2 a free joint at its value, its column folded
    got_pose, got_jac = robot.fk_jacobian(q)
    np.testing.assert_allclose(got_pose.numpy(), pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(got_jac.numpy(), jac, atol=1e-10, rtol=0)
    torch.testing.assert_close(full_value(robot, robot.to_full_pinocchio_q(q), "j2"), -0.5 * q[:, 1] + 0.1)


def test_panda_finger_follows_its_leader(erd_urdf, rng):
    path = erd_urdf("panda_description/urdf/panda.urdf")
    robot = ik_layer.load_robot(path, "panda_rightfinger")  # under panda_finger_joint2, which mimics joint1
    assert robot.joint_names[-1] == "panda_finger_joint1" and list(robot.mimic) == ["panda_finger_joint2"]
    q = robot.random_q((200,), generator=rng)
    pose, jac = pinocchio_mimic_reference(path.read_text(), robot, q)
    got_pose, got_jac = robot.fk_jacobian(q)
    np.testing.assert_allclose(got_pose.numpy(), pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(got_jac.numpy(), jac, atol=1e-10, rtol=0)


def test_solve_routes_mimic_robots_to_the_reference_solver(coupled, rng):
    q = coupled.random_q((200,), generator=rng)
    weights = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64)  # 4 coordinates: positions only
    result = ik_layer.solve(coupled, coupled.fk(q), weights=weights, generator=torch.Generator().manual_seed(1))
    assert result.success.double().mean() >= 0.99
    reached = coupled.fk(result.q)[:, :3, 3]
    assert float((reached - coupled.fk(q)[:, :3, 3]).norm(dim=-1)[result.success].max()) <= 1e-4


def test_locked_leader_locks_its_followers():
    robot = ik_layer.load_robot(CHAIN, "tip", locked={"j1": 0.4})
    assert robot.joint_names == ["j3", "j7"] and list(robot.mimic) == ["j4"]
    full = robot.to_full_pinocchio_q(torch.zeros(2, dtype=torch.float64))
    value = {n: float(full_value(robot, full, n)) for n in ("j2", "j6")}
    assert value == pytest.approx({"j2": -2.0 * 0.4 + 0.3, "j6": 1.5 * 0.4 - 0.2}, abs=1e-15)


def test_a_locked_mimic_joint_keeps_the_given_value():
    robot = ik_layer.load_robot(CHAIN, "tip", locked={"j2": 0.7})
    assert "j2" not in robot.mimic and "j1" in robot.joint_names
    assert float(full_value(robot, robot.to_full_pinocchio_q(torch.zeros(robot.dof, dtype=torch.float64)), "j2")) == 0.7


def test_active_joints_name_the_leader_not_the_mimic_joint():
    with pytest.raises(IKLayerError, match="active_joints: 'j2' mimics 'j1'; name its leader instead"):
        ik_layer.load_robot(CHAIN, "tip", active_joints=["j1", "j2"])
    robot = ik_layer.load_robot(CHAIN, "tip", active_joints=["j1", "j7"])
    assert robot.joint_names == ["j1", "j7"] and list(robot.mimic) == ["j2", "j6"]  # j3 locked: j4 too


def test_default_frame_is_never_below_a_mimic_joint():
    assert ik_layer.load_robot(CHAIN).ee_frame == "a"  # below j1, the only joint no mimic joint follows
