"""Joint limits as the solver uses them: huge or missing limits read as "unbounded".

ROS and Gazebo models write "no limit" as ±1e16 or ±999999, MJCF gives ±inf for unlimited
joints and a URDF ``<limit>`` may omit its bounds. Taken literally, random seeds of such
joints start kilometres (or 1e15 turns) away. A limit is *unbounded-like* when
``|limit| >= UNBOUNDED_LIMIT`` (infinite included) or, for a revolute joint, when its range spans
more than ``2 * MAX_REVOLUTE_SPAN_TURNS * pi``. Then:

* a revolute joint becomes continuous: its angle is wrapped to (-pi, pi] and its limits read
  (-pi, pi]. A range of at least one turn reaches every angle, so this changes no reachable pose;
  an answer may differ from the one inside a one-sided range (e.g. [0, 1e16]) by whole turns.
* a prismatic joint keeps the part of its range nearest zero, at most ``2 * PRISMATIC_HALF_RANGE``
  wide: ±PRISMATIC_HALF_RANGE for ±1e16, [0, 2 * PRISMATIC_HALF_RANGE] for [0, 1e16].

A revolute joint whose limits lie at least one turn apart (UR arms: ±2 pi) keeps them, but it is a
*full-turn* joint (:func:`full_turns`): an angle past a limit comes back inside by whole turns, the same
pose, so the solver never pins it at a limit.

Joints whose lower and upper limits are equal cannot move; they load with a warning.
"""

from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import torch
from torch import Tensor

from ik_layer.exceptions import UnsupportedModelError

__all__ = ["MAX_REVOLUTE_SPAN_TURNS", "PRISMATIC_HALF_RANGE", "UNBOUNDED_LIMIT", "full_turns", "joint_limits"]

UNBOUNDED_LIMIT = 1e5  # |limit| [rad or m] from which a limit means "none" (±999999 and ±1e16 included)
MAX_REVOLUTE_SPAN_TURNS = 2.0  # revolute ranges wider than this many turns are unbounded (UR arms span exactly 2)
PRISMATIC_HALF_RANGE = 10.0  # [m] half width kept of an unbounded prismatic range

_SPAN_SLACK = 1e-3  # [rad] limits written as ±6.2832 are still two turns


def joint_limits(model: pin.Model, joints: list[int], revolute: list[bool]) -> tuple[Tensor, Tensor, Tensor]:
    """Lower and upper limits (float64) and continuous flags (bool) of one-dof ``joints``, one entry each.

    ``revolute[i]`` tells whether ``joints[i]`` rotates. Limits that are NaN or inverted raise an
    UnsupportedModelError naming the joints; equal limits warn.
    """
    lower, upper, continuous = [], [], []
    bad, frozen = [], []
    for j, rotates in zip(joints, revolute, strict=True):
        jm = model.joints[j]
        lo, hi, wraps = float(model.lowerPositionLimit[jm.idx_q]), float(model.upperPositionLimit[jm.idx_q]), False
        if jm.nq == 2:  # Pinocchio's continuous joint (cos, sin)
            lo, hi, wraps = -np.pi, np.pi, True
        elif lo <= hi:
            lo, hi, wraps = _effective(lo, hi, rotates)
        if not (np.isfinite([lo, hi]).all() and lo <= hi):
            bad.append(model.names[j])
        elif lo == hi:
            frozen.append(model.names[j])
        lower.append(lo)
        upper.append(hi)
        continuous.append(wraps)
    if bad:
        raise UnsupportedModelError(f"joints {bad} have invalid limits (NaN, or lower > upper) in the model")
    if frozen:
        warnings.warn(f"joints {frozen} have equal lower and upper limits: they cannot move", stacklevel=2)
    as_t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    return as_t(lower), as_t(upper), torch.tensor(continuous, dtype=torch.bool)


def full_turns(lower: Tensor, upper: Tensor, continuous: Tensor, turnable: Tensor) -> Tensor:
    """(joints,) bool: the full-turn joints, ``turnable`` ones (a whole turn changes no pose: revolute, and so are
    their mimic followers, with whole multipliers) not continuous whose limits lie at least one turn apart."""
    return turnable & ~continuous & (upper - lower >= 2 * np.pi - _SPAN_SLACK)


def _effective(lower: float, upper: float, revolute: bool) -> tuple[float, float, bool]:
    """The (lower, upper, continuous) the solver uses for limits ``lower <= upper`` of a one-dof joint."""
    huge = max(abs(lower), abs(upper)) >= UNBOUNDED_LIMIT
    if revolute and (huge or upper - lower > 2 * np.pi * MAX_REVOLUTE_SPAN_TURNS + _SPAN_SLACK):
        return -np.pi, np.pi, True
    if not huge:
        return lower, upper, False
    width = min(2 * PRISMATIC_HALF_RANGE, upper - lower)
    low = min(max(lower, -PRISMATIC_HALF_RANGE), upper - width)
    return low, low + width, False
