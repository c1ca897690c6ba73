"""Batched FK and analytic Jacobians against Pinocchio (the oracle), autograd, closed forms; bad inputs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import FrameNotFound, IKLayerError, NonFiniteError, RobotNotFound, ShapeError, UnsupportedModelError
from ik_layer.model.lie import vee

F64, F32 = torch.float64, torch.float32
N_ORACLE = 1000  # configurations compared with Pinocchio, per robot and frame
N_AUTOGRAD = 64  # configurations compared with jacrev / finite differences


ALL_TINY_JOINTS = ("j_cont", "j_side", "j_off", "j_prism", "j_neg", "j_cont_off")


@dataclass(frozen=True)
class Case:
    """A robot to check: a built-in name, an example-robot-data URDF, or the tiny URDF above."""

    name: str | None = None
    erd: str | None = None
    tiny: bool = False
    ee_frame: str | None = None
    active_joints: tuple[str, ...] | None = None
    locked: dict[str, float] | None = None


CASES = {
    **{f"builtin-{n}": Case(name=n) for n in ik_layer.builtin_robots()},
    "erd-ur5": Case(erd="ur_description/urdf/ur5_robot.urdf"),
    "erd-panda-default": Case(erd="panda_description/urdf/panda.urdf"),  # the longest chain: to the left finger
    "erd-panda-all-joints": Case(  # 8 dof, the fingers off the chain
        erd="panda_description/urdf/panda.urdf",
        ee_frame="panda_hand",
        active_joints=(*(f"panda_joint{i}" for i in range(1, 8)), "panda_finger_joint1"),  # joint2 mimics joint1
    ),
    "erd-talos-arm-torso-locked": Case(
        erd="talos_data/robots/talos_reduced.urdf",
        ee_frame="gripper_left_base_link",
        locked={"torso_1_joint": 0.3, "torso_2_joint": -0.2},
    ),
    "erd-baxter-right-arm": Case(erd="baxter_description/urdf/baxter.urdf", ee_frame="right_gripper"),
    "erd-anymal-c-shared-names": Case(erd="anymal_c_simple_description/urdf/anymal.urdf"),  # links named as joints
    "erd-panda-finger": Case(erd="panda_description/urdf/panda.urdf", ee_frame="panda_leftfinger"),
    "erd-kinova-continuous": Case(erd="kinova_description/robots/kinova.urdf"),
    "erd-xarm7": Case(erd="xarm_description/urdf/xarm7.urdf"),
    "tiny-tool": Case(tiny=True, ee_frame="tool"),
    "tiny-mid-fixed": Case(tiny=True, ee_frame="l2b"),
    "tiny-side-branch": Case(tiny=True, ee_frame="side_tip"),
    "tiny-all-joints": Case(tiny=True, ee_frame="l2b", active_joints=ALL_TINY_JOINTS),
    "tiny-locked": Case(tiny=True, ee_frame="tool", locked={"j_off": 0.7, "j_cont_off": -2.5}),
}


def source(case: Case, erd_urdf, tiny_urdf) -> str | Path:
    if case.name:
        return case.name
    return tiny_urdf if case.tiny else erd_urdf(case.erd)


@dataclass
class Oracle:
    robot: ik_layer.Robot
    case: Case
    source: str | Path
    q: torch.Tensor  # (N_ORACLE, dof) float64, inside the limits
    pose: np.ndarray
    jac: np.ndarray


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def oracle(request, erd_urdf, tiny_urdf, pin_reference) -> Oracle:
    case = CASES[request.param]
    src = source(case, erd_urdf, tiny_urdf)
    robot = ik_layer.load_robot(src, case.ee_frame, active_joints=case.active_joints, locked=case.locked)
    q = robot.random_q((N_ORACLE,), generator=torch.Generator().manual_seed(7))
    pose, jac = pin_reference(robot, q)
    return Oracle(robot, case, src, q, pose, jac)


# --------------------------------------------------------------------------- against Pinocchio


def test_fk_jacobian_matches_pinocchio_float64(oracle):
    pose, jac = oracle.robot.fk_jacobian(oracle.q)
    assert pose.dtype == jac.dtype == F64
    assert jac.shape == (N_ORACLE, 6, oracle.robot.dof)
    np.testing.assert_allclose(pose.numpy(), oracle.pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(jac.numpy(), oracle.jac, atol=1e-10, rtol=0)
    np.testing.assert_allclose(oracle.robot.fk(oracle.q).numpy(), oracle.pose, atol=1e-10, rtol=0)


def test_fk_jacobian_matches_pinocchio_float32(oracle):
    case = oracle.case
    robot32 = ik_layer.load_robot(
        oracle.source, case.ee_frame, active_joints=case.active_joints, locked=case.locked, dtype=F32
    )
    pose, jac = robot32.fk_jacobian(oracle.q.to(F32))
    assert pose.dtype == jac.dtype == F32
    np.testing.assert_allclose(pose.double().numpy(), oracle.pose, atol=1e-4, rtol=0)
    np.testing.assert_allclose(jac.double().numpy(), oracle.jac, atol=1e-4, rtol=0)


def test_fk_jacobian_match_pinocchio_on_the_full_model(oracle, fold):
    """Locked joints are folded into fixed placements: the full model at the mapped configuration agrees."""
    robot, full = oracle.robot, oracle.robot.full_model
    q = oracle.q[:100]
    q_full = robot.to_full_pinocchio_q(q).numpy()
    data, frame = full.createData(), full.getFrameId(robot.ee_frame)
    to_coordinates = fold(robot, full)
    pose, jac = robot.fk_jacobian(q)
    for i, qi in enumerate(q_full):
        pin.forwardKinematics(full, data, qi)
        pin.updateFramePlacements(full, data)
        np.testing.assert_allclose(pose[i].numpy(), data.oMf[frame].homogeneous, atol=1e-10, rtol=0)
        j_full = pin.computeFrameJacobian(full, data, qi, frame, pin.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(jac[i].numpy(), j_full @ to_coordinates, atol=1e-10, rtol=0)
    locked = np.ones(full.nq, dtype=bool)
    for n in [*robot.joint_names, *robot.mimic]:
        jm = full.joints[full.getJointId(n)]
        locked[jm.idx_q : jm.idx_q + jm.nq] = False
    np.testing.assert_array_equal(q_full[:, locked], np.broadcast_to(q_full[0, locked], q_full[:, locked].shape))
    for name, value in (oracle.case.locked or {}).items():
        jm = full.joints[full.getJointId(name)]
        expected = [np.cos(value), np.sin(value)] if jm.nq == 2 else [value]
        np.testing.assert_allclose(q_full[:, jm.idx_q : jm.idx_q + jm.nq], np.tile(expected, (len(q), 1)), rtol=0)


def test_robot_description(oracle):
    robot, model = oracle.robot, oracle.robot.model
    assert robot.dof == model.nv - len(robot.mimic) == len(robot.joint_names) == robot.lower.shape[-1]
    assert robot.joint_names == [n for j, n in enumerate(model.names) if j > 0 and n not in robot.mimic]
    assert (robot.lower <= robot.upper).all()
    assert ((oracle.q >= robot.lower) & (oracle.q <= robot.upper)).all()
    assert robot.ee_frame in [f.name for f in model.frames]
    q_pin = robot.to_pinocchio_q(oracle.q[:3])
    assert q_pin.shape == (3, model.nq)
    two = torch.tensor([model.joints[model.getJointId(n)].nq == 2 for n in robot.joint_names], dtype=torch.bool)
    assert model.nq == robot.dof + len(robot.mimic) + int(two.sum())
    assert robot.continuous[two].all()  # Pinocchio's continuous joints wrap (so do revolute ones of huge range)


# --------------------------------------------------------------------------- against autograd


def twist_jacobian_from_autograd(robot: ik_layer.Robot, q: torch.Tensor) -> torch.Tensor:
    """(B, 6, dof): linear = dp/dq, angular = vee(dR/dq R^T), from jacrev of the batched fk."""
    d_pose = torch.func.jacrev(lambda x: robot.fk(x).sum(0))(q).permute(2, 0, 1, 3)  # (B, 4, 4, dof)
    rot = robot.fk(q)[:, :3, :3]
    linear = d_pose[:, :3, 3, :]
    d_rot = d_pose[:, :3, :3, :].permute(0, 3, 1, 2)  # (B, dof, 3, 3)
    angular = vee(d_rot @ rot[:, None].transpose(-1, -2)).transpose(-1, -2)
    return torch.cat((linear, angular), dim=-2)


def test_jacobian_equals_jacrev_of_fk(oracle):
    q = oracle.q[:N_AUTOGRAD]
    _, jac = oracle.robot.fk_jacobian(q)
    torch.testing.assert_close(twist_jacobian_from_autograd(oracle.robot, q), jac, atol=1e-10, rtol=0)


def test_jacobian_equals_finite_differences(oracle):
    robot, q, h = oracle.robot, oracle.q[:8], 1e-6
    pose, jac = robot.fk_jacobian(q)
    for k in range(robot.dof):
        dq = torch.zeros(robot.dof, dtype=F64)
        dq[k] = h
        plus, minus = robot.fk(q + dq), robot.fk(q - dq)
        dp = (plus[:, :3, 3] - minus[:, :3, 3]) / (2 * h)
        dw = vee((plus[:, :3, :3] - minus[:, :3, :3]) / (2 * h) @ pose[:, :3, :3].transpose(-1, -2))
        torch.testing.assert_close(dp, jac[:, :3, k], atol=1e-7, rtol=0)
        torch.testing.assert_close(dw, jac[:, 3:, k], atol=1e-7, rtol=0)


def test_fk_gradcheck(oracle):
    q = oracle.q[:2].clone().requires_grad_()
    assert torch.autograd.gradcheck(oracle.robot.fk, (q,))


# --------------------------------------------------------------------------- closed form


def test_planar3_closed_form(rng):
    robot = ik_layer.load_robot("planar3")
    lengths = torch.tensor([0.5, 0.4, 0.3], dtype=F64)
    q = robot.random_q((N_ORACLE,), generator=rng)
    c = torch.cumsum(q, -1)
    x, y, yaw = (lengths * torch.cos(c)).sum(-1), (lengths * torch.sin(c)).sum(-1), q.sum(-1)
    pose, jac = robot.fk_jacobian(q)
    torch.testing.assert_close(pose[:, 0, 3], x, atol=1e-12, rtol=0)
    torch.testing.assert_close(pose[:, 1, 3], y, atol=1e-12, rtol=0)
    torch.testing.assert_close(pose[:, 2, 3], torch.zeros_like(x), atol=1e-12, rtol=0)
    rz = torch.zeros(N_ORACLE, 3, 3, dtype=F64)
    rz[:, 0, 0], rz[:, 0, 1], rz[:, 1, 0], rz[:, 1, 1], rz[:, 2, 2] = yaw.cos(), -yaw.sin(), yaw.sin(), yaw.cos(), 1
    torch.testing.assert_close(pose[:, :3, :3], rz, atol=1e-12, rtol=0)
    # Column j: d(x, y)/dq_j sums the links from j outwards; angular part is the z axis.
    tail_x = torch.flip(torch.cumsum(torch.flip(lengths * torch.cos(c), [-1]), -1), [-1])
    tail_y = torch.flip(torch.cumsum(torch.flip(lengths * torch.sin(c), [-1]), -1), [-1])
    expected = torch.zeros(N_ORACLE, 6, 3, dtype=F64)
    expected[:, 0], expected[:, 1], expected[:, 5] = -tail_y, tail_x, 1
    torch.testing.assert_close(jac, expected, atol=1e-12, rtol=0)


# --------------------------------------------------------------------------- shapes, dtypes, modules


@pytest.mark.parametrize("dtype", [F64, F32], ids=["f64", "f32"])
@pytest.mark.parametrize("batch", [(), (5,), (2, 3), (0,)], ids=["scalar", "5", "2x3", "empty"])
def test_batch_shapes(rng, batch, dtype):
    robot = ik_layer.load_robot("panda", dtype=dtype)
    q = robot.random_q(batch, generator=rng)
    assert q.shape == (*batch, 7) and q.dtype == dtype
    pose = robot.fk(q)
    pose2, jac = robot.fk_jacobian(q)
    assert pose.shape == pose2.shape == (*batch, 4, 4) and jac.shape == (*batch, 6, 7)
    assert pose.dtype == jac.dtype == dtype
    flat_pose, flat_jac = robot.fk_jacobian(q.reshape(-1, 7))
    torch.testing.assert_close(pose2, flat_pose.reshape(*batch, 4, 4), atol=0, rtol=0)
    torch.testing.assert_close(jac, flat_jac.reshape(*batch, 6, 7), atol=0, rtol=0)
    torch.testing.assert_close(pose, pose2, atol=0, rtol=0)


def test_single_config_equals_batched_row(rng):
    robot = ik_layer.load_robot("ur5e")
    q = robot.random_q((4,), generator=rng)
    for i in range(4):
        pose, jac = robot.fk_jacobian(q[i])
        torch.testing.assert_close(pose, robot.fk(q)[i], atol=1e-15, rtol=0)
        torch.testing.assert_close(jac, robot.fk_jacobian(q)[1][i], atol=1e-15, rtol=0)


def test_to_float32_and_back(rng, pin_reference):
    robot = ik_layer.load_robot("iiwa14")
    q = robot.random_q((50,), generator=rng)
    ref_pose, ref_jac = pin_reference(robot, q)
    r32 = robot.to(F32)
    assert isinstance(r32, ik_layer.Robot) and r32.dtype == F32
    assert all(b.dtype in (F32, torch.long, torch.bool) for b in r32.buffers())
    pose, jac = r32.fk_jacobian(q.to(F32))
    np.testing.assert_allclose(pose.double().numpy(), ref_pose, atol=1e-5, rtol=0)
    np.testing.assert_allclose(jac.double().numpy(), ref_jac, atol=1e-5, rtol=0)
    r64 = r32.to(dtype=F64, device="cpu")
    assert r64.dtype == F64 and r64.device == torch.device("cpu")
    pose, jac = r64.fk_jacobian(q)
    assert pose.dtype == F64
    # Buffers went through float32, so only float32 accuracy survives the round trip.
    np.testing.assert_allclose(pose.numpy(), ref_pose, atol=1e-6, rtol=0)
    np.testing.assert_allclose(jac.numpy(), ref_jac, atol=1e-6, rtol=0)


def test_load_robot_dtype_and_limits_follow():
    robot = ik_layer.load_robot("ur5e", dtype=F32)
    assert robot.dtype == robot.lower.dtype == robot.upper.dtype == F32
    assert robot.device == torch.device("cpu")
    assert robot.continuous.dtype == torch.bool


def test_tiny_urdf_default_moves_the_chain_only(tiny_urdf):
    robot = ik_layer.load_robot(tiny_urdf, "tool")
    assert robot.joint_names == ["j_cont", "j_off", "j_prism", "j_neg", "j_cont_off"]
    side = ik_layer.load_robot(tiny_urdf, "side_tip")
    assert side.joint_names == ["j_cont", "j_side"] and side.model.nv == 2 and side.full_model.nv == 6


def test_tiny_urdf_structure(tiny_urdf):
    robot = ik_layer.load_robot(tiny_urdf, "tool", active_joints=ALL_TINY_JOINTS)
    names = robot.joint_names  # Pinocchio's (depth-first) order
    assert sorted(names) == sorted(["j_cont", "j_side", "j_off", "j_prism", "j_neg", "j_cont_off"])
    col = {n: i for i, n in enumerate(names)}
    continuous = {n for n, c in zip(names, robot.continuous.tolist(), strict=False) if c}
    assert continuous == {"j_cont", "j_cont_off"}
    assert robot.lower[col["j_prism"]] == -0.3 and robot.upper[col["j_prism"]] == 0.5
    q = robot.random_q((4,), generator=torch.Generator().manual_seed(0))
    _, jac = robot.fk_jacobian(q)
    assert (jac[..., col["j_side"]] == 0).all(), "j_side is off the chain to 'tool'"
    assert (jac[:, 3:, col["j_prism"]] == 0).all(), "a prismatic joint has no angular part"
    # Continuous joints map to (cos, sin) in Pinocchio's q, at the joint's idx_q.
    q = torch.zeros(6, dtype=F64)
    q[col["j_cont"]], q[col["j_cont_off"]] = 0.3, -2.0
    q_pin = robot.to_pinocchio_q(q)
    assert q_pin.shape == (8,)
    for name, angle in (("j_cont", 0.3), ("j_cont_off", -2.0)):
        i = robot.model.joints[robot.model.getJointId(name)].idx_q
        torch.testing.assert_close(q_pin[i : i + 2], torch.tensor([np.cos(angle), np.sin(angle)], dtype=F64))


def test_continuous_joint_is_periodic(tiny_urdf):
    robot = ik_layer.load_robot(tiny_urdf, "tool", active_joints=ALL_TINY_JOINTS)
    q = robot.random_q((10,), generator=torch.Generator().manual_seed(3))
    shifted = q.clone()
    for name, turns in (("j_cont", 1), ("j_cont_off", -2)):
        shifted[:, robot.joint_names.index(name)] += 2 * np.pi * turns
    torch.testing.assert_close(robot.fk(shifted), robot.fk(q), atol=1e-12, rtol=0)


# --------------------------------------------------------------------------- errors


@pytest.fixture(scope="module")
def panda() -> ik_layer.Robot:
    return ik_layer.load_robot("panda")


@pytest.mark.parametrize(
    ("make_q", "error", "match"),
    [
        pytest.param(lambda: torch.zeros(6, dtype=F64), ShapeError, r"\(\.\.\., 7\)", id="last-dim-6"),
        pytest.param(lambda: torch.zeros(3, 8, dtype=F64), ShapeError, r"\(3, 8\)", id="last-dim-8"),
        pytest.param(lambda: torch.tensor(0.0, dtype=F64), ShapeError, "shape", id="0-d"),
        pytest.param(lambda: [0.0] * 7, ShapeError, "torch.Tensor", id="list"),
        pytest.param(lambda: torch.full((2, 7), float("nan"), dtype=F64), NonFiniteError, "NaN", id="nan"),
        pytest.param(
            lambda: torch.tensor([0, 0, 0, -1, 0, 1, float("inf")], dtype=F64), NonFiniteError, "NaN", id="inf"
        ),
        pytest.param(lambda: torch.zeros(7, dtype=F32), IKLayerError, "dtype", id="dtype-mix"),
        pytest.param(lambda: torch.zeros(7, dtype=torch.long), IKLayerError, "dtype", id="integer"),
    ],
)
@pytest.mark.parametrize("method", ["fk", "fk_jacobian", "to_pinocchio_q"])
def test_bad_q(panda, make_q, error, match, method):
    with pytest.raises(error, match=match) as info:
        getattr(panda, method)(make_q())
    assert isinstance(info.value, ValueError)


def test_unknown_robot_lists_builtin_names():
    with pytest.raises(RobotNotFound) as info:
        ik_layer.load_robot("pandaa")
    message = str(info.value)
    assert "pandaa" in message
    for name in ik_layer.builtin_robots():
        assert name in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("as_str", [True, False], ids=["str", "Path"])
def test_missing_file_says_no_such_file(tmp_path, as_str):
    missing = tmp_path / "nope" / "robot.urdf"
    with pytest.raises(RobotNotFound) as info:
        ik_layer.load_robot(str(missing) if as_str else missing)
    assert str(info.value) == f"{str(missing)!r}: no such file"
    with pytest.raises(RobotNotFound, match="is a folder, not a model file"):
        ik_layer.load_robot(str(tmp_path) if as_str else tmp_path)


@pytest.mark.parametrize("name", ["does/not/exist.urdf", "arm.urdf", "scene.xml", "arm.urdf.xacro"])
def test_a_name_that_reads_as_a_file_says_no_such_file(name):
    with pytest.raises(RobotNotFound, match=re.escape(f"{name!r}: no such file")):
        ik_layer.load_robot(name)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("garbage <<< not xml", id="garbage"),
        pytest.param("", id="empty"),
        pytest.param("<foo/>", id="not-a-robot"),
        pytest.param(
            '<robot name="r"><link name="a"/><joint name="j" type="revolute"><parent link="a"/>'
            '<child link="missing"/><axis xyz="0 0 1"/></joint></robot>',
            id="dangling-link",
        ),
    ],
)
def test_malformed_urdf(write_urdf, text):
    path = write_urdf(text)
    with pytest.raises(UnsupportedModelError, match="could not parse") as info:
        ik_layer.load_robot(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_unknown_frame_lists_frames(tiny_urdf):
    with pytest.raises(FrameNotFound) as info:
        ik_layer.load_robot("panda", "panda_hand_tcpp")
    assert "panda_hand_tcpp" in str(info.value) and "panda_link8" in str(info.value)
    with pytest.raises(FrameNotFound) as info:
        ik_layer.load_robot(tiny_urdf, "no_such_frame")
    for frame in ("tool", "side_tip", "l2b", "j_prism"):
        assert frame in str(info.value)
    assert isinstance(info.value, ValueError)


UNSUPPORTED = """<robot name="r"><link name="a"/><link name="b"/><link name="c"/>
  <joint name="ok" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="bad" type="{kind}"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


