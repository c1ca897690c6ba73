"""solve_trajectory: clips solved frame by frame within velocity limits, every answer checked with Pinocchio."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer.trajectory.problem import joint_difference, velocity_limits
from ik_layer.trajectory.synthetic import joint_paths

DT = 0.01
TALOS_FRAMES = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]


def pinocchio_poses(robot: ik_layer.Robot, q: torch.Tensor) -> np.ndarray:
    """Poses (..., [F,] 4, 4) of the robot's end-effector frames at ``q`` (..., nq) from Pinocchio, float64."""
    model, data = robot.model, robot.model.createData()
    names = robot.ee_frames or [robot.ee_frame]
    flat = robot.to_pinocchio_q(q).detach().double().numpy().reshape(-1, model.nq)
    poses = np.empty((flat.shape[0], len(names), 4, 4))
    for i, qi in enumerate(flat):
        pin.framesForwardKinematics(model, data, qi)
        poses[i] = [data.oMf[model.getFrameId(name)].homogeneous for name in names]
    return poses.reshape(*q.shape[:-1], *robot.target_shape)


def confirmed_errors(robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Position [m] and orientation [rad] errors (...) of ``q`` at ``target`` (4x4 form) by Pinocchio, worst frame."""
    reached = torch.from_numpy(pinocchio_poses(robot, q))
    position = (reached[..., :3, 3] - target[..., :3, 3]).norm(dim=-1)
    rotation = ik_layer.model.lie.so3_log(target[..., :3, :3] @ reached[..., :3, :3].mT).norm(dim=-1)
    if robot.ee_frames is not None:
        position, rotation = position.amax(-1), rotation.amax(-1)
    return position.numpy(), rotation.numpy()


def steps_within_limits(robot: ik_layer.Robot, q: torch.Tensor, start: torch.Tensor, limit: torch.Tensor) -> bool:
    """Whether every joint step of ``q`` (..., T, nq), from ``start`` (..., nq), is at most ``limit * DT``."""
    previous = torch.cat((start.unsqueeze(-2), q[..., :-1, :]), -2)
    return bool((joint_difference(robot, q, previous).abs() <= limit * DT).all())


def talos_stance(robot: ik_layer.Robot) -> torch.Tensor:
    """Talos standing with bent knees (straight legs are a singular configuration), arms a little forward."""
    q = robot.neutral_q()
    for side in ("left", "right"):
        for joint, angle in (
            ("leg_%s_3_joint", -0.4),
            ("leg_%s_4_joint", 0.8),
            ("leg_%s_5_joint", -0.4),
            ("arm_%s_2_joint", 0.2 if side == "left" else -0.2),
            ("arm_%s_4_joint", -0.6),
        ):
            q[7 + robot.joint_names.index(joint % side)] = angle
    return q


@pytest.fixture(scope="module")
def ur5e() -> ik_layer.Robot:
    return ik_layer.load_robot("ur5e")


@pytest.fixture(scope="module")
def panda() -> ik_layer.Robot:
    return ik_layer.load_robot("panda")


def test_velocity_limits_are_the_urdf_ones(ur5e, erd_urdf):
    assert torch.equal(velocity_limits(ur5e), torch.full((6,), 3.14, dtype=torch.float64))
    talos = ik_layer.load_robot(
        erd_urdf("talos_data/robots/talos_reduced.urdf"), ee_frames=TALOS_FRAMES, floating_base=True
    )
    full = pin.buildModelFromUrdf(str(erd_urdf("talos_data/robots/talos_reduced.urdf")))
    expected = [full.velocityLimit[full.joints[full.getJointId(name)].idx_v] for name in talos.joint_names]
    assert velocity_limits(talos).tolist() == expected
    assert len(expected) == 28 and min(expected) > 1.0


def test_ur5e_clips_through_singularities_track_the_path(ur5e, rng):
    path = joint_paths(ur5e, 6, 300, DT, generator=rng)  # 0.8 v_max, crossing elbow and wrist singularities
    target = ur5e.fk(path)
    result = ik_layer.solve_trajectory(ur5e, target, dt=DT, warm_start=path[:, 0], acceleration=10.0)
    position, rotation = confirmed_errors(ur5e, result.q, target)
    assert result.success.all()
    assert (position <= 1e-4).all() and (rotation <= 1e-3).all()
    np.testing.assert_allclose(result.position_error.numpy(), position, atol=1e-9)
    assert steps_within_limits(ur5e, result.q, path[:, 0], velocity_limits(ur5e))
    assert float(result.velocity_ratio.max()) <= 1.0
    moved = joint_difference(ur5e, result.q, torch.cat((path[:, :1], result.q[:, :-1]), 1)).abs().amax(-1)
    torch.testing.assert_close(result.max_step, moved)
    assert (result.max_step <= 0.8 * 3.14 * DT + 0.01).all()  # no faster than the path, give or take a singular frame


def test_clips_in_leading_dimensions_and_pose_form(panda, rng):
    path = joint_paths(panda, 4, 40, DT, speed=0.3, generator=rng)
    poses = ik_layer.matrix_to_pose(panda.fk(path))  # (4, 40, 7)
    whole = ik_layer.solve_trajectory(panda, poses.reshape(2, 2, 40, 7), dt=DT, warm_start=path[:, 0].reshape(2, 2, 7))
    assert whole.q.shape == (2, 2, 40, 7) and whole.success.shape == (2, 2, 40)
    assert whole.success.all()
    one = ik_layer.solve_trajectory(panda, panda.fk(path[1]), dt=DT, warm_start=path[1, 0])
    torch.testing.assert_close(whole.q.reshape(4, 40, 7)[1], one.q, atol=1e-6, rtol=0)
    position, rotation = confirmed_errors(panda, whole.q.reshape(4, 40, 7), panda.fk(path))
    assert (position <= 1e-4).all() and (rotation <= 1e-3).all()


def test_a_jump_no_joint_can_make_fails_honestly_within_the_limits(ur5e, rng):
    path = joint_paths(ur5e, 1, 40, DT, speed=0.2, generator=rng)[0]
    path[15:, 0] += 0.5  # the base joint teleports by 0.5 rad: 16 frames at 3.14 rad/s
    path = ur5e.wrap(path)
    target = ur5e.fk(path)
    result = ik_layer.solve_trajectory(ur5e, target, dt=DT, warm_start=path[0])
    assert steps_within_limits(ur5e, result.q, path[0], velocity_limits(ur5e))
    position, rotation = confirmed_errors(ur5e, result.q, target)
    assert result.success[:15].all() and not result.success[15]
    assert result.bounded[15] and float(result.velocity_ratio[15]) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(result.position_error.numpy(), position, atol=1e-9)
    np.testing.assert_array_equal(result.success.numpy(), (position <= 1e-4) & (rotation <= 1e-3))
    assert result.success[-3:].all()  # caught up with the path, by the joint moving at its limit


def test_a_timeout_stops_the_clip_and_later_frames_hold_the_last_configuration(ur5e, rng):
    """Targets no answer meets from afar (tolerances of 1e-300): the frame in progress at the timeout and every later
    frame answer DEADLINE, the later ones holding its configuration (velocity 0) with their errors there, and the
    call returns soon after the timeout; a clip solved in time answers SOLVED throughout."""
    path = joint_paths(ur5e, 2, 30, DT, speed=0.3, generator=rng)
    target = ur5e.fk(path)
    never = {"position_tolerance": 1e-300, "orientation_tolerance": 1e-300, "max_iterations": 10_000}
    start = time.monotonic()
    late = ik_layer.solve_trajectory(ur5e, target, dt=DT, warm_start=path[:, 0], timeout=0.1, **never)
    took = time.monotonic() - start
    whole = ik_layer.solve_trajectory(ur5e, target, dt=DT, warm_start=path[:, 0], timeout=60)
    assert took < 2.0  # one frame's 10,000 iterations at most stopped at 0.1 s; 30 frames would take seconds
    # Frames run their 10,000 iterations (frame 0 starts at its solution, the warm start) until the time runs out
    # during frame d, which answers DEADLINE as every frame after it, those holding its configuration. The clips' rows
    # share each frame's solve: one that stopped in frame d just before the time ran out (its iterations spent, or
    # errors of exactly 0) answers DEADLINE from d + 1.
    deadline = late.status == ik_layer.DEADLINE
    first = deadline.int().argmax(dim=1)  # each clip's first DEADLINE frame
    d = int(first.min())
    assert 0 < d < 25 and int(first.max()) <= d + 1
    for clip, frame in enumerate(first.tolist()):
        assert bool(deadline[clip, frame:].all()) and not bool(deadline[clip, :frame].any())
        assert not late.success[clip, frame:].any()
    assert torch.equal(late.q[:, d + 1 :], late.q[:, d : d + 1].expand(-1, 29 - d, -1))
    assert bool((late.max_step[:, d + 1 :] == 0).all())
    position, rotation = confirmed_errors(ur5e, late.q, target)
    np.testing.assert_allclose(late.position_error.numpy(), position, atol=1e-9)
    np.testing.assert_allclose(late.orientation_error.numpy(), rotation, atol=1e-9)
    assert whole.success.all() and bool((whole.status == ik_layer.SOLVED).all())
    with pytest.raises(ik_layer.IKLayerError, match="timeout"):
        ik_layer.solve_trajectory(ur5e, target, dt=DT, timeout=0)


def test_a_given_velocity_limit_bounds_every_step(panda, rng):
    path = joint_paths(panda, 2, 60, DT, speed=0.5, generator=rng)
    slow = torch.tensor([0.5] * 7, dtype=torch.float64)
    result = ik_layer.solve_trajectory(
        panda, panda.fk(path), dt=DT, warm_start=path[:, 0], velocity_limit=slow, max_iterations=40
    )
    assert steps_within_limits(panda, result.q, path[:, 0], slow)
    position, _ = confirmed_errors(panda, result.q, panda.fk(path))
    np.testing.assert_array_equal(result.success.numpy(), result.success.numpy() & (position <= 1e-4))
    assert not result.success.all() and result.bounded.any()


def test_talos_floating_base_clip_confirmed_by_pinocchio(erd_urdf):
    robot = ik_layer.load_robot(
        erd_urdf("talos_data/robots/talos_reduced.urdf"), ee_frames=TALOS_FRAMES, floating_base=True
    )
    stance = talos_stance(robot)
    target = robot.fk(stance).expand(20, -1, -1, -1).clone()
    wave = 0.02 * torch.sin(torch.linspace(0, math.pi, 20, dtype=torch.float64))  # at most 0.33 m/s
    target[:, 2, 0, 3] += wave  # left hand forward and back
    target[:, 3, 2, 3] += wave  # right hand up and down
    result = ik_layer.solve_trajectory(robot, target, dt=DT, warm_start=stance, posture=stance)
    position, rotation = confirmed_errors(robot, result.q, target)
    assert result.success.all() and (position <= 1e-4).all() and (rotation <= 1e-3).all()
    assert steps_within_limits(robot, result.q, stance, velocity_limits(robot))


def test_the_first_frame_without_a_warm_start_is_solved_freely(ur5e, rng):
    path = joint_paths(ur5e, 2, 10, DT, speed=0.2, generator=rng)
    result = ik_layer.solve_trajectory(ur5e, ur5e.fk(path), dt=DT, generator=rng)
    assert result.success.all()
    assert (result.max_step[:, 0] == 0).all() and (result.velocity_ratio[:, 1:] <= 1).all()


@pytest.mark.parametrize(
    "change, name",
    [
        ({"dt": 0.0}, "dt"),
        ({"dt": -0.01}, "dt"),
        ({"dt": float("nan")}, "dt"),
        ({"dt": True}, "dt"),
        ({"velocity_limit": 0.0}, "velocity_limit"),
        ({"velocity_limit": torch.tensor([1.0, 1, 1, 1, 1, -1], dtype=torch.float64)}, "velocity_limit"),
        ({"velocity_limit": torch.tensor([float("nan")] * 6, dtype=torch.float64)}, "velocity_limit"),
        ({"velocity_limit": torch.ones(5, dtype=torch.float64)}, "velocity_limit"),
        ({"acceleration": -1.0}, "acceleration"),
        ({"posture_weight": float("inf")}, "posture_weight"),
        ({"warm_start": torch.zeros(3, 6, dtype=torch.float64)}, "warm_start"),
        ({"centring": 1.0}, "centring"),
    ],
)
def test_bad_arguments_raise_naming_them(ur5e, change, name):
    target = ur5e.fk(ur5e.neutral_q().expand(2, 5, 6))
    arguments = {"dt": DT, **change}
    with pytest.raises(ik_layer.IKLayerError, match=name):
        ik_layer.solve_trajectory(ur5e, target, **arguments)


@pytest.mark.parametrize("shape", [(4, 4), (0, 4, 4), (7,)])
def test_targets_without_frames_are_refused(ur5e, shape):
    with pytest.raises(ik_layer.IKLayerError, match="target"):
        ik_layer.solve_trajectory(ur5e, torch.eye(4, dtype=torch.float64).expand(*shape[:-2], 4, 4) if shape[-1] == 4
                                  else torch.tensor([0.3, 0, 0.3, 0, 0, 0, 1], dtype=torch.float64), dt=DT)  # fmt: skip


def test_a_nan_frame_is_refused(ur5e):
    target = ur5e.fk(ur5e.neutral_q().expand(5, 6)).clone()
    target[3, 0, 3] = float("nan")
    with pytest.raises(ik_layer.NonFiniteError, match="target"):
        ik_layer.solve_trajectory(ur5e, target, dt=DT)


def test_retarget_talos_example_confirms_its_clip():
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "retarget_talos.py"), "--frames", "100"],
        capture_output=True, text=True, timeout=300, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]  # exits 1 unless Pinocchio confirms 99.5 %
    assert "100.00% confirmed by Pinocchio" in done.stdout
