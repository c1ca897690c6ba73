"""Floating base: a free-flyer root (Pinocchio's ``JointModelFreeFlyer``) for whole-body IK.

FK, Jacobians and ``integrate`` against Pinocchio's own free-flyer model (``buildModelFromUrdf(path,
JointModelFreeFlyer())``), configuration layout, whole-body solves of talos and solo12 checked with
Pinocchio FK, and implicit gradients against finite differences of re-solved IK. Frames fixed to the base (its
own link, a leg whose joints are locked) are end-effectors too: the free-flyer moves them.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, NonFiniteError, ShapeError, UnsupportedModelError
from ik_layer.model.lie import from_rotation_translation
from ik_layer.testing import random_bases

F64 = torch.float64
TALOS = "talos_data/robots/talos_reduced.urdf"
TALOS_FRAMES = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]
SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
POSITION_ONLY = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=F64)
TIGHT = {"position_tolerance": 1e-14, "orientation_tolerance": 1e-14, "num_seeds": 1}


@pytest.fixture(scope="module")
def solo(erd_urdf) -> ik_layer.Robot:
    return ik_layer.load_robot(erd_urdf(SOLO), ee_frames=FEET, floating_base=True)


@pytest.fixture(scope="module")
def talos(erd_urdf) -> ik_layer.Robot:
    """Talos with both soles and both hands: legs, torso and arms move on a floating base."""
    return ik_layer.load_robot(erd_urdf(TALOS), ee_frames=TALOS_FRAMES, floating_base=True)


def pinocchio_frames(robot: ik_layer.Robot, urdf, q: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Poses (n, F, 4, 4) and LOCAL_WORLD_ALIGNED Jacobians (n, F, 6, dof) from Pinocchio's free-flyer model of
    ``urdf``, the joints ``robot`` does not move locked at 0."""
    full = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
    lock = [j for j in range(2, full.njoints) if full.names[j] not in robot.joint_names]
    model = pin.buildReducedModel(full, lock, pin.neutral(full))
    data = model.createData()
    cols = [model.joints[model.getJointId(n)].idx_q for n in robot.joint_names]
    assert model.nq == model.nv + 1 == robot.nq and sorted(cols) == list(range(7, model.nq))
    poses = np.empty((q.shape[0], len(robot.ee_frames), 4, 4))
    jacs = np.empty((q.shape[0], len(robot.ee_frames), 6, robot.dof))
    for i, qi in enumerate(q.numpy()):
        q_pin = np.empty(model.nq)
        q_pin[:7], q_pin[cols] = qi[:7], qi[7:]
        pin.framesForwardKinematics(model, data, q_pin)
        for f, name in enumerate(robot.ee_frames):
            frame = model.getFrameId(name)
            poses[i, f] = data.oMf[frame].homogeneous
            jac = pin.computeFrameJacobian(model, data, q_pin, frame, pin.LOCAL_WORLD_ALIGNED)
            jacs[i, f] = jac[:, [*range(6), *(c - 1 for c in cols)]]
    return poses, jacs


