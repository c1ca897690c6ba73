"""A provable bound on a robot's reach, and the targets it rules out.

Every joint of the chain after the first moving one sits at its placement translation from its
parent, so the tip lies within ``radius`` of the first joint's origin (``centre``), where ``radius``
is the sum of the norms of the placement translations from the second joint to the tip, plus the
largest travel ``max(|lower|, |upper|)`` of every prismatic joint (the first one's too). A target whose
position, over its weighted axes, lies farther than ``radius`` plus the position tolerance from
``centre`` can never be solved: the engine gives it a short budget (see
:class:`~ik_layer.engine.scheduler.Engine`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ik_layer.kinematics import Robot

__all__ = ["Reach", "reach"]

_CACHE = "_reach_bound"  # the robot's attribute holding its Reach (the geometry does not move with .to())
_SLACK = 1e-5  # relative margin of the bound over the rounding of float32 kinematics


@dataclass(frozen=True)
class Reach:
    """The ball that holds every position the chain's tip can take.

    Attributes:
        centre: (3,) float64 origin of the chain's first moving joint, in the base frame [m].
        radius: upper bound of the distance from ``centre`` to the tip [m] (inf for unbounded prismatic joints).
        rounding: margin added to ``radius`` before ruling a target out, over the rounding of float32 kinematics.
    """

    centre: np.ndarray
    radius: float
    rounding: float

    def beyond(self, target: Tensor, weights: Tensor, position_tolerance: float) -> np.ndarray:
        """(n,) bool: the targets (n, 4, 4) that no configuration meets within ``position_tolerance``.

        Distances are taken over the weighted position axes (``weights`` (n, 6)), as the solver measures errors.
        """
        host = target.device.type == "cpu"
        offset = (target.detach() if host else target.detach().cpu()).numpy()[:, :3, 3] - self.centre
        offset *= (weights.detach() if host else weights.detach().cpu()).numpy()[:, :3] > 0
        limit = self.radius + self.rounding + position_tolerance
        offset *= offset
        return offset.sum(axis=1) > limit * limit


def reach(robot: Robot) -> Reach:
    """The :class:`Reach` of ``robot``, computed once per robot from its chain buffers (cached on the robot)."""
    cached = robot.__dict__.get(_CACHE)
    if cached is None:
        cached = robot.__dict__[_CACHE] = _compute(robot)
    return cached


def _compute(robot: Robot) -> Reach:
    """The bound of :mod:`ik_layer.engine.reach`'s docstring, in float64 on the CPU."""
    place = robot._place_pos.detach().double().cpu()
    tip = robot._tip.detach().double().cpu()[:3, 3]
    cols = robot._chain_cols.cpu()
    prismatic = ~robot._revolute.cpu()
    travel = torch.maximum(robot.lower.double().cpu().abs(), robot.upper.double().cpu().abs())[cols]
    links = place[1:].norm(dim=-1).sum() + tip.norm()
    radius = float(links + travel[prismatic].sum())
    centre = place[0].numpy()
    return Reach(centre=centre, radius=radius, rounding=_SLACK * (radius + float(np.linalg.norm(centre))))