@pytest.mark.parametrize("kind", ["floating", "planar"])
def test_unsupported_joint_in_the_chain_is_refused_off_it_loads(write_urdf, kind):
    path = write_urdf(UNSUPPORTED.format(kind=kind))
    with pytest.raises(UnsupportedModelError, match="joint 'bad' is a JointModel") as info:
        ik_layer.load_robot(path, "c")
    assert isinstance(info.value, ValueError)
    robot = ik_layer.load_robot(path, "b")
    assert robot.joint_names == ["ok"] and robot.full_model.nv > 1
    assert ik_layer.load_robot(path).ee_frame == "b"  # the default frame avoids the unsupported joint


def test_every_error_is_a_value_error():
    for cls in (FrameNotFound, NonFiniteError, RobotNotFound, ShapeError, UnsupportedModelError):
        assert issubclass(cls, IKLayerError) and issubclass(cls, ValueError)


def test_unchecked_kinematics_works_under_vmap_and_matches_fk_jacobian():
    robot = ik_layer.load_robot("panda")
    q = robot.random_q((4,), generator=torch.Generator().manual_seed(0))
    d_pose = torch.func.vmap(torch.func.jacrev(lambda x: robot.kinematics(x, jacobian=False)[0]))(q)
    pose, jac = robot.fk_jacobian(q)
    angular = vee(d_pose[:, :3, :3].permute(0, 3, 1, 2) @ pose[:, None, :3, :3].transpose(-1, -2))
    torch.testing.assert_close(d_pose[:, :3, 3], jac[:, :3], atol=1e-12, rtol=0)
    torch.testing.assert_close(angular.transpose(1, 2), jac[:, 3:], atol=1e-12, rtol=0)
