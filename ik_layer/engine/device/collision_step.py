"""The collision term in the LM kernel: the robot's spheres against a request's obstacles and against each other.

The same term as :class:`ik_layer.collision.cost.CollisionCost` (its cost, gradient and least distance), for one
configuration per thread:

1. the links carrying spheres are placed by a walk of their chains (:meth:`ik_layer.Robot.chains_to`, compiled in
   as a second :class:`~ik_layer.model.chain.Layout`, with the number of spheres: :class:`SphereLayout`); a
   sphere's centre is its link's pose applied to its offset;
2. each pair (a sphere and an obstacle of the slot's scene; a self-collision pair when the slot asks) closer than
   ``margin + activation`` adds ``1/2 (margin + activation - d)^2`` to the cost and pushes its spheres along the
   distance's gradient;
3. the pushes add up to one wrench per link (force, and moment about the base frame's origin), and ``J^T`` of each
   link's wrench is a second walk of its chain: a revolute entry of axis ``a`` through ``o`` reads
   ``a . (moment - o x force)``, a prismatic one ``a . force``, a floating base the wrench itself.

Obstacles live in a table shared by the slots (:class:`~ik_layer.engine.obstacles.ObstacleTable`); a slot reads the
rows ``[start, start + count)``. Every obstacle is a *round* shape (the points within ``radius`` of the segment from
``pos`` to ``pos + extent``: a sphere when ``extent`` is zero, else a capsule) or a *box* (centre ``pos``, axes the
columns of ``rot``, half side lengths ``extent``).
"""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch
import warp as wp

from ik_layer.collision.model import RobotSpheres
from ik_layer.model.chain import ChainDescription, Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.warp_chain import chain_functions, warp_types

if TYPE_CHECKING:
    from warp._src.codegen import Struct  # what @wp.struct returns; warp exports no public name for it

__all__ = [
    "BOX",
    "ROUND",
    "SphereLayout",
    "collision_functions",
    "collision_structs",
    "sphere_order",
    "sphere_tensors",
    "spine_tensors",
]

ROUND = 0  # a sphere or a capsule: the points within radius of a segment
BOX = 1  # an oriented box


@functools.cache
def collision_structs(dtype: torch.dtype) -> "tuple[Struct, Struct]":
    """The warp structs of a robot's spheres and of an obstacle table, for ``dtype`` floats."""
    f, _, vec3, _, mat33 = warp_types(dtype)

    @wp.struct
    class Spheres:
        first: wp.array(dtype=wp.int32)  # per link (a frame of the links' chains) and one more: its first sphere
        bound_center: wp.array(dtype=vec3)  # per link: a ball holding its spheres, centre in the link's frame
        bound_radius: wp.array(dtype=f)
        center: wp.array(dtype=vec3)  # per sphere, link by link: centre in its link's frame
        radius: wp.array(dtype=f)
        link_pairs: wp.array(dtype=wp.vec2i)  # the link pairs checked for self-collision: all their sphere pairs
        spine: wp.array(dtype=wp.int32)  # one: the link whose chain holds every link's as a prefix, or -1
        ends: wp.array(dtype=wp.int32)  # per link: its chain's entries along the spine's

    @wp.struct
    class Obstacles:
        kind: wp.array(dtype=wp.int32)  # ROUND or BOX
        rot: wp.array(dtype=mat33)  # a box's axes (columns)
        pos: wp.array(dtype=vec3)  # a round shape's first end, a box's centre
        extent: wp.array(dtype=vec3)  # a round shape's axis (zero: a sphere), a box's half side lengths
        radius: wp.array(dtype=f)  # a round shape's radius (zero for a box)

    return Spheres, Obstacles


