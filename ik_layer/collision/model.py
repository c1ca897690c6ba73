"""A robot's collision model: its spheres placed on its links, and the pairs of them checked for self-collision.

Self-collision checks every pair of spheres on two links, except link pairs that cannot move apart or are listed
as ignored: links on one rigid body or joined by one joint (adjacent), pairs the sphere file (its
``self_collision_ignore``) or an SRDF (its ``disable_collisions``) names, and pairs already in contact at the
neutral configuration (MoveIt's "Default" pairs: the covering spheres of neighbouring links overlap there).

A model with more than :data:`MAX_SELF_PAIRS` such sphere pairs still loads: it checks world obstacles only (logged
once at INFO on the ``ik_layer`` logger), and a solve asking for self-collision is refused
(:meth:`RobotSpheres.check_self_collision`).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection

import pinocchio as pin
import torch
from torch import Tensor, nn

from ik_layer.collision.spheres import LinkSpheres, link_pair
from ik_layer.exceptions import IKLayerError
from ik_layer.model.joints import frame_id
from ik_layer.model.robot import Robot

__all__ = ["MAX_SELF_PAIRS", "RobotSpheres"]

MAX_SELF_PAIRS = 1 << 16
"""The most sphere pairs a collision model checks for self-collision."""

_log = logging.getLogger("ik_layer")


class RobotSpheres(nn.Module):
    """Spheres fixed to a robot's links (moved with the robot by ``.to()``), and the pairs checked for
    self-collision.

    Attributes:
        links: the links holding spheres, each once, in the order of their first sphere.
        sphere_links: each sphere's link name.
        ignored: the link pairs (sorted names) never checked for self-collision.
        pair_count: the sphere pairs self-collision checks; more than :data:`MAX_SELF_PAIRS` leaves :attr:`pairs`
            empty (world obstacles only).
        centers: (S, 3) each sphere's centre in its link's frame [m].
        radii: (S,) each sphere's radius [m].
        link_index: (S,) long, each sphere's link in :attr:`links`.
        pairs: (P, 2) long, the sphere pairs ``(i, j)``, ``i < j``, checked for self-collision.
    """

    centers: Tensor
    radii: Tensor
    link_index: Tensor
    pairs: Tensor

    def __init__(self, robot: Robot, spheres: LinkSpheres, ignore: Collection[tuple[str, str]] = ()) -> None:
        super().__init__()
        if len(spheres) == 0:
            raise IKLayerError("a collision model needs at least one sphere")
        self.links = tuple(dict.fromkeys(spheres.links))
        self.sphere_links = spheres.links
        index = torch.tensor([self.links.index(link) for link in spheres.links], dtype=torch.long)
        self.register_buffer("centers", spheres.centers.to(robot.device, robot.dtype))
        self.register_buffer("radii", spheres.radii.to(robot.device, robot.dtype))
        self.register_buffer("link_index", index.to(robot.device))
        given = {link_pair(*pair) for pair in itertools.chain(spheres.ignore, ignore)}
        ignored = given | _rigid_pairs(robot.model, self.links)
        of_link = [torch.nonzero(self.link_index == k).flatten() for k in range(len(self.links))]
        apart = [
            (a, b) for a, b in itertools.combinations(range(len(self.links)), 2) if self._pair(a, b) not in ignored
        ]
        centres = self.centres(robot, robot.neutral_q(), jacobian=False)[0]
        touching = {(a, b) for a, b in apart if self._overlap(centres, of_link[a], of_link[b])}
        self.ignored = frozenset(ignored | {self._pair(a, b) for a, b in touching})
        checked = [(a, b) for a, b in apart if (a, b) not in touching]
        self.pair_count = sum(len(of_link[a]) * len(of_link[b]) for a, b in checked)
        if self.pair_count > MAX_SELF_PAIRS:
            _log.info("%s: %s; its collision spheres check world obstacles only", robot.name, self._too_many())
            checked = []
        rows = [torch.cartesian_prod(of_link[a], of_link[b]).reshape(-1, 2) for a, b in checked]
        pairs = torch.cat(rows) if rows else self.link_index.new_zeros(0, 2)
        self.register_buffer("pairs", pairs.sort(dim=1).values)

    def __len__(self) -> int:
        return len(self.sphere_links)

    def extra_repr(self) -> str:
        return f"spheres={len(self)}, links={len(self.links)}, self_pairs={self.pairs.shape[0]}"

    def centres(self, robot: Robot, q: Tensor, *, jacobian: bool) -> tuple[Tensor, Tensor | None]:
        """The spheres' centres (..., S, 3) in the base frame (the world with a floating base) at ``q`` (..., nq),
        and if asked their Jacobians (..., S, 3, dof) (columns as :meth:`Robot.fk_jacobian`'s); unchecked."""
        pose, jac = robot.kinematics(q, jacobian=jacobian, frames=self.links)
        pose = pose.index_select(-3, self.link_index)  # (..., S, 4, 4)
        offset = (pose[..., :3, :3] @ self.centers[..., None]).squeeze(-1)  # R c: the centre from the link origin
        centres = pose[..., :3, 3] + offset
        if jac is None:
            return centres, None
        jac = jac.index_select(-3, self.link_index)  # (..., S, 6, dof)
        linear, angular = jac[..., :3, :], jac[..., 3:, :]
        return centres, linear + torch.linalg.cross(angular, offset[..., None].expand_as(angular), dim=-2)

    def check_self_collision(self) -> None:
        """Raise an IKLayerError where self-collision cannot be checked: more than :data:`MAX_SELF_PAIRS` sphere
        pairs (world obstacles still are)."""
        if self.pair_count > MAX_SELF_PAIRS:
            raise IKLayerError(f"self_collision: {self._too_many()}")

    def self_distances(self, robot: Robot, q: Tensor) -> Tensor:
        """Distances (..., P) between the spheres of each self-collision pair at ``q`` (..., nq): negative where they
        overlap."""
        centres = self.centres(robot, q, jacobian=False)[0]
        return self.pair_distances(centres)

    def pair_distances(self, centres: Tensor) -> Tensor:
        """Distances (..., P) between the spheres of each self-collision pair, their centres ``centres`` (..., S, 3)."""
        a, b = self.pairs[:, 0], self.pairs[:, 1]
        gap = centres.index_select(-2, a) - centres.index_select(-2, b)
        return gap.norm(dim=-1) - self.radii[a] - self.radii[b]

    def _pair(self, a: int, b: int) -> tuple[str, str]:
        """The link pair (sorted names) of links ``a`` and ``b`` of :attr:`links`."""
        return link_pair(self.links[a], self.links[b])

    def _overlap(self, centres: Tensor, a: Tensor, b: Tensor) -> bool:
        """Whether a sphere of ``a`` overlaps one of ``b`` (spheres' indices), their centres ``centres`` (S, 3)."""
        gap = (centres[a, None] - centres[None, b]).norm(dim=-1) - self.radii[a, None] - self.radii[None, b]
        return bool((gap < 0).any())

    def _too_many(self) -> str:
        return (
            f"{self.pair_count} sphere pairs to check for self-collision, more than {MAX_SELF_PAIRS}: use fewer "
            "spheres or ignore link pairs (self_collision_ignore)"
        )


def _rigid_pairs(model: pin.Model, links: Collection[str]) -> set[tuple[str, str]]:
    """The pairs of ``links`` on one rigid body or on the two bodies of one joint (``model``'s joints: those the
    robot moves, a locked joint is rigid)."""
    joint = {link: model.frames[frame_id(model, link)].parentJoint for link in links}
    return {
        link_pair(a, b)
        for a, b in itertools.combinations(links, 2)
        if joint[a] == joint[b] or model.parents[joint[a]] == joint[b] or model.parents[joint[b]] == joint[a]
    }
