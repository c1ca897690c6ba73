"""The robot's kinematic chains as the fused kernels read them: :class:`Layout` and :class:`ChainDescription`.

:meth:`ik_layer.Robot.chains` publishes one immutable description of its current buffers; the fused FK kernel
(:mod:`ik_layer.model.fk_kernel`), the LM engine and its reach bound (:mod:`ik_layer.engine.reach`) take it and
never read the robot's private buffers. What a kernel compiles in is the :class:`Layout`; what it binds at a
launch are the description's tensors (:func:`ik_layer.model.warp_chain.bind_chain`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ik_layer.model.floating import BASE_NQ, BASE_NV

__all__ = ["ChainDescription", "Layout"]


@dataclass(frozen=True)
class Layout:
    """What a kernel compiles in about a robot.

    Attributes:
        frames: end-effector frames F (the residual has 6F rows).
        length: chain entries per frame (each frame's chain padded to the longest with still entries).
        joints: joint coordinates (limits, continuous flags).
        floating: whether a free-flyer base leads the configuration.
    """

    frames: int
    length: int
    joints: int
    floating: bool = False

    def __post_init__(self) -> None:
        ints = (self.frames, self.length, self.joints)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in ints) or not isinstance(self.floating, bool):
            raise ValueError(f"a layout takes three ints and a bool, got {self}")
        if self.frames < 1 or self.length < 1 or self.joints < 1:
            raise ValueError(f"a layout needs at least one frame, chain entry and joint, got {self}")

    @property
    def nq(self) -> int:
        """Size of a configuration."""
        return self.joints + (BASE_NQ if self.floating else 0)

    @property
    def dof(self) -> int:
        """Size of a tangent (Jacobian columns)."""
        return self.joints + (BASE_NV if self.floating else 0)


@dataclass(frozen=True)
class ChainDescription:
    """Each end-effector frame's chain from the base, ``layout.length`` entries per frame, frames in a row.

    Entry ``x`` moves with the joint value ``q_joints[cols[x]] * scale[x] + offset[x]`` (a mimic joint follows its
    leader's coordinate): its placement in the previous entry's frame is ``place_rot``, ``place_pos``, rotated about
    its ``axis`` (revolute) or slid along it (prismatic). Tensors on the robot's device, floats in its dtype.

    Attributes:
        layout: the shape compiled into kernels.
        place_rot, place_rot_k, place_rot_k2: (F L, 3, 3) placement rotation ``R``, ``R K`` and ``R K^2`` (``K``
            the axis' skew matrix): the entry's rotation at angle ``t`` is ``R + sin t R K + (1 - cos t) R K^2``.
        place_pos: (F L, 3) placement translation; slide: (F L, 3) ``R s`` for prismatic entries (zero otherwise).
        axis: (F L, 3) unit motion axis in the entry's frame; revolute: (F L,) bool.
        cols: (F L,) int64 joint coordinate of each entry; scale, offset: (F L,) its coupling.
        tip: (F, 4, 4) each frame's placement in its chain's last entry.
        lower, upper: (joints,) limits; continuous: (joints,) bool unbounded joints; full_turn: (joints,) bool
            joints a whole turn moves to the same pose (wrapped back by whole turns past a limit).
    """

    layout: Layout
    place_rot: Tensor
    place_rot_k: Tensor
    place_rot_k2: Tensor
    place_pos: Tensor
    slide: Tensor
    axis: Tensor
    revolute: Tensor
    cols: Tensor
    scale: Tensor
    offset: Tensor
    tip: Tensor
    lower: Tensor
    upper: Tensor
    continuous: Tensor
    full_turn: Tensor

    @property
    def dtype(self) -> torch.dtype:
        """The floats' dtype."""
        return self.lower.dtype

    @property
    def device(self) -> torch.device:
        """Where the tensors live."""
        return self.lower.device

    @property
    def serial_arm(self) -> bool:
        """Whether the robot is one serial arm: one end-effector frame on a fixed base, at least 6 joints, each
        joint an entry of the chain, in order (no mimic joint, none off the chain), as the manipulability term
        needs."""
        layout = self.layout
        if layout.frames != 1 or layout.floating or layout.joints < 6 or self.cols.numel() != layout.joints:
            return False
        in_order = torch.equal(self.cols.cpu(), torch.arange(layout.joints))
        return in_order and bool((self.scale == 1).all())
