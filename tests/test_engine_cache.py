"""The default engines of ``ik_layer.solve``: one per robot, visible, bounded and clearable; chain descriptions."""

from __future__ import annotations

import subprocess
import sys

import torch

import ik_layer
from ik_layer.api import EngineCache


def test_solve_keeps_one_visible_engine_per_robot_and_clear_frees_it():
    robot = ik_layer.load_robot("panda", dtype=torch.float64)
    ik_layer.engines.drop(robot)
    assert robot not in ik_layer.engines
    q = robot.random_q(3, generator=torch.Generator().manual_seed(1))
    first = ik_layer.solve(robot, robot.fk(q), generator=torch.Generator().manual_seed(2))
    assert robot in ik_layer.engines
    engine, _ = ik_layer.engines.get(robot, 1)
    again = ik_layer.solve(robot, robot.fk(q), generator=torch.Generator().manual_seed(2))
    assert ik_layer.engines.get(robot, 1)[0] is engine  # reused, not rebuilt
    assert torch.equal(first.q, again.q) and bool(first.success.all())
    ik_layer.engines.drop(robot)
    assert robot not in ik_layer.engines


def test_engine_cache_holds_the_most_recently_used_robots_only():
    cache = EngineCache(max_robots=2)
    robots = [ik_layer.load_robot(name) for name in ("panda", "ur5e", "iiwa14")]
    for robot in robots:
        cache.get(robot, 4)
    assert len(cache) == 2 and robots[0] not in cache and robots[1] in cache and robots[2] in cache
    cache.get(robots[1], 4)  # used again: the newest
    cache.get(robots[0], 4)
    assert robots[2] not in cache and robots[1] in cache
    bigger, _ = cache.get(robots[1], 5000)
    assert bigger.slots.capacity >= 5000
    cache.clear()
    assert len(cache) == 0


def test_the_chain_description_follows_the_robot_to_another_dtype():
    robot = ik_layer.load_robot("ur5e", dtype=torch.float64)
    before = robot.chains
    assert robot.chains is before  # made once per placement
    assert before.layout.joints == robot.dof and before.lower.dtype == torch.float64
    robot.to(torch.float32)
    after = robot.chains
    assert after is not before and after.dtype == torch.float32 and after.place_rot.dtype == torch.float32
    q = robot.random_q(4, generator=torch.Generator().manual_seed(3))
    with torch.enable_grad():
        reference = robot.fk(q.requires_grad_())  # the torch kinematics
    assert torch.allclose(robot.fk(q.detach()), reference.detach(), atol=1e-5)  # the fused kernel, rebound


def test_the_library_changes_no_warp_setting():
    # A fresh process: kernels already loaded here would print nothing whatever the library did.
    script = """
import torch, warp as wp
wp.config.log_level = wp.LOG_INFO  # the user's choice, kept by import, init and every solve
import ik_layer
robot = ik_layer.load_robot("iiwa14")
q = robot.random_q(2, generator=torch.Generator().manual_seed(4))
assert bool(ik_layer.solve(robot, robot.fk(q)).success.all())
assert wp.config.log_level == wp.LOG_INFO
print("solved")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("solved")
    assert "Module" not in done.stdout  # no compile or load notices from the library's kernels
