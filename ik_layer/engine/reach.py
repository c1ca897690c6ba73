"""A provable bound on a robot's reach, and the targets it rules out.

Every joint of a frame's chain after the first moving one sits at its placement translation from its
parent, so the frame lies within ``radius`` of the first joint's origin (``centre``), where ``radius``
is the sum of the norms of the placement translations from the second joint to the frame, plus the
largest travel ``max(|lower|, |upper|)`` of every prismatic joint (the first one's too; a mimic joint's
through its multiplier and offset). A target with a frame whose position, over its weighted axes, lies
farther than that frame's ``radius`` plus the position tolerance from its ``centre`` can never be solved:
the engine gives it a short budget (see :class:`~ik_layer.engine.scheduler.Engine`). A floating base
reaches everywhere: it rules nothing out.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ik_layer.engine.slots import Array
from ik_layer.model.chain import ChainDescription

__all__ = ["Reach", "reach"]

_SLACK = 1e-5  # relative margin of the bound over the rounding of float32 kinematics


@dataclass(frozen=True)
class Reach:
    """The balls that hold every position each end-effector frame can take.

    Attributes:
        centre: (F, 3) float64 origins of the frames' first moving joints, in the base frame [m].
        radius: (F,) upper bounds of the distance from ``centre`` to the frame [m] (inf for unbounded prismatic
            joints or a floating base).
        rounding: (F,) margins added to ``radius`` before ruling a target out, over the rounding of float32
            kinematics.
    """

    centre: np.ndarray
    radius: np.ndarray
    rounding: np.ndarray

    @functools.cached_property
    def bounded(self) -> bool:
        """Whether any frame's ``radius`` is finite (else no target is ruled out)."""
        return bool(np.isfinite(self.radius).any())

    def beyond(self, target: Array, weights: Array, position_tolerance: float) -> np.ndarray:
        """(n,) bool on the host: the targets (n, [F,] 4, 4) that no configuration meets within ``position_tolerance``.

        Distances are taken over the weighted position axes (``weights`` (n, [F,] 6)), as the solver measures errors,
        in float64, where the targets are (numpy arrays or tensors on any device: only the answer is copied).
        """
        n, frames = target.shape[0], len(self.radius)
        if not self.bounded:
            return np.zeros(n, dtype=bool)
        if n == 1 and frames == 1 and isinstance(target, np.ndarray) and isinstance(weights, np.ndarray):
            return np.array([self._beyond_one(target, weights, position_tolerance)])
        position = target.reshape(n, frames, 4, 4)[..., :3, 3]
        weighted = weights.reshape(n, frames, 6)[..., :3] > 0
        offset: Array
        if isinstance(position, np.ndarray):  # (numpy subtracts in float64, float64 centres from any reals)
            offset = np.where(weighted, position - self.centre, 0.0)
        else:
            assert isinstance(weighted, Tensor)
            offset = (position.double() - _like(self.centre, position)) * weighted.double()
        squared = offset * offset
        distance = squared[..., 0] + squared[..., 1] + squared[..., 2]  # the same sum on every device
        far = _host(distance > _like(self._squared_limit(position_tolerance), distance))
        return far[:, 0] if frames == 1 else np.asarray(far.any(axis=-1))  # (n,): an array, as numpy's stubs miss

    def _beyond_one(self, target: np.ndarray, weights: np.ndarray, position_tolerance: float) -> bool:
        """:meth:`beyond` of one host target of one frame, in plain floats: the same float64 arithmetic, without the
        arrays' per-call costs."""
        rows, weight = target.reshape(4, 4).tolist(), weights.reshape(6).tolist()
        offset = [rows[axis][3] - self._centre_floats[axis] if weight[axis] > 0 else 0.0 for axis in range(3)]
        distance = offset[0] * offset[0] + offset[1] * offset[1] + offset[2] * offset[2]
        return distance > float(self._squared_limit(position_tolerance)[0])

    @functools.cached_property
    def _centre_floats(self) -> list[float]:
        """The first frame's ``centre`` as floats."""
        return self.centre[0].tolist()

    def _squared_limit(self, position_tolerance: float) -> np.ndarray:
        """(F,) the squared distances beyond which a frame's target is out of reach, for ``position_tolerance``."""
        known = self._squared_limits.get(position_tolerance)
        if known is None:
            limit = self.radius + self.rounding + position_tolerance
            known = self._squared_limits[position_tolerance] = limit * limit
        return known

    @functools.cached_property
    def _squared_limits(self) -> dict[float, np.ndarray]:
        """:meth:`_squared_limit` by tolerance, as computed."""
        return {}


def _like(values: np.ndarray, like: Array) -> Array:
    """Host ``values`` of the kind of ``like``: as they are, or a tensor on its device."""
    return torch.from_numpy(values).to(like.device) if isinstance(like, Tensor) else values


def _host(x: Array) -> np.ndarray:
    """``x`` as a numpy array on the host."""
    return x.cpu().numpy() if isinstance(x, Tensor) else x


def reach(chains: ChainDescription) -> Reach:
    """The :class:`Reach` of a robot's ``chains``: the bound of :mod:`ik_layer.engine.reach`'s docstring, computed
    in float64 on the CPU."""
    layout = chains.layout
    frames, length = layout.frames, layout.length
    place = chains.place_pos.detach().double().cpu().reshape(frames, length, 3)
    tip = chains.tip.detach().double().cpu()[:, :3, 3]
    cols = chains.cols.cpu().reshape(frames, length)
    scale, offset = (x.detach().double().cpu().reshape(frames, length) for x in (chains.scale, chains.offset))
    prismatic = ~chains.revolute.cpu().reshape(frames, length)
    lower, upper = chains.lower.double().cpu()[cols], chains.upper.double().cpu()[cols]
    travel = torch.maximum((lower * scale + offset).abs(), (upper * scale + offset).abs())
    links = place[:, 1:].norm(dim=-1).sum(-1) + tip.norm(dim=-1)
    radius = (links + torch.where(prismatic, travel, 0.0).sum(-1)).numpy()
    if layout.floating:
        radius = np.full(frames, np.inf)
    centre = place[:, 0].numpy()
    rounding = _SLACK * (radius + np.linalg.norm(centre, axis=-1))
    return Reach(centre=centre, radius=radius, rounding=rounding)
