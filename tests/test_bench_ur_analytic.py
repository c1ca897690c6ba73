"""The closed-form UR5e IK that ``bench/solve_types.py`` measures ``num_solutions`` against: every branch it gives
reaches its target (Pinocchio's FK), and the configuration a target came from is one of them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import torch

import ik_layer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from ur_analytic import ur_branches


def test_every_branch_reaches_the_target_and_the_source_is_among_them() -> None:
    robot = ik_layer.load_robot("ur5e", collision=None)
    model = robot.model
    data = model.createData()
    frame = model.getFrameId("tool0")
    q = robot.random_q((200,), generator=torch.Generator().manual_seed(0)).numpy()
    counts = []
    for source in q:
        pin.framesForwardKinematics(model, data, source)
        target = data.oMf[frame].homogeneous
        found = ur_branches(target)
        counts.append(len(found))
        for branch in found:
            pin.framesForwardKinematics(model, data, branch)
            np.testing.assert_allclose(data.oMf[frame].homogeneous, target, rtol=0, atol=1e-8)
        gap = np.remainder(found - source + np.pi, 2 * np.pi) - np.pi  # joints compared modulo a turn
        assert (np.abs(gap).max(1) < 1e-6).any()
    assert set(counts) <= {2, 4, 6, 8} and counts.count(8) > 100  # most generic targets have eight branches
    assert len(ur_branches(np.diag([1.0, 1.0, 1.0, 1.0]) + np.array([[0, 0, 0, 5.0]] + [[0] * 4] * 3))) == 0