def sphere_tensors(model: RobotSpheres) -> dict[str, torch.Tensor]:
    """The fields of the kernel's ``Spheres`` struct for a robot's collision ``model``: its spheres ordered link by
    link (the order of ``model.links``), each link's first sphere, a ball holding each link's spheres (centred at
    their centres' mean), and the link pairs checked for self-collision (the model checks every sphere pair of
    such a link pair)."""
    index = model.link_index
    order = sphere_order(model)
    per_link = torch.bincount(index, minlength=len(model.links))
    first = torch.cat((per_link.new_zeros(1), per_link.cumsum(0)))
    centers, radii = model.centers[order], model.radii[order]
    bound_center = torch.zeros(len(model.links), 3, dtype=centers.dtype, device=centers.device)
    bound_center.index_add_(0, index[order], centers)
    bound_center /= per_link[:, None].to(centers.dtype)
    reach = (centers - bound_center[index[order]]).norm(dim=-1) + radii
    bound_radius = torch.zeros(len(model.links), dtype=radii.dtype, device=radii.device)
    bound_radius.scatter_reduce_(0, index[order], reach, reduce="amax")
    return {
        "first": first.to(torch.int32),
        "bound_center": bound_center,
        "bound_radius": bound_radius,
        "center": centers.contiguous(),
        "radius": radii.contiguous(),
        "link_pairs": torch.unique(index[model.pairs].sort(dim=1).values, dim=0).to(torch.int32).contiguous(),
    }


def sphere_order(model: RobotSpheres) -> torch.Tensor:
    """The kernel's order of a collision model's spheres, link by link: the model's index of each."""
    return torch.sort(model.link_index, stable=True).indices


def spine_tensors(chains: ChainDescription) -> dict[str, torch.Tensor]:
    """The ``spine`` and ``ends`` fields of the kernel's ``Spheres`` struct for the links' ``chains``: when every
    link's chain is the first entries of one link's (a serial arm: each link's chain is its parent's and one more
    joint), the kernel walks that one chain once for every link (and its Jacobian once for all their wrenches);
    else ``spine`` is -1 and each link walks its own."""
    frames, length = chains.layout.frames, chains.layout.length
    fields = [chains.place_rot, chains.place_rot_k, chains.place_rot_k2, chains.place_pos, chains.slide, chains.axis]
    fields += [chains.revolute, chains.cols, chains.scale, chains.offset]
    entries = [field.reshape(frames, length, -1).to(torch.float64) for field in fields]
    per_entry = torch.cat(entries, -1)  # (frames, length, values): an entry's every value
    still = per_entry.new_zeros(per_entry.shape[-1])
    still[:9] = torch.eye(3, dtype=torch.float64).flatten()  # place_rot I, the rest zero: a padding entry
    moving = (per_entry != still).any(-1)  # (frames, length)
    ends = torch.where(moving, torch.arange(1, length + 1), 0).amax(-1)  # entries up to the last that is not still
    spine = int(ends.argmax())
    prefix = all(bool((per_entry[k, : ends[k]] == per_entry[spine, : ends[k]]).all()) for k in range(frames))
    device = chains.cols.device
    return {
        "spine": torch.tensor([spine if prefix else -1], dtype=torch.int32, device=device),
        "ends": ends.to(torch.int32).to(device),
    }


@dataclass(frozen=True)
class SphereLayout:
    """What a kernel compiles in about a robot's collision spheres: the layout of the chains of the links that carry
    them, and how many spheres there are."""

    links: Layout
    spheres: int


