"""Issue 43's panda clips: the frames the greedy frame-by-frame solve fails are out of reach inside their velocity box.

bench/trajectory.py's panda clips (joint paths at 0.8 v_max, seed 2) have frames that the greedy pass of
solve_trajectory (each frame nearest its pull point, without the look-ahead) answers with ``success=False``. This
pins down why: the path that made the targets is within 0.8 v_max and the joint limits (so
every target is reachable at that speed along it), yet from the answer before a failed frame no configuration inside
the frame's box (``|q - q_prev| <= v_max dt``, the joint limits) meets the tolerances. SciPy's bounded least squares
from several seeds does no better than the answer: the box solve is at the box's optimum, and the failure is the
configuration the earlier frames chose (7 joints, a 6-D target: the nearest solution at each frame drifts along the
arm's self-motion, here towards a straight elbow, where following the path needs joints faster than their limits).
The look-ahead (ik_layer.trajectory.lookahead) re-plans such clips whole: with it every frame is met.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer.model.lie import pose_error
from ik_layer.trajectory import solve as trajectory_solve
from ik_layer.trajectory.problem import joint_difference, velocity_limits
from ik_layer.trajectory.synthetic import joint_paths

optimize = pytest.importorskip("scipy.optimize")

DT = 0.01


def test_a_failed_panda_frame_is_out_of_reach_inside_its_box(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trajectory_solve, "_look_ahead", lambda *args, **kwargs: None)  # the greedy pass alone
    robot = ik_layer.load_robot("panda")
    path = joint_paths(robot, 32, 500, DT, speed=0.8, generator=torch.Generator().manual_seed(2))[7, :46]
    limit = velocity_limits(robot)
    assert float((joint_difference(robot, path[1:], path[:-1]).abs() / (limit * DT)).max()) <= 0.8
    assert bool(((path >= robot.lower) & (path <= robot.upper)).all())
    target = robot.fk(path)
    result = ik_layer.solve_trajectory(robot, target, dt=DT, warm_start=path[0])
    assert float(result.velocity_ratio.max()) <= 1.0
    failed = (~result.success).nonzero().squeeze(-1).tolist()
    assert failed and result.bounded[failed].all()  # bench/trajectory.py's clip 7 fails from frame 44 on
    t = failed[0]
    prev, step = result.q[t - 1], limit * DT
    low = torch.maximum(robot.lower, prev - step).numpy()
    high = torch.minimum(robot.upper, prev + step).numpy()

    def residual(x: np.ndarray) -> np.ndarray:
        return pose_error(target[t], robot.fk(torch.from_numpy(x)))[:].numpy()

    seeds = [prev.numpy(), path[t].numpy(), result.q[t].numpy()]
    seeds += list(low + (high - low) * np.random.default_rng(0).random((4, 7)))
    best = np.inf
    for seed in seeds:
        fit = optimize.least_squares(
            residual, np.clip(seed, low, high), bounds=(low, high), xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=200
        )
        best = min(best, float(np.linalg.norm(residual(fit.x)[:3])))
    # No configuration in the box is within 1e-4 m; the answer is as close as the box allows.
    assert best > 1e-4
    assert float(result.position_error[t]) == pytest.approx(best, rel=1e-3)
    # Unbounded, the frame's nearest solution is there, one step away at more than v_max.
    free = optimize.least_squares(residual, prev.numpy(), xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=200)
    assert np.linalg.norm(residual(free.x)) < 1e-9
    assert float((torch.from_numpy(free.x) - prev).abs().div(step).max()) > 1.0


@pytest.mark.parametrize("acceleration", [0.0, 10.0])
def test_the_look_ahead_meets_every_frame_of_the_clip(acceleration: float) -> None:
    """The same clip (100 frames, failing from frame 44 greedily), re-planned whole: Pinocchio puts every frame within
    the tolerances and every step within the velocity limits."""
    robot = ik_layer.load_robot("panda")
    path = joint_paths(robot, 32, 500, DT, speed=0.8, generator=torch.Generator().manual_seed(2))[7, :100]
    result = ik_layer.solve_trajectory(
        robot, robot.fk(path), dt=DT, warm_start=path[0], acceleration=acceleration,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    assert result.success.all() and result.bounded.all()  # every frame met, all of them re-solved from the plan
    assert_clip_met(robot, result.q, path)


def assert_clip_met(robot: ik_layer.Robot, q: torch.Tensor, path: torch.Tensor) -> None:
    """Every frame of answers ``q`` (T, nq) reaches the pose of ``path`` (T, nq) at that frame by Pinocchio's FK (1e-4
    m, 1e-3 rad), every step (from ``path[0]``, the warm start) within the velocity limits, every joint inside its
    limits."""
    pin = pytest.importorskip("pinocchio")
    steps = joint_difference(robot, q, torch.cat((path[:1], q[:-1])))
    assert bool((steps.abs() <= velocity_limits(robot) * DT).all())
    assert bool(((q >= robot.lower) & (q <= robot.upper)).all())
    model, data = robot.model, robot.model.createData()
    frame = model.getFrameId(robot.ee_frame)
    for configuration, goal in zip(robot.to_pinocchio_q(q).numpy(), robot.fk(path).numpy(), strict=True):
        pin.framesForwardKinematics(model, data, configuration)
        reached = data.oMf[frame]
        assert np.linalg.norm(reached.translation - goal[:3, 3]) <= 1e-4
        assert np.linalg.norm(pin.log3(goal[:3, :3] @ reached.rotation.T)) <= 1e-3
