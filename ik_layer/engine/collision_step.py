"""The collision term in the LM kernel: the robot's spheres against a request's obstacles and against each other.

The same term as :class:`ik_layer.collision.cost.CollisionCost` (its cost, gradient and least distance), for one
configuration per thread:

1. the links carrying spheres are placed by a walk of their chains (:meth:`ik_layer.Robot.chains_to`, compiled in
   as a second :class:`~ik_layer.model.chain.Layout`); a sphere's centre is its link's pose applied to its offset;
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
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch
import warp as wp

from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.warp_chain import chain_functions, warp_types

if TYPE_CHECKING:
    from warp._src.codegen import Struct  # what @wp.struct returns; warp exports no public name for it

__all__ = ["BOX", "ROUND", "collision_functions", "collision_structs"]

ROUND = 0  # a sphere or a capsule: the points within radius of a segment
BOX = 1  # an oriented box


@functools.cache
def collision_structs(dtype: torch.dtype) -> "tuple[Struct, Struct]":
    """The warp structs of a robot's spheres and of an obstacle table, for ``dtype`` floats."""
    f, _, vec3, _, mat33 = warp_types(dtype)

    @wp.struct
    class Spheres:
        link: wp.array(dtype=wp.int32)  # per sphere: its link, a frame of the links' chains
        center: wp.array(dtype=vec3)  # in its link's frame
        radius: wp.array(dtype=f)
        pairs: wp.array(dtype=wp.vec2i)  # the self-collision pairs (i < j)

    @wp.struct
    class Obstacles:
        kind: wp.array(dtype=wp.int32)  # ROUND or BOX
        rot: wp.array(dtype=mat33)  # a box's axes (columns)
        pos: wp.array(dtype=vec3)  # a round shape's first end, a box's centre
        extent: wp.array(dtype=vec3)  # a round shape's axis (zero: a sphere), a box's half side lengths
        radius: wp.array(dtype=f)  # a round shape's radius (zero for a box)

    return Spheres, Obstacles


@functools.cache
def collision_functions(layout: Layout, links: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """``collide`` for a robot of ``layout`` whose sphere-carrying links' chains have the layout ``links``, in
    ``dtype`` floats: ``collide(q, links_chain, spheres, obstacles, scene, self_on, margin, activation)`` gives the
    term's gradient (dof) w.r.t. the tangent at ``q``, its cost and the least distance (+inf without pairs)."""
    t = kernel_types(layout, dtype)
    f, vec3, mat33, vecq, vect = t.f, t.vec3, t.mat33, t.vecq, t.vect
    bv = t.bv
    Chain = t.Chain
    Spheres, Obstacles = collision_structs(dtype)
    count, length = links.frames, links.length
    walk = chain_functions(links, dtype)
    base_pose, chain_tip, chain_pose = walk.base_pose, walk.chain_tip, walk.chain_pose
    placed_t = wp.types.matrix((3 * count, 4), f)  # each link's pose in the base frame, rows [R | p]
    wrench_t = wp.types.matrix((count, 6), f)  # each link's [force; moment about the base origin], base frame
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
    def centre_of(placed: placed_t, link: int, offset: vec3) -> vec3:
        """A sphere's centre in the base frame, its link's pose in ``placed`` and its ``offset`` in that link."""
        r = 3 * link
        rot = mat33(
            placed[r, 0], placed[r, 1], placed[r, 2],
            placed[r + 1, 0], placed[r + 1, 1], placed[r + 1, 2],
            placed[r + 2, 0], placed[r + 2, 1], placed[r + 2, 2],
        )  # fmt: skip
        return rot * offset + vec3(placed[r, 3], placed[r + 1, 3], placed[r + 2, 3])

    @wp.func
    def push(wrench: wrench_t, link: int, centre: vec3, force: vec3) -> wrench_t:
        """``wrench`` with ``force`` at ``centre`` (base frame) added to ``link``'s."""
        out = wrench
        moment = wp.cross(centre, force)
        for k in range(3):
            out[link, k] = out[link, k] + force[k]
            out[link, 3 + k] = out[link, 3 + k] + moment[k]
        return out

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
        """The collision term at ``q``: gradient (dof), cost and least distance (see the module's docstring)."""
        base_rot, base_pos = base_pose(q)
        placed = placed_t()
        for link in range(count):
            rot, pos = chain_tip(q, link, links_chain)
            for k in range(3):
                for m in range(3):
                    placed[3 * link + k, m] = rot[k, m]
                placed[3 * link + k, 3] = pos[k]
        reach = margin + activation
        cost = f(0.0)
        least = f(wp.inf)
        wrench = wrench_t()
        for s in range(spheres.radius.shape[0]):
            link = spheres.link[s]
            centre = centre_of(placed, link, spheres.center[s])
            world = base_rot * centre + base_pos
            force = vec3()
            for o in range(scene[0], scene[0] + scene[1]):
                d = f(0.0)
                direction = vec3()
                if obstacles.kind[o] == ROUND:
                    d, direction = round_distance(world, obstacles.pos[o], obstacles.extent[o], obstacles.radius[o])
                else:
                    d, direction = box_distance(world, obstacles.rot[o], obstacles.pos[o], obstacles.extent[o])
                d = d - spheres.radius[s]
                least = wp.min(least, d)
                if d < reach:
                    cost = cost + f(0.5) * (reach - d) * (reach - d)
                    force = force - (reach - d) * direction
            if wp.length_sq(force) > f(0.0):
                wrench = push(wrench, link, centre, wp.transpose(base_rot) * force)
        if self_on != 0:
            for p in range(spheres.pairs.shape[0]):
                first = spheres.pairs[p][0]
                second = spheres.pairs[p][1]
                link_a = spheres.link[first]
                link_b = spheres.link[second]
                centre_a = centre_of(placed, link_a, spheres.center[first])
                centre_b = centre_of(placed, link_b, spheres.center[second])
                gap = centre_a - centre_b
                d = wp.length(gap) - spheres.radius[first] - spheres.radius[second]
                least = wp.min(least, d)
                if d < reach:
                    cost = cost + f(0.5) * (reach - d) * (reach - d)
                    force = -(reach - d) * unit(gap)  # on a; its opposite on b (base frame: a rigid motion)
                    wrench = push(wrench, link_a, centre_a, force)
                    wrench = push(wrench, link_b, centre_b, -force)
        grad = vect()
        if cost > f(0.0):
            for link in range(count):
                force = vec3(wrench[link, 0], wrench[link, 1], wrench[link, 2])
                moment = vec3(wrench[link, 3], wrench[link, 4], wrench[link, 5])
                _rot, _pos, axes, origins = chain_pose(q, link, links_chain)
                for j in range(length):
                    x = link * length + j
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

    return SimpleNamespace(collide=collide)
