"""What every solver answers: :class:`IKResult`, and the worst-frame error measure its errors use."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["IKResult", "frame_errors"]


@dataclass(frozen=True)
class IKResult:
    """Solutions of a batch of IK problems; every field has the targets' batch shape ``(...)``.

    Attributes:
        q: (..., nq) best configuration found, inside the joint limits (a floating base first, see
            :class:`~ik_layer.Robot`; nq == dof without one).
        success: (...) bool, both errors within their tolerances (at every end-effector frame).
        position_error: (...) [m] norm of the weighted position error axes (the worst frame's).
        orientation_error: (...) [rad] norm of the weighted rotation-vector error axes (the worst frame's).
        iterations: (...) int64, iterations until success (the budget used if it failed).
    """

    q: Tensor
    success: Tensor
    position_error: Tensor
    orientation_error: Tensor
    iterations: Tensor

    def reshaped(self, batch: torch.Size | tuple[int, ...]) -> IKResult:
        """This result of flat rows with every field reshaped to the targets' batch shape ``batch``."""
        return IKResult(
            q=self.q.reshape(*batch, self.q.shape[-1]),
            success=self.success.reshape(batch),
            position_error=self.position_error.reshape(batch),
            orientation_error=self.orientation_error.reshape(batch),
            iterations=self.iterations.reshape(batch),
        )


def frame_errors(error: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """Position [m] and orientation [rad] error norms (...) over the weighted axes, the worst frame's.

    ``error`` and ``weights`` (..., 6F) hold F frames' ``[p; rotation vector]`` errors and their weights; an axis
    of zero weight is left out (as the fused kernel's ``errors_of``).
    """
    masked = (error * (weights > 0)).unflatten(-1, (-1, 6))
    return masked[..., :3].norm(dim=-1).amax(-1), masked[..., 3:].norm(dim=-1).amax(-1)
