"""First seeds from a table: a target with no given start begins at the stored configuration whose end-effector
poses lie nearest its target, among :data:`TABLE_SIZE` configurations drawn once per robot.

A start near the answer in pose is mostly near it in joint space too: on the panda the first seeds from the table
cut the iterations of a solve by a third or more (``bench/ik_vs_peers.py``). Restarts stay uniform in the limits.

The nearest entry minimises, over the frames, the weighted squared position distance plus :data:`ROTATION_WEIGHT`
times the mean rotation weight times ``|R - R_j|_F^2``; less the terms that do not depend on the entry
(``|R|_F^2 = 3``), that is :func:`table_distance`. The engine's kernel looks the entry up as it starts a slot
(:func:`~ik_layer.engine.device.restarts.restart_functions`' ``nearest_start``), the reference path with
:func:`nearest_starts`; neither path adds host work to a solve.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ik_layer.core.problem import Problem
from ik_layer.model.chain import ChainDescription
from ik_layer.model.robot import Robot

__all__ = [
    "ROTATION_WEIGHT", "TABLE_SIZE",
    "SeedTable", "first_from_table", "nearest_starts", "seed_table", "table_distance",
]  # fmt: skip

TABLE_SIZE = 128
"""Configurations in a robot's table."""

ROTATION_WEIGHT = 0.05
"""[m^2] per unit of ``|R - R_j|_F^2`` (about ``2 theta^2`` for a small angle: 1 rad weighs as 0.32 m)."""

_SEED = 0  # of the table's draw: the same table on every device
_CHUNK = 1024  # targets per distance block of the reference's lookup


@dataclass(frozen=True)
class SeedTable:
    """A robot's stored configurations ``q`` (M, nq) and their frames' poses ``pose`` (M, F, 12): each frame's
    rotation matrix (row by row), then its position; on the robot's device, in its dtype."""

    q: Tensor
    pose: Tensor


def seed_table(robot: Robot) -> SeedTable | None:
    """``robot``'s table as it is placed (made at the first call, kept with its chain description: a robot moved
    to another dtype or device gets a table of its own), or None with a floating base (its random starts put the
    base where the first frame meets its target)."""
    if robot.floating_base:
        return None
    chains = robot.chains
    table = _tables.get(chains)
    if table is None:
        table = _tables[chains] = _draw(robot)
    return table


_tables: weakref.WeakKeyDictionary[ChainDescription, SeedTable] = weakref.WeakKeyDictionary()


def table_distance(target: Tensor, weights: Tensor, pose: Tensor) -> Tensor:
    """(n, M) how far each of the table's ``pose`` (M, F, 12) lies from each ``target`` (n, F, 4, 4) under
    ``weights`` (n, F, 6), less what does not depend on the entry:
    ``sum_frames sum_a w_a (p_ja^2 - 2 p_a p_ja) - 2 c mean(w_rot) R . R_j`` (``c`` :data:`ROTATION_WEIGHT`)."""
    rot, pos = pose[None, ..., :9], pose[None, ..., 9:]  # (1, M, F, 9), (1, M, F, 3)
    w_pos = weights[:, None, :, :3]
    w_rot = weights[:, None, :, 3:].mean(-1)
    position = (w_pos * (pos * pos - 2 * target[:, None, :, :3, 3] * pos)).sum(-1)
    rotation = (target[:, None, :, :3, :3].reshape(*target.shape[:1], 1, target.shape[1], 9) * rot).sum(-1)
    return (position - 2 * ROTATION_WEIGHT * w_rot * rotation).sum(-1)


def nearest_starts(table: SeedTable, target: Tensor, weights: Tensor) -> Tensor:
    """(n, nq) the table's configurations nearest the ``target`` poses (n, [F,] 4, 4) under ``weights``
    (n, [F,] 6), by :func:`table_distance` (the first of equals)."""
    n, frames = target.shape[0], table.pose.shape[1]
    target, weights = target.reshape(n, frames, 4, 4), weights.reshape(n, frames, 6)
    rows = [
        table_distance(target[i : i + _CHUNK], weights[i : i + _CHUNK], table.pose).argmin(-1)
        for i in range(0, max(n, 1), _CHUNK)
    ]
    return table.q[torch.cat(rows)]


def first_from_table(problem: Problem[Tensor | np.ndarray], collision: bool) -> bool:
    """Whether ``problem``'s targets start their first seed at the seed table's configuration nearest them (where
    the robot has a table): where the problem takes it (:attr:`Problem.nearest_start`), gives no first seed (warm
    start, posture that seeds) and has no collision term (``collision``: its seeds draw on the solve's free
    answers)."""
    given = problem.warm_start is not None or (problem.posture is not None and problem.posture_seeds)
    return problem.nearest_start and not given and not collision


def _draw(robot: Robot) -> SeedTable:
    """:data:`TABLE_SIZE` configurations uniform in ``robot``'s limits (drawn in float64 on the CPU, as
    :meth:`Robot.random_q` draws: the same on every device) and their frames' poses."""
    generator = torch.Generator().manual_seed(_SEED)
    lower, upper = (x.detach().to("cpu", torch.float64) for x in (robot.lower, robot.upper))
    u = torch.rand(TABLE_SIZE, lower.shape[0], generator=generator, dtype=torch.float64)
    q = torch.clamp(lower * (1 - u) + upper * u, lower, upper).to(robot.device, robot.dtype)
    with torch.no_grad():
        pose = robot.fk(q).reshape(TABLE_SIZE, -1, 4, 4)
    frames = pose.shape[1]
    pose = torch.cat((pose[..., :3, :3].reshape(TABLE_SIZE, frames, 9), pose[..., :3, 3]), -1)
    return SeedTable(q, pose.contiguous())