@functools.cache
def collision_functions(layout: Layout, spheres_layout: SphereLayout, dtype: torch.dtype) -> SimpleNamespace:
    """``collide`` for a robot of ``layout`` with the collision spheres of ``spheres_layout``, in ``dtype`` floats:
    ``collide(q, links_chain, spheres, obstacles, scene, self_on, margin, activation)`` gives the term's gradient
    (dof) w.r.t. the tangent at ``q``, its cost and the least distance where it is below ``margin + activation``;
    ``clearance(q, links_chain, spheres, obstacles, scene, self_on, below)`` the least distance, exactly (or the
    first under ``below``), and its pair."""
    t = kernel_types(layout, dtype)
    f, vec3, mat33, vecq, vect = t.f, t.vec3, t.mat33, t.vecq, t.vect
    bv = t.bv
    Chain = t.Chain
    Spheres, Obstacles = collision_structs(dtype)
    links = spheres_layout.links
    count, length, total = links.frames, links.length, spheres_layout.spheres
    walk = chain_functions(links, dtype)
    base_pose, advance, chain_tip, chain_pose = walk.base_pose, walk.advance, walk.chain_tip, walk.chain_pose
    points_t = wp.types.matrix((total, 3), f)  # per sphere: its centre, or the push on it
    bounds_t = wp.types.matrix((count, 3), f)  # per link: the centre of the ball holding its spheres
    entries_t = wp.types.matrix((3, length), f)  # per chain entry: its axis, or its origin
    rots_t = wp.types.matrix((count, 9), f)  # per link: a rotation by rows
    floating = layout.floating

    @wp.func
    def unit(v: vec3) -> vec3:
        """``v / |v|``, zero for a zero vector (the gradient torch's ``norm`` gives there)."""
        n = wp.length(v)
        if n > f(0.0):
            return v / n
        return vec3()

    @wp.func
    def round_distance(p: vec3, a: vec3, axis: vec3, radius: f):
        """Distance from ``p`` to the round shape (``ik_layer.Capsule.signed_distance``), and its gradient in ``p``."""
        length_sq = wp.dot(axis, axis)
        along = f(0.0)
        if length_sq > f(0.0):
            along = wp.clamp(wp.dot(p - a, axis) / length_sq, f(0.0), f(1.0))
        gap = p - (a + along * axis)
        return wp.length(gap) - radius, unit(gap)

    @wp.func
    def box_distance(p: vec3, rot: mat33, centre: vec3, half: vec3):
        """Distance from ``p`` to the box's surface, negative inside (``ik_layer.Box.signed_distance``), and its
        gradient in ``p`` (inside: along the nearest face's normal)."""
        local = wp.transpose(rot) * (p - centre)
        beyond = vec3()
        outside = vec3()
        for k in range(3):
            beyond[k] = wp.abs(local[k]) - half[k]
            outside[k] = wp.max(beyond[k], f(0.0))
        out = wp.length(outside)
        deepest = wp.max(beyond[0], wp.max(beyond[1], beyond[2]))
        direction = vec3()
        if out > f(0.0):
            direction = outside / out
        else:
            ties = f(0.0)
            for k in range(3):
                if beyond[k] == deepest:
                    ties = ties + f(1.0)
            for k in range(3):
                if beyond[k] == deepest:
                    direction[k] = f(1.0) / ties  # torch's amax shares its gradient among ties
        for k in range(3):
            direction[k] = direction[k] * wp.sign(local[k]) * wp.where(local[k] == f(0.0), f(0.0), f(1.0))
        return out + wp.min(deepest, f(0.0)), rot * direction

    @wp.func
    def obstacle_distance(p: vec3, obstacles: Obstacles, o: int):
        """Distance from ``p`` to obstacle ``o``'s surface, negative inside, and its gradient in ``p``."""
        if obstacles.kind[o] == ROUND:
            return round_distance(p, obstacles.pos[o], obstacles.extent[o], obstacles.radius[o])
        return box_distance(p, obstacles.rot[o], obstacles.pos[o], obstacles.extent[o])

    @wp.func
    def place(q: vecq, links_chain: Chain, spheres: Spheres):
        """The spheres' centres at ``q`` in the base frame, each link's bounding ball's centre in the world, and
        the base's pose: the links' poses by one walk along the spine (each link's where its chain ends), else one
        walk per link."""
        base_rot, base_pos = base_pose(q)
        tip_rots = rots_t()  # per link: its rotation (by rows) and position in the base frame
        tip_poss = bounds_t()
        spine = spheres.spine[0]
        if spine >= 0:
            rot = wp.identity(3, f)
            pos = vec3()
            for j in range(length + 1):
                if j > 0:
                    rot, pos = advance(q, spine * length + j - 1, rot, pos, links_chain)
                for link in range(count):
                    if spheres.ends[link] == j:
                        tip_r = rot * links_chain.tip_rot[link]
                        tip_p = pos + rot * links_chain.tip_pos[link]
                        for k in range(3):
                            tip_poss[link, k] = tip_p[k]
                            for m in range(3):
                                tip_rots[link, 3 * k + m] = tip_r[k, m]
        else:
            for link in range(count):
                tip_r, tip_p = chain_tip(q, link, links_chain)
                for k in range(3):
                    tip_poss[link, k] = tip_p[k]
                    for m in range(3):
                        tip_rots[link, 3 * k + m] = tip_r[k, m]
        centres = points_t()
        bounds = bounds_t()
        for link in range(count):
            rot = mat33(
                tip_rots[link, 0], tip_rots[link, 1], tip_rots[link, 2],
                tip_rots[link, 3], tip_rots[link, 4], tip_rots[link, 5],
                tip_rots[link, 6], tip_rots[link, 7], tip_rots[link, 8],
            )  # fmt: skip
            pos = vec3(tip_poss[link, 0], tip_poss[link, 1], tip_poss[link, 2])
            for s in range(spheres.first[link], spheres.first[link + 1]):
                at = rot * spheres.center[s] + pos
                for k in range(3):
                    centres[s, k] = at[k]
            bound = base_rot * (rot * spheres.bound_center[link] + pos) + base_pos
            for k in range(3):
                bounds[link, k] = bound[k]
        return centres, bounds, base_rot, base_pos

    @wp.func
    def link_gap(a: vec3, b: vec3, radius_a: f, radius_b: f) -> f:
        """A lower bound on the distances between the spheres of two links: the gap of their balls (centres
        ``a`` and ``b``)."""
        return wp.length(a - b) - radius_a - radius_b

    @wp.func
    def to_obstacle(at: vec3, radius: f, base_rot: mat33, base_pos: vec3, obstacles: Obstacles, o: int):
        """Distance from the sphere at ``at`` (base frame) of ``radius`` to obstacle ``o``, and its gradient in the
        sphere's centre (in the world)."""
        d, direction = obstacle_distance(base_rot * at + base_pos, obstacles, o)
        return d - radius, direction

    @wp.func
    def between(a: vec3, b: vec3, radius_a: f, radius_b: f):
        """Distance between the spheres at ``a`` and ``b``, and the gap from ``b`` to ``a``."""
        gap = a - b
        return wp.length(gap) - radius_a - radius_b, gap

    @wp.func
    def clearance(
        q: vecq,
        links_chain: Chain,
        spheres: Spheres,
        obstacles: Obstacles,
        scene: wp.vec2i,
        self_on: wp.int32,
        below: f,
    ):
        """The least distance at ``q`` over every pair (+inf without pairs), exactly, and its pair: a sphere (in
        this order) and the obstacle's row in the scene, or ``-1 - j`` for sphere ``j`` (-1, -1 without pairs). A
        link's spheres are skipped where its ball cannot beat the least so far, and every pair once a distance
        under ``below`` is found (then the least is that one: enough to tell a collision; ``-inf``: exact)."""
        centres, bounds, base_rot, base_pos = place(q, links_chain, spheres)
        least = f(wp.inf)
        pair = wp.vec2i(-1, -1)
        for link in range(count):
            bound = vec3(bounds[link, 0], bounds[link, 1], bounds[link, 2])
            for o in range(scene[0], scene[0] + scene[1]):
                near = f(wp.inf)
                if least >= below:
                    near, _away = obstacle_distance(bound, obstacles, o)
                if near - spheres.bound_radius[link] < least:
                    for s in range(spheres.first[link], spheres.first[link + 1]):
                        d, _direction = to_obstacle(
                            vec3(centres[s, 0], centres[s, 1], centres[s, 2]),
                            spheres.radius[s],
                            base_rot,
                            base_pos,
                            obstacles,
                            o,
                        )
                        if d < least:
                            least = d
                            pair = wp.vec2i(s, o - scene[0])
        if self_on != 0:
            for p in range(spheres.link_pairs.shape[0]):
                one = spheres.link_pairs[p][0]
                other = spheres.link_pairs[p][1]
                ball_one = vec3(bounds[one, 0], bounds[one, 1], bounds[one, 2])
                ball_other = vec3(bounds[other, 0], bounds[other, 1], bounds[other, 2])
                apart = link_gap(ball_one, ball_other, spheres.bound_radius[one], spheres.bound_radius[other])
                if apart < least and least >= below:
                    for first in range(spheres.first[one], spheres.first[one + 1]):
                        for second in range(spheres.first[other], spheres.first[other + 1]):
                            d, _gap = between(
                                vec3(centres[first, 0], centres[first, 1], centres[first, 2]),
                                vec3(centres[second, 0], centres[second, 1], centres[second, 2]),
                                spheres.radius[first], spheres.radius[second],
                            )  # fmt: skip
                            if d < least:
                                least = d
                                pair = wp.vec2i(first, -1 - second)
        return least, pair

    @wp.func
    def collide(
        q: vecq,
        links_chain: Chain,
        spheres: Spheres,
        obstacles: Obstacles,
        scene: wp.vec2i,
        self_on: wp.int32,
        margin: f,
        activation: f,
    ):
        """The collision term at ``q``: gradient (dof), cost and the least distance, exact where it is below
        ``margin + activation`` (pairs farther apart are skipped by their links' balls: then the least of those
        measured, at least that, or +inf)."""
        centres, bounds, base_rot, base_pos = place(q, links_chain, spheres)
        reach = margin + activation
        cost = f(0.0)
        least = f(wp.inf)
        pushes = points_t()  # the cost's gradient w.r.t. each centre, in the world until turned below
        for link in range(count):
            bound = vec3(bounds[link, 0], bounds[link, 1], bounds[link, 2])
            for o in range(scene[0], scene[0] + scene[1]):
                # the link's ball first: its spheres are no nearer (distances are 1-Lipschitz)
                near, _away = obstacle_distance(bound, obstacles, o)
                if near - spheres.bound_radius[link] < reach:
                    for s in range(spheres.first[link], spheres.first[link + 1]):
                        d, direction = to_obstacle(
                            vec3(centres[s, 0], centres[s, 1], centres[s, 2]),
                            spheres.radius[s],
                            base_rot,
                            base_pos,
                            obstacles,
                            o,
                        )
                        least = wp.min(least, d)
                        if d < reach:
                            cost = cost + f(0.5) * (reach - d) * (reach - d)
                            for k in range(3):
                                pushes[s, k] = pushes[s, k] - (reach - d) * direction[k]
        if wp.static(floating):  # the pushes into the base frame
            for s in range(total):
                turned = wp.transpose(base_rot) * vec3(pushes[s, 0], pushes[s, 1], pushes[s, 2])
                for k in range(3):
                    pushes[s, k] = turned[k]
        if self_on != 0:
            for p in range(spheres.link_pairs.shape[0]):
                one = spheres.link_pairs[p][0]
                other = spheres.link_pairs[p][1]
                ball_one = vec3(bounds[one, 0], bounds[one, 1], bounds[one, 2])
                ball_other = vec3(bounds[other, 0], bounds[other, 1], bounds[other, 2])
                apart = link_gap(ball_one, ball_other, spheres.bound_radius[one], spheres.bound_radius[other])
                if apart < reach:
                    for first in range(spheres.first[one], spheres.first[one + 1]):
                        for second in range(spheres.first[other], spheres.first[other + 1]):
                            d, gap = between(
                                vec3(centres[first, 0], centres[first, 1], centres[first, 2]),
                                vec3(centres[second, 0], centres[second, 1], centres[second, 2]),
                                spheres.radius[first], spheres.radius[second],
                            )  # fmt: skip
                            least = wp.min(least, d)
                            if d < reach:
                                cost = cost + f(0.5) * (reach - d) * (reach - d)
                                force = -(reach - d) * unit(gap)  # on the first; its opposite on the second
                                for k in range(3):
                                    pushes[first, k] = pushes[first, k] + force[k]
                                    pushes[second, k] = pushes[second, k] - force[k]
        grad = vect()
        if cost > f(0.0):
            spine = spheres.spine[0]
            walked = wp.int32(-1)  # the chain whose axes and origins are held
            axes = entries_t()
            origins = entries_t()
            for link in range(count):  # the link's wrench [force; moment about the base origin], then J^T of it
                force = vec3()
                moment = vec3()
                for s in range(spheres.first[link], spheres.first[link + 1]):
                    push = vec3(pushes[s, 0], pushes[s, 1], pushes[s, 2])
                    force = force + push
                    moment = moment + wp.cross(vec3(centres[s, 0], centres[s, 1], centres[s, 2]), push)
                if wp.length_sq(force) + wp.length_sq(moment) > f(0.0):
                    walk_of = link  # the chain walked for this link: the spine's first entries, or its own
                    entries = length
                    if spine >= 0:
                        walk_of = spine
                        entries = spheres.ends[link]
                    if walked != walk_of:
                        _rot, _pos, axes, origins = chain_pose(q, walk_of, links_chain)
                        walked = walk_of
                    for j in range(entries):
                        x = walk_of * length + j
                        a = vec3(axes[0, j], axes[1, j], axes[2, j])
                        along = wp.dot(a, force)
                        if links_chain.revolute[x] != 0:
                            origin = vec3(origins[0, j], origins[1, j], origins[2, j])
                            along = wp.dot(a, moment - wp.cross(origin, force))
                        c = bv + links_chain.cols[x]
                        grad[c] = grad[c] + along * links_chain.scale[x]
                    if wp.static(floating):  # the base twist [v; w] in the base frame
                        for k in range(3):
                            grad[k] = grad[k] + force[k]
                            grad[3 + k] = grad[3 + k] + moment[k]
        return grad, cost, least

    return SimpleNamespace(collide=collide, clearance=clearance)
