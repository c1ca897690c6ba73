"""What a secondary cost term is: a cost of the configuration alone, pursued in the null space of the pose error.

The pose error is the solve's primary term: its rows must reach the tolerances. A secondary term ``s(q)`` never
competes with it: each LM step adds ``-gain grad s`` projected on the damped null space of the pose rows, and among
the successful seeds of one target the lowest total secondary cost wins. The implicit layer's optimality condition
adds ``P grad S`` (``P`` the projector on the null space of the weighted pose Jacobian, ``S`` the gain-weighted sum
of the terms): zero at a constrained optimum, so gradients follow the optimum of ``S`` on the target's solutions.

A term gives the same cost and gradient twice, in one file: in torch for the reference solver and the layer, and
as a warp function compiled into the engine's block kernel.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor

from ik_layer.model.chain import Layout
from ik_layer.model.robot import Robot

__all__ = ["SecondaryTerm"]


class SecondaryTerm(ABC):
    """One secondary cost term, at gain 1 (the solve scales it by its gain).

    Attributes:
        name: the term's name: its option (the gain) in the library, the CLI and HTTP, ``posture`` excepted (a
            configuration per target, at the gain :attr:`ik_layer.core.lm.LMParameters.posture_gain`).
        needs_jacobian: whether the cost reads the pose Jacobian (the kernel then walks the chains to rank).
    """

    name: str
    needs_jacobian: bool = False

    @abstractmethod
    def cost(self, robot: Robot, q: Tensor, jac: Tensor, goal: Tensor | None) -> Tensor:
        """``s(q)`` (...,) at configurations ``q`` (..., nq), with their pose Jacobian ``jac`` (..., 6F, dof) and
        the per-row ``goal`` (..., nq) where the term has one (the posture); differentiable in torch."""

    @abstractmethod
    def gradient(self, robot: Robot, q: Tensor, jac: Tensor, goal: Tensor | None) -> Tensor:
        """``grad s`` (..., dof) w.r.t. the tangent at ``q`` (a floating base's twist first), in closed form."""

    @abstractmethod
    def warp_function(self, layout: Layout, dtype: torch.dtype) -> Any:
        """The kernel's ``(q: vecq, jac: jac_t, goal: vecq, chain: Chain) -> (vect, f)``: gradient and cost."""


def joint_gradient(robot: Robot, joints: Tensor) -> Tensor:
    """A gradient over the joints (..., joints) as a tangent gradient (..., dof): a floating base's part zero."""
    base = joints.new_zeros(*joints.shape[:-1], robot.dof - joints.shape[-1])
    return torch.cat((base, joints), -1)


def joints_of(robot: Robot, x: Tensor) -> Tensor:
    """The joint coordinates (..., joints) of ``x`` (..., nq): a floating base's pose left out."""
    return x[..., x.shape[-1] - robot.lower.shape[0] :]