@pytest.mark.parametrize(("urdf", "robot", "joints"), [(SOLO, "solo", 12), (TALOS, "talos", 28)])
def test_fk_and_jacobian_match_pinocchio_free_flyer(erd_urdf, rng, request, urdf, robot, joints):
    robot = request.getfixturevalue(robot)
    assert (robot.nq, robot.dof, robot.lower.shape, robot.floating_base) == (7 + joints, 6 + joints, (joints,), True)
    q = random_bases(robot.random_q((50,), generator=rng), rng)
    pose, jac = robot.fk_jacobian(q)
    ref_pose, ref_jac = pinocchio_frames(robot, erd_urdf(urdf), q)
    np.testing.assert_allclose(pose.numpy(), ref_pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(jac.numpy(), ref_jac, atol=1e-10, rtol=0)


def test_model_and_configuration_layout(erd_urdf, solo, rng):
    ref = pin.buildModelFromUrdf(str(erd_urdf(SOLO)), pin.JointModelFreeFlyer())
    assert list(solo.model.names) == list(ref.names) and solo.model.joints[1].shortname() == "JointModelFreeFlyer"
    q = solo.random_q((3,), generator=rng)
    assert q.shape == (3, 19)
    torch.testing.assert_close(q[:, :7], torch.tensor([[0.0] * 6 + [1.0]] * 3, dtype=F64), atol=0, rtol=0)
    assert bool(((q[:, 7:] >= solo.lower) & (q[:, 7:] <= solo.upper)).all())
    scaled = q.clone()
    scaled[:, 3:7] *= 3.0
    torch.testing.assert_close(solo.wrap(scaled), q, atol=1e-15, rtol=0)  # the quaternion is normalised
    torch.testing.assert_close(solo.fk(scaled), solo.fk(q), atol=1e-15, rtol=0)
    torch.testing.assert_close(solo.to_full_pinocchio_q(q), solo.to_pinocchio_q(q), atol=0, rtol=0)
    assert "floating_base=True" in repr(solo)


def test_integrate_matches_pinocchio(erd_urdf, solo, rng):
    model = pin.buildModelFromUrdf(str(erd_urdf(SOLO)), pin.JointModelFreeFlyer())
    q = random_bases(solo.random_q((40,), generator=rng), rng)
    dq = torch.randn(40, 18, generator=rng, dtype=F64)
    dq[:10, 3:6] *= 1e-7  # near-zero rotations take the series expansions
    moved = solo.integrate(q, dq)
    for qi, dqi, got in zip(q.numpy(), dq.numpy(), moved.numpy(), strict=True):
        expected = pin.integrate(model, qi, dqi)
        sign = np.sign(np.dot(got[3:7], expected[3:7]))  # q and -q are the same rotation
        np.testing.assert_allclose(got * np.r_[1, 1, 1, [sign] * 4, [1] * 12], expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(solo.integrate(q, torch.zeros_like(dq)), q, atol=1e-15, rtol=0)


def check_solved(robot: ik_layer.Robot, urdf, result: ik_layer.IKResult, target: torch.Tensor) -> None:
    """>= 99 % success, and Pinocchio's FK of the successful answers within 1e-4 m / 1e-3 rad of the targets."""
    assert result.success.double().mean() >= 0.99
    assert result.q.shape == (target.shape[0], robot.nq)
    poses, _ = pinocchio_frames(robot, urdf, result.q[result.success])
    reached, wanted = torch.from_numpy(poses), target[result.success]
    assert float((reached[..., :3, 3] - wanted[..., :3, 3]).norm(dim=-1).max()) <= 1e-4
    rotation = ik_layer.model.lie.so3_log(wanted[..., :3, :3] @ reached[..., :3, :3].transpose(-1, -2))
    assert float(rotation.norm(dim=-1).max()) <= 1e-3


def test_whole_body_talos_feet_fixed_hands_reaching(erd_urdf, talos, rng):
    q = random_bases(talos.random_q((100,), generator=rng), rng)
    target = talos.fk(q)  # both soles where they stand, both hands somewhere reachable
    result = ik_layer.solve(talos, target, generator=torch.Generator().manual_seed(1))
    check_solved(talos, erd_urdf(TALOS), result, target)
    assert bool((result.q[:, 7:] >= talos.lower).all() and (result.q[:, 7:] <= talos.upper).all())
    torch.testing.assert_close(result.q[:, 3:7].norm(dim=-1), torch.ones(100, dtype=F64), atol=1e-12, rtol=0)


def test_whole_body_solo_four_feet_and_base(erd_urdf, solo, rng):
    q = random_bases(solo.random_q((200,), generator=rng), rng)
    target = solo.fk(q)
    target[..., :3, :3] = torch.eye(3, dtype=F64)  # feet position-only: the base finds its own pose
    result = ik_layer.solve(solo, target, weights=POSITION_ONLY, generator=torch.Generator().manual_seed(2))
    assert result.success.double().mean() >= 0.99
    poses, _ = pinocchio_frames(solo, erd_urdf(SOLO), result.q[result.success])
    reached = torch.from_numpy(poses)[..., :3, 3]
    assert float((reached - target[result.success][..., :3, 3]).norm(dim=-1).max()) <= 1e-4


def central_differences(loss, x: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    """d loss / dx (x's shape) by central differences of re-solved IK."""
    steps = h * torch.eye(x.numel(), dtype=x.dtype).reshape(-1, *x.shape)
    return torch.stack([(loss(x + step) - loss(x - step)) / (2 * h) for step in steps]).reshape(x.shape)


def test_implicit_gradient_matches_finite_differences(solo):
    # Redundant (18 coordinates, 12 rows): re-solving from the solution takes the minimum-norm tangent step.
    joints = torch.tensor([0.1, 0.8, -1.6, -0.1, 0.7, -1.5, 0.2, -0.8, 1.6, -0.2, -0.7, 1.4], dtype=F64)
    base = torch.tensor([0.05, -0.02, 0.3, 0.1, -0.2, 0.05, 0.97], dtype=F64)
    q = torch.cat((base / torch.cat((torch.ones(3), base[3:].norm().expand(4))), joints))
    target = solo.fk(q)
    position = target[..., :3, 3].clone()
    cotangent = torch.randn(19, dtype=F64, generator=torch.Generator().manual_seed(5))

    def loss(p: torch.Tensor) -> torch.Tensor:
        moved = from_rotation_translation(target[..., :3, :3], p)
        return (cotangent * ik_layer.ik(solo, moved, weights=POSITION_ONLY, warm_start=q, **TIGHT)).sum()

    leaf = position.clone().requires_grad_()
    (analytic,) = torch.autograd.grad(loss(leaf), leaf)
    torch.testing.assert_close(analytic, central_differences(loss, position), atol=1e-6, rtol=1e-5)
    grad = ik_layer.target_gradient(solo, q, POSITION_ONLY)  # (dof, F, 6): tangent at q
    assert grad.shape == (18, 4, 6)
    _, jac = solo.fk_jacobian(q)
    rows = jac[:, :3].flatten(0, 1)  # the 12 position rows
    torch.testing.assert_close(rows @ grad[..., :3].flatten(1), torch.eye(12, dtype=F64), atol=1e-8, rtol=0)


def test_bad_floating_base_arguments(erd_urdf, solo):
    with pytest.raises(IKLayerError, match="floating_base must be True or False"):
        ik_layer.load_robot(erd_urdf(SOLO), floating_base="yes")
    q = solo.random_q()
    with pytest.raises(ShapeError, match=r"\(\.\.\., 19\)"):
        solo.fk(q[1:])
    zero = q.clone()
    zero[3:7] = 0
    with pytest.raises(NonFiniteError, match="zero base quaternion"):
        solo.fk(zero)
    with pytest.raises(NonFiniteError, match="posture holds a zero base quaternion"):
        ik_layer.solve(solo, solo.fk(q), posture=zero)


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_posture_pulls_the_joints_of_a_floating_robot(solo, rng, reference):
    """Feet position-only leave 6 of 18 degrees of freedom free: a posture (a stance near the targets', as a user
    gives a nominal one) pulls the joints towards it, the base goes where the feet take it, and the answers
    still meet the targets."""
    q = random_bases(solo.random_q((100,), generator=rng), rng)
    target = solo.fk(q)
    posture = solo.wrap(q + 0.3 * torch.randn(q.shape, generator=rng, dtype=F64) * (torch.arange(19) >= 7))
    answers = [
        ik_layer.solve(solo, target, weights=POSITION_ONLY, posture=p, generator=torch.Generator().manual_seed(3),
                       reference=reference)
        for p in (None, posture)
    ]  # fmt: skip
    free, pulled = answers
    assert float(free.success.double().mean()) >= 0.99 and float(pulled.success.double().mean()) >= 0.99
    for result in answers:
        reached = solo.fk(result.q[result.success])[..., :3, 3]
        assert float((reached - target[result.success][..., :3, 3]).norm(dim=-1).max()) <= 1e-4
    distance = [(r.q[:, 7:] - posture[:, 7:]).norm(dim=-1) for r in answers]
    assert float(distance[1].median()) < 0.5 * float(distance[0].median())


# Frames fixed to the base: the free-flyer moves them, their chains are empty (padded with still entries).
SOLO_BASE = ["base_link", *FEET]
TALOS_BASE = ["base_link", "left_sole_link", "right_sole_link"]
SOLO_FR = ["FR_HAA", "FR_HFE", "FR_KFE"]


@pytest.mark.parametrize(
    ("urdf", "frames", "active", "joints", "length"),
    [
        pytest.param(SOLO, SOLO_BASE, None, 12, 3, id="solo-base-and-feet"),
        pytest.param(TALOS, TALOS_BASE, None, 12, 6, id="talos-base-and-soles"),
        pytest.param(SOLO, ["base_link", "FL_FOOT", "FR_FOOT"], SOLO_FR, 3, 3, id="solo-locked-leg-rigid"),
        pytest.param(SOLO, ["base_link"], ["FL_HFE"], 1, 1, id="solo-only-base-frame"),
    ],
)
def test_frames_fixed_to_the_base_match_pinocchio(erd_urdf, rng, urdf, frames, active, joints, length):
    robot = ik_layer.load_robot(erd_urdf(urdf), ee_frames=frames, active_joints=active, floating_base=True)
    assert (robot.nq, robot.dof, robot.ee_frames) == (7 + joints, 6 + joints, tuple(frames))
    assert robot._chain_cols.shape == (len(frames), length)  # padded to the longest chain, never below 1
    q = random_bases(robot.random_q((20,), generator=rng), rng)
    pose, jac = robot.fk_jacobian(q)
    ref_pose, ref_jac = pinocchio_frames(robot, erd_urdf(urdf), q)
    np.testing.assert_allclose(pose.numpy(), ref_pose, atol=1e-10, rtol=0)
    np.testing.assert_allclose(jac.numpy(), ref_jac, atol=1e-10, rtol=0)
    # The base link is where the base is, and only the base's columns move it.
    np.testing.assert_allclose(pose[:, 0, :3, 3].numpy(), q[:, :3].numpy(), atol=1e-12, rtol=0)
    assert float(jac[:, 0, :, 6:].abs().max()) == 0.0


def test_one_frame_fixed_to_the_base_is_the_stacked_frame(erd_urdf, rng):
    single = ik_layer.load_robot(erd_urdf(SOLO), "base_link", active_joints=["FL_HFE"], floating_base=True)
    stacked = ik_layer.load_robot(erd_urdf(SOLO), ee_frames=["base_link"], active_joints=["FL_HFE"], floating_base=True)
    assert single._chain_cols.shape == (1,) and single._chain_scale.tolist() == [0.0]
    q = random_bases(single.random_q((10,), generator=rng), rng)
    pose, jac = single.fk_jacobian(q)
    ref_pose, ref_jac = stacked.fk_jacobian(q)
    torch.testing.assert_close(pose, ref_pose[:, 0], atol=0, rtol=0)
    torch.testing.assert_close(jac, ref_jac[:, 0], atol=0, rtol=0)


@pytest.mark.parametrize(
    ("urdf", "frames", "n"),
    [pytest.param(SOLO, SOLO_BASE, 200, id="solo-base-and-feet"), pytest.param(TALOS, TALOS_BASE, 100, id="talos")],
)
def test_whole_body_solve_with_a_base_target(erd_urdf, rng, urdf, frames, n):
    """The base's pose and the feet are targets: the reference solver reaches them all (base seeds at the origin)."""
    robot = ik_layer.load_robot(erd_urdf(urdf), ee_frames=frames, floating_base=True)
    q = random_bases(robot.random_q((n,), generator=rng), rng)
    target = robot.fk(q)
    result = ik_layer.solve(robot, target, reference=True, generator=torch.Generator().manual_seed(6))
    check_solved(robot, erd_urdf(urdf), result, target)
    # The base frame's target fixes the base: the answers' bases are the targets' bases.
    np.testing.assert_allclose(result.q[result.success, :3].numpy(), q[result.success, :3].numpy(), atol=1e-4)


def test_frames_fixed_to_the_base_need_a_floating_base_and_a_moving_joint(erd_urdf):
    with pytest.raises(UnsupportedModelError, match="no joint moves between the base and 'base_link'; frames"):
        ik_layer.load_robot(erd_urdf(SOLO), ee_frames=["base_link", "FL_FOOT"])
    locked = {n: 0.0 for leg in ("FL", "FR", "HL", "HR") for n in (f"{leg}_HAA", f"{leg}_HFE", f"{leg}_KFE")}
    for kwargs in ({"ee_frames": ["base_link"]}, {"ee_frame": "base_link"}, {"ee_frames": ["base_link", "FL_FOOT"]}):
        with pytest.raises(UnsupportedModelError, match=r"no joint of 'solo' moves: end-effector frames \["):
            ik_layer.load_robot(erd_urdf(SOLO), floating_base=True, locked=locked, **kwargs)
    with pytest.raises(UnsupportedModelError, match=r"frames \['base_link'\] are fixed to the floating base"):
        ik_layer.load_robot(erd_urdf(SOLO), ee_frames=["base_link"], floating_base=True)


def test_neutral_q_is_zero_joints_and_the_base_at_the_origin(solo):
    q = solo.neutral_q()
    expected = torch.zeros(19, dtype=F64)
    expected[6] = 1.0
    torch.testing.assert_close(q, solo.wrap(expected), rtol=0, atol=0)
