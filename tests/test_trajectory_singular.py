"""Issue 43's ur5e clips at acceleration 0: the elbow passing through its straight (singular) position.

bench/trajectory.py's ur5e clips (joint paths at 0.8 v_max, seed 1) have frames where the elbow straightens; there
the greedy frame (the solution nearest its pull point) may land on the other elbow branch, which cannot follow the
path within the velocity limits, and later frames fail. A 6-joint arm has no self-motion for the look-ahead's search;
the momentum plan (the clip's greedy frames solved again with an acceleration cost, which carries the elbow through)
re-plans such clips, re-solved inside the velocity boxes.
"""

from __future__ import annotations

import pytest
import torch

import ik_layer
from ik_layer.trajectory import solve as trajectory_solve
from ik_layer.trajectory.problem import joint_difference, velocity_limits
from ik_layer.trajectory.synthetic import joint_paths
from tests.test_trajectory_reachability import DT, assert_clip_met

# bench/trajectory.py's ur5e clip 29 (seed 1), its first 120 frames: greedily, frames 64-65 fail; the same clips
# with seed 4, clip 10, frames 200-319: greedily frames 249-254 fail, and a momentum of 10 does not carry it through.
CLIPS = [(1, 29, 0), (4, 10, 200)]


def _clip(seed: int, clip: int, first: int) -> tuple[ik_layer.Robot, torch.Tensor]:
    robot = ik_layer.load_robot("ur5e")
    path = joint_paths(robot, 32, 500, DT, speed=0.8, generator=torch.Generator().manual_seed(seed))
    return robot, path[clip, first : first + 120]


@pytest.mark.parametrize(("seed", "clip", "first"), CLIPS)
def test_the_greedy_pass_alone_fails_frames_of_the_clip(
    monkeypatch: pytest.MonkeyPatch, seed: int, clip: int, first: int
) -> None:
    monkeypatch.setattr(trajectory_solve, "_look_ahead", lambda *args, **kwargs: None)  # the greedy pass alone
    robot, path = _clip(seed, clip, first)
    result = ik_layer.solve_trajectory(robot, robot.fk(path), dt=DT, warm_start=path[0], acceleration=0.0)
    assert not bool(result.success.all())
    assert float(result.velocity_ratio.max()) <= 1.0


@pytest.mark.parametrize(("seed", "clip", "first"), CLIPS)
def test_the_momentum_plan_meets_every_frame_of_a_ur5e_clip(seed: int, clip: int, first: int) -> None:
    """Pinocchio puts every frame within the tolerances, every step within the velocity limits, every joint inside
    its limits; the replaced clip's frames are all ``bounded``."""
    robot, path = _clip(seed, clip, first)
    limit = velocity_limits(robot)
    assert float((joint_difference(robot, path[1:], path[:-1]).abs() / (limit * DT)).max()) <= 0.8
    result = ik_layer.solve_trajectory(
        robot, robot.fk(path), dt=DT, warm_start=path[0], acceleration=0.0, generator=torch.Generator().manual_seed(0)
    )
    assert result.success.all() and result.bounded.all()
    assert_clip_met(robot, result.q, path)
