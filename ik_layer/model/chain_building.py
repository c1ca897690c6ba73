"""Pinocchio model to kinematic chains: the constant tables (joint placements and axes, mimic couplings, Pinocchio
``q`` slots) that a :class:`~ik_layer.model.robot.Robot` reads once from a ``pinocchio.Model`` and registers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pinocchio as pin
import torch
from torch import Tensor

from ik_layer.model.joints import Mimic, frame_id, motion_axis

__all__ = [
    "JointSource",
    "coupling",
    "frame_placement",
    "frames_buffers",
    "full_q_index",
    "joint_sources",
    "pinocchio_indices",
    "rotating_joints",
    "turnable_coordinates",
]


def rotating_joints(model: pin.Model) -> dict[int, bool]:
    """Every joint of ``model`` by id: whether it rotates (revolute or continuous) rather than slides."""
    return {j: bool(np.linalg.norm(motion_axis(model.joints[j])[1]) > 1e-12) for j in range(1, model.njoints)}


def frames_buffers(
    model: pin.Model, frames: Sequence[str], sources: Mapping[int, JointSource], origin: pin.SE3, *, stacked: bool
) -> dict[str, Tensor]:
    """Constants of the chains to ``frames`` for :func:`~ik_layer.model.robot.chain_kinematics` and their
    couplings (``_chain_cols``, ``_chain_scale``, ``_chain_offset``): the first frame's, or all stacked on a leading
    frame dimension, each chain padded to the longest one; every chain starts at ``origin`` (the model's root in
    the base frame).

    A frame fixed to the base (a floating base's own link) has an empty chain: its placement is its tip. Chains
    keep one entry at least (the engine's kernel needs one): if every chain is empty, one still entry each.
    """
    chains = [_frame_chain(model, f) for f in frames]
    length = max(1, *(len(chain) for chain, _ in chains))
    per_frame = [
        {k: _pad(v, k, length) for k, v in _chain_buffers(model, chain, placement, origin).items()}
        | {f"_chain{k}": v for k, v in coupling(chain, sources, length).items()}
        for chain, placement in chains
    ]
    if not stacked:
        return per_frame[0]
    return {key: torch.stack([b[key] for b in per_frame]) for key in per_frame[0]}


def frame_placement(model: pin.Model, frame: str) -> pin.SE3:
    """``frame``'s placement in ``model``'s root at its neutral configuration (where no joint moves it: always)."""
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    return data.oMf[frame_id(model, frame)]


def _frame_chain(model: pin.Model, frame: str) -> tuple[list[int], pin.SE3]:
    """Joints from the base to ``frame`` (root first) and the frame's placement in the last one (in the base if
    no joint moves the frame: the chain is then empty)."""
    placement = model.frames[frame_id(model, frame)]
    return [j for j in model.supports[placement.parentJoint] if j != 0], placement.placement


class JointSource(NamedTuple):
    """A joint's value as a function of the coordinates: ``q[col] * scale + offset``."""

    col: int
    scale: float = 1.0
    offset: float = 0.0


def joint_sources(model: pin.Model, coordinates: list[str], mimic: Mapping[str, Mimic]) -> dict[int, JointSource]:
    """Every joint of ``model`` by id: its own coordinate, or its leader's for a mimic joint."""
    column = {n: i for i, n in enumerate(coordinates)}
    sources = {}
    for j in range(1, model.njoints):
        rule = mimic.get(model.names[j], Mimic(model.names[j]))
        sources[j] = JointSource(column[rule.leader], rule.multiplier, rule.offset)
    return sources


def turnable_coordinates(sources: Mapping[int, JointSource], rotates: Mapping[int, bool], coordinates: int) -> Tensor:
    """(coordinates,) bool: the joint coordinates a whole turn moves to the same pose: every joint they move
    (themselves and their mimic followers, by id in ``sources``) ``rotates``, with a whole multiplier."""
    whole = [True] * coordinates
    for j, source in sources.items():
        whole[source.col] &= rotates[j] and float(source.scale).is_integer()
    return torch.tensor(whole, dtype=torch.bool)


def coupling(joints: list[int], sources: Mapping[int, JointSource], length: int | None = None) -> dict[str, Tensor]:
    """Columns, multipliers and offsets of ``joints``, padded to ``length`` with still entries (all zero)."""
    pad = (length or len(joints)) - len(joints)
    rules = [sources[j] for j in joints] + [JointSource(0, 0.0, 0.0)] * pad
    cols, scale, offset = zip(*rules, strict=True)
    return {
        "_cols": torch.tensor(cols, dtype=torch.long),
        "_scale": torch.tensor(scale, dtype=torch.float64),
        "_offset": torch.tensor(offset, dtype=torch.float64),
    }


def _pad(x: Tensor, key: str, length: int) -> Tensor:
    """Chain constant ``x`` (n, ...) padded to ``length`` joints that do not move (identity placements, zero axes,
    not revolute); n may be 0."""
    pad = length - x.shape[0]
    if key == "_tip" or pad == 0:
        return x
    still = torch.eye(3, dtype=x.dtype).expand(pad, 3, 3) if key == "_place_rot" else x.new_zeros(pad, *x.shape[1:])
    return torch.cat((x, still))


def pinocchio_indices(model: pin.Model) -> tuple[Tensor, Tensor, Tensor]:
    """Index maps from the joints of ``model`` into Pinocchio's q: direct, cos and sin slots (-1: none)."""
    direct, cos_slot, sin_slot = [], [], []
    for j in range(1, model.njoints):
        jm = model.joints[j]
        if jm.nq == 2:
            direct.append(-1)
            cos_slot.append(jm.idx_q)
            sin_slot.append(jm.idx_q + 1)
        else:
            direct.append(jm.idx_q)
            cos_slot.append(-1)
            sin_slot.append(-1)
    direct_t, cos_t, sin_t = (torch.tensor(x, dtype=torch.long) for x in (direct, cos_slot, sin_slot))
    return direct_t, cos_t, sin_t


def _chain_buffers(model: pin.Model, chain: list[int], tip: pin.SE3, origin: pin.SE3) -> dict[str, Tensor]:
    """Constant tensors describing the chain, for :func:`~ik_layer.model.robot.chain_kinematics`, from ``origin``
    (the root's placement in the base frame)."""
    rot, rot_k, rot_k2, pos, slide, axis, revolute = [], [], [], [], [], [], []
    if not chain:  # a frame fixed to the root: its placement is its tip
        tip = origin * tip
    for index, j in enumerate(chain):
        placement = origin * model.jointPlacements[j] if index == 0 else model.jointPlacements[j]
        v, w = motion_axis(model.joints[j])
        is_revolute = bool(np.linalg.norm(w) > 1e-12)
        unit = w if is_revolute else v
        k = np.cross(np.eye(3), w)  # skew(w): row i is e_i x w; zero for prismatic joints
        r = placement.rotation
        rot.append(r)
        rot_k.append(r @ k)
        rot_k2.append(r @ k @ k)
        pos.append(placement.translation)
        slide.append(np.zeros(3) if is_revolute else r @ v)
        axis.append(unit)
        revolute.append(is_revolute)
    as_t = lambda x: torch.tensor(np.array(x), dtype=torch.float64)  # noqa: E731
    return {
        "_place_rot": as_t(rot).reshape(-1, 3, 3),
        "_place_rot_k": as_t(rot_k).reshape(-1, 3, 3),
        "_place_rot_k2": as_t(rot_k2).reshape(-1, 3, 3),
        "_place_pos": as_t(pos).reshape(-1, 3),
        "_slide": as_t(slide).reshape(-1, 3),
        "_axis": as_t(axis).reshape(-1, 3),
        "_revolute": torch.tensor(revolute, dtype=torch.bool),
        "_tip": torch.tensor(np.asarray(tip.homogeneous), dtype=torch.float64),
    }


def full_q_index(full: pin.Model, model: pin.Model) -> Tensor:
    """Positions in ``full``'s configuration of the entries of ``model``'s (a reduction of ``full``)."""
    index: list[int] = []
    for j in range(1, model.njoints):
        jm, jf = model.joints[j], full.joints[full.getJointId(model.names[j])]
        index += range(jf.idx_q, jf.idx_q + jm.nq)
    return torch.tensor(index, dtype=torch.long)
