"""What a secondary cost term is: a cost of the configuration (and of per-target data the term may take),
pursued in the null space of the pose error.

The pose error is the solve's primary term: its rows must reach the tolerances. A secondary term ``s(q)`` never
competes with it: each LM step adds ``-gain grad s`` projected on the damped null space of the pose rows, and among
the successful seeds of one target the lowest total secondary cost wins. The implicit layer's optimality condition
adds ``P grad S`` (``P`` the projector on the null space of the weighted pose Jacobian, ``S`` the gain-weighted sum
of the terms): zero at a constrained optimum, so gradients follow the optimum of ``S`` on the target's solutions.

A term gives the same cost and gradient twice, in one file: in torch for the reference solver and the layer, and
as a warp function compiled into the engine's block kernel. A term may take ``data_size`` reals per target (the
posture's: a configuration): the solve's ``terms`` argument (``"terms"`` over HTTP) brings them with its gain, the
engine holds them in each slot's row, and the term reads them in both forms.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
import warp as wp
from torch import Tensor

from ik_layer.model.chain import Layout
from ik_layer.model.robot import Robot
from ik_layer.model.warp_chain import warp_types

__all__ = ["SecondaryTerm", "TermInput", "data_vector"]


class SecondaryTerm(ABC):
    """One secondary cost term, at gain 1 (the solve scales it by its gain).

    Attributes:
        name: the term's name, as the ``terms`` argument of a solve and HTTP's ``"terms"`` name it (the built-in
            terms have arguments of their own: ``posture``, and the options ``centring`` and ``manipulability``).
        needs_jacobian: whether the cost reads the pose Jacobian (the kernel then walks the chains to rank).
    """

    name: str
    needs_jacobian: bool = False

    def data_size(self, layout: Layout) -> int:
        """The reals of per-target data the term takes for a robot of ``layout`` (0: none)."""
        return 0

    def check_data(self, robot: Robot, data: Tensor) -> None:  # noqa: B027 (a hook: no check by default)
        """Refuse per-target ``data`` (n, data_size) the term cannot use, with an
        :class:`~ik_layer.IKLayerError` naming the term (the values are known finite)."""

    @abstractmethod
    def cost(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        """``s(q)`` (...,) at configurations ``q`` (..., nq), with their pose Jacobian ``jac`` (..., 6F, dof) and
        the per-row ``data`` (..., data_size) where the term takes some; differentiable in torch."""

    @abstractmethod
    def gradient(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        """``grad s`` (..., dof) w.r.t. the tangent at ``q`` (a floating base's twist first), in closed form."""

    @abstractmethod
    def warp_function(self, layout: Layout, dtype: torch.dtype) -> Any:
        """The kernel's ``(q: vecq, jac: jac_t, data: vecd, chain: Chain) -> (vect, f)``: gradient and cost, with
        ``vecd`` the term's :func:`data_vector` (see :func:`~ik_layer.model.kernel_types.kernel_types`)."""


@dataclass(frozen=True)
class TermInput:
    """A term's part in one solve: its ``gain`` (> 0) and its per-target ``data`` (n, data_size), None for a term
    without data."""

    gain: float
    data: Tensor | None = None


def data_vector(term: SecondaryTerm, layout: Layout, dtype: torch.dtype) -> Any:
    """The warp vector the kernel hands ``term`` its data in (one real for a term without data)."""
    return _vector(max(1, term.data_size(layout)), dtype)


@functools.cache
def _vector(size: int, dtype: torch.dtype) -> Any:
    return wp.types.vector(size, warp_types(dtype)[0])


def joint_gradient(robot: Robot, joints: Tensor) -> Tensor:
    """A gradient over the joints (..., joints) as a tangent gradient (..., dof): a floating base's part zero."""
    base = joints.new_zeros(*joints.shape[:-1], robot.dof - joints.shape[-1])
    return torch.cat((base, joints), -1)


def joints_of(robot: Robot, x: Tensor) -> Tensor:
    """The joint coordinates (..., joints) of ``x`` (..., nq): a floating base's pose left out."""
    return x[..., x.shape[-1] - robot.lower.shape[0] :]
