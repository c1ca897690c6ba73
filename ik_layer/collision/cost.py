"""The collision term of a solve: the robot's spheres against the obstacles and, if asked, against each other.

Every pair (a robot sphere and an obstacle; two robot spheres of a self-collision pair) has a signed distance
``d`` [m], negative where they overlap. The term's cost is ``1/2 sum max(0, margin + activation - d)^2`` over the
pairs: zero once every pair is ``activation`` beyond the margin, so far-apart pairs cost nothing. Like the
secondary terms (:mod:`ik_layer.terms`) it pulls in the null space of the pose error, but it also gates success:
a configuration is collision-free when every distance is at least the margin, and only a collision-free
configuration within the pose tolerances is a success.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ik_layer.collision.model import RobotSpheres
from ik_layer.collision.packed import PackedObstacles
from ik_layer.collision.shapes import Obstacle, Scenes, as_scenes
from ik_layer.core.options import SolveOptions
from ik_layer.model.robot import Robot

__all__ = ["CollisionCost"]


@dataclass(frozen=True)
class CollisionCost:
    """The collision term of one solve on ``robot`` (see the module's docstring).

    Attributes:
        spheres: the robot's collision model.
        obstacles: the obstacles (one scene shared by every target, or one per target), on the robot's device and
            dtype.
        self_collision: whether the robot's self-collision pairs count.
        margin: the least distance of a collision-free pair [m].
        activation: how far beyond the margin a pair starts to cost [m].
    """

    spheres: RobotSpheres
    obstacles: PackedObstacles
    self_collision: bool
    margin: float
    activation: float

    @staticmethod
    def of(
        robot: Robot, obstacles: Sequence[Obstacle] | Sequence[Sequence[Obstacle]] | Scenes, options: SolveOptions
    ) -> CollisionCost | None:
        """The collision term of a solve among checked ``obstacles`` (a list of shapes: one scene for every target;
        a list of lists: one scene per target, see :func:`~ik_layer.collision.shapes.check_scenes`) with
        ``options`` (its ``self_collision``, ``collision_margin`` and ``collision_activation``), or None where
        neither obstacles nor self-collision are asked for."""
        if robot.collision is None or not (options.self_collision or any(obstacles)):  # (any form: any shape)
            return None  # (Problem refuses obstacles and self-collision for a robot without spheres)
        scenes = as_scenes(obstacles)
        packed = PackedObstacles.of(scenes, robot.dtype, robot.device)
        margin, activation = options.collision_margin, options.collision_activation
        return CollisionCost(robot.collision, packed, bool(options.self_collision), margin, activation)

    def take(self, rows: Tensor) -> CollisionCost:
        """The term of the targets ``rows`` (a 1-d index) alone: their scenes, as a batch."""
        return replace(self, obstacles=self.obstacles.take(rows))

    def reshaped(self, batch: Sequence[int]) -> CollisionCost:
        """The term with the scenes' batch shape ``batch`` (the targets'), when there is one scene per target."""
        return self if not self.obstacles.scenes else replace(self, obstacles=self.obstacles.reshaped(batch))

    def distances(self, centres: Tensor) -> Tensor:
        """Signed distances (..., P) of every pair, the robot's sphere centres ``centres`` (..., S, 3) given:
        each sphere against each shape of its scene (sphere-major, padding +inf), then the self-collision pairs.
        One scene per target: the scenes' batch leads ``centres``'s batch."""
        parts = []
        if self.obstacles:
            parts.append(self.obstacles.distances(centres, self.spheres.radii).flatten(-2))
        if self.self_collision:
            parts.append(self.spheres.pair_distances(centres))
        if not parts:
            return centres.new_zeros(*centres.shape[:-2], 0)
        return torch.cat(parts, -1)

    def min_distance(self, robot: Robot, q: Tensor) -> Tensor:
        """The least distance (...) over the pairs at ``q`` (..., nq); +inf without pairs."""
        return self.closest(robot, q)[0]

    def closest(self, robot: Robot, q: Tensor) -> tuple[Tensor, Tensor]:
        """The least distance (...) over the pairs at ``q`` (..., nq) (+inf without pairs) and its pair (..., 2)
        int64, as :attr:`ik_layer.IKResult.closest_pair` gives it: the robot's sphere, then an obstacle's index
        in its target's flattened scene (``>= 0``) or ``-1 - j`` for the robot's sphere ``j`` (self-collision); -1,
        -1 without pairs."""
        d = self.distances(self.spheres.centres(robot, q, jacobian=False)[0])
        pair = torch.full((*d.shape[:-1], 2), -1, dtype=torch.long, device=d.device)
        if not d.shape[-1]:
            return _least(d), pair
        least, index = d.min(-1)
        width = self.obstacles.width
        start = self.spheres.radii.shape[0] * width  # the self pairs' first column
        if width:
            at = (index < start) & torch.isfinite(least)
            pair[..., 0] = torch.where(at, index // width, pair[..., 0])
            obstacle = self.obstacles.obstacle_of((index % width).clamp_max(width - 1))
            pair[..., 1] = torch.where(at, obstacle, pair[..., 1])
        if self.self_collision:
            at = index >= start
            ends = self.spheres.pairs[(index - start).clamp(0, max(self.spheres.pairs.shape[0] - 1, 0))]
            pair[..., 0] = torch.where(at, ends[..., 0], pair[..., 0])
            pair[..., 1] = torch.where(at, -1 - ends[..., 1], pair[..., 1])
        return least, pair

    def cost_and_gradient(self, robot: Robot, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The cost (...), its gradient (..., dof) w.r.t. the tangent at ``q`` (..., nq), and the least distance
        (...), all detached."""
        with torch.no_grad():
            cost, gradient, d = self._evaluate(robot, q, differentiable=False)
        return cost, gradient, _least(d)

    def gradient(self, robot: Robot, q: Tensor) -> Tensor:
        """The cost's gradient (..., dof) w.r.t. the tangent at ``q`` (..., nq), differentiable in ``q`` and in
        the obstacles' tensors (the implicit layer's optimality condition holds it)."""
        return self._evaluate(robot, q, differentiable=True)[1]

    def _evaluate(self, robot: Robot, q: Tensor, differentiable: bool) -> tuple[Tensor, Tensor, Tensor]:
        """The cost (...), its gradient (..., dof) and the distances (..., P) at ``q``; ``differentiable``: the
        gradient keeps its graph (for a derivative of it), else only the centres' is taken."""
        centres, jac = self.spheres.centres(robot, q, jacobian=True)
        assert jac is not None  # asked for
        with torch.enable_grad():
            at = centres if differentiable and centres.requires_grad else centres.detach().requires_grad_(True)
            d = self.distances(at)
            cost = 0.5 * (self.margin + self.activation - d).clamp_min(0).square().sum(-1)
            # (..., S, 3): each row's cost reads its own centres only
            (along,) = torch.autograd.grad(cost.sum(), at, create_graph=differentiable)
        gradient = (along[..., None, :] @ jac).squeeze(-2).sum(-2)
        return cost.detach(), gradient, d.detach()

    def free(self, least: Tensor) -> Tensor:
        """Whether configurations of least distance ``least`` are collision-free (at least the margin)."""
        return least >= self.margin


def _least(distances: Tensor) -> Tensor:
    """The least of ``distances`` (..., P) over the pairs; +inf without pairs."""
    return distances.amin(-1) if distances.shape[-1] else distances.new_full(distances.shape[:-1], torch.inf)
