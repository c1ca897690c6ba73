"""Obstacles in the robot's base frame, and the signed distance from a point to each.

Three shapes, each a batch (leading dims broadcast with the points'): :class:`Sphere` (centre, radius), :class:`Box`
(pose as a 4x4 transform or a 7-vector ``[x, y, z, qx, qy, qz, qw]``, full side lengths) and :class:`Capsule`
(the end points of its axis, radius). ``shape.signed_distance(points)`` is the distance from ``points`` (..., 3) to
the shape's surface, negative inside; the distance between a sphere of radius ``r`` centred at ``p`` and the shape
is ``shape.signed_distance(p) - r``. Differentiable in the points and in the shape's parameters.

Every constructor checks its arguments and raises an :class:`~ik_layer.IKLayerError` naming the bad one: wrong
shapes, non-finite values, radii or side lengths that are not positive, a pose that is not rigid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from ik_layer.exceptions import IKLayerError, NonFiniteError, ShapeError
from ik_layer.model.lie import as_transform, host_values

__all__ = [
    "MAX_BATCH_OBSTACLES",
    "MAX_OBSTACLES",
    "Box",
    "Capsule",
    "Obstacle",
    "Scenes",
    "Sphere",
    "as_scenes",
    "check_obstacles",
    "check_scenes",
    "flattened",
]


def _tensor(value: object, name: str, last: int | None) -> Tensor:
    """``value`` as a floating-point tensor (float64 unless it is a floating tensor already), its last dimension
    ``last`` (None: a batch of scalars), every entry finite."""
    if isinstance(value, Tensor):
        t = value if value.is_floating_point() else value.to(torch.float64)
    else:
        try:
            t = torch.as_tensor(value, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise IKLayerError(f"{name} must be numbers, got {type(value).__name__}") from err
    if last is not None and (t.dim() < 1 or t.shape[-1] != last):
        raise ShapeError(f"{name} must have shape (..., {last}), got {tuple(t.shape)}")
    values = host_values(t)  # a small CPU tensor's checks in numpy: far cheaper calls
    if not bool((np.isfinite(values) if isinstance(values, np.ndarray) else torch.isfinite(values)).all()):
        raise NonFiniteError(f"{name} must be finite")
    return t


def _positive(value: object, name: str, last: int | None) -> Tensor:
    t = _tensor(value, name, last)
    values = host_values(t)
    if not bool((values > 0).all()):
        raise IKLayerError(f"{name} must be positive, got {float(values.min()):g} at least once")
    return t


@dataclass(frozen=True)
class Sphere:
    """A ball: ``center`` (..., 3) [m], ``radius`` (...) [m], > 0."""

    center: Tensor
    radius: Tensor

    def __init__(self, center: object, radius: object) -> None:
        object.__setattr__(self, "center", _tensor(center, "center", 3))
        object.__setattr__(self, "radius", _positive(radius, "radius", None))
        _batch("Sphere", center=self.center.shape[:-1], radius=self.radius.shape)

    @property
    def batch(self) -> tuple[int, ...]:
        """The batch shape of the spheres this holds."""
        return _batch("Sphere", center=self.center.shape[:-1], radius=self.radius.shape)

    def signed_distance(self, points: Tensor) -> Tensor:
        """Distance (...) from ``points`` (..., 3) to the sphere's surface, negative inside."""
        return (points - self.center).norm(dim=-1) - self.radius


@dataclass(frozen=True)
class Box:
    """An oriented box: ``pose`` (..., 4, 4) its centre and axes in the base frame (given as a transform or a
    7-vector), ``size`` (..., 3) [m] its full side lengths along its own axes, each > 0."""

    pose: Tensor
    size: Tensor

    def __init__(self, pose: object, size: object) -> None:
        object.__setattr__(self, "pose", as_transform(_tensor(pose, "pose", None), "pose"))
        object.__setattr__(self, "size", _positive(size, "size", 3))
        _batch("Box", pose=self.pose.shape[:-2], size=self.size.shape[:-1])

    @property
    def batch(self) -> tuple[int, ...]:
        """The batch shape of the boxes this holds."""
        return _batch("Box", pose=self.pose.shape[:-2], size=self.size.shape[:-1])

    def signed_distance(self, points: Tensor) -> Tensor:
        """Distance (...) from ``points`` (..., 3) to the box's surface, negative inside."""
        rot, origin = self.pose[..., :3, :3], self.pose[..., :3, 3]
        local = ((points - origin)[..., None, :] @ rot).squeeze(-2)  # R^T (p - t), as a row vector
        beyond = local.abs() - self.size / 2  # per axis: > 0 outside that slab
        outside = beyond.clamp_min(0).norm(dim=-1)
        inside = beyond.amax(dim=-1).clamp_max(0)
        return outside + inside


@dataclass(frozen=True)
class Capsule:
    """The points within ``radius`` (...) [m] of the segment from ``a`` to ``b`` (..., 3) [m]."""

    a: Tensor
    b: Tensor
    radius: Tensor

    def __init__(self, a: object, b: object, radius: object) -> None:
        object.__setattr__(self, "a", _tensor(a, "a", 3))
        object.__setattr__(self, "b", _tensor(b, "b", 3))
        object.__setattr__(self, "radius", _positive(radius, "radius", None))
        _batch("Capsule", a=self.a.shape[:-1], b=self.b.shape[:-1], radius=self.radius.shape)

    @property
    def batch(self) -> tuple[int, ...]:
        """The batch shape of the capsules this holds."""
        return _batch("Capsule", a=self.a.shape[:-1], b=self.b.shape[:-1], radius=self.radius.shape)

    def signed_distance(self, points: Tensor) -> Tensor:
        """Distance (...) from ``points`` (..., 3) to the capsule's surface, negative inside."""
        axis = self.b - self.a
        length_sq = (axis * axis).sum(-1, keepdim=True)
        along = ((points - self.a) * axis).sum(-1, keepdim=True) / length_sq.clamp_min(torch.finfo(axis.dtype).tiny)
        nearest = self.a + along.clamp(0, 1) * axis  # a point of the segment (a itself for a = b)
        return (points - nearest).norm(dim=-1) - self.radius


Obstacle = Sphere | Box | Capsule
"""Any obstacle shape."""

MAX_OBSTACLES = 1024
"""The most obstacles one solve takes, a batched shape counting each of its batch (every iteration measures each
robot sphere against each obstacle)."""


MAX_BATCH_OBSTACLES = 1 << 18
"""The most obstacles one solve takes over all its targets' scenes together (one scene per target)."""

Scenes = tuple[tuple[Obstacle, ...], ...]
"""The obstacles of a solve by scene: one scene shared by every target, or one scene per target."""


def check_obstacles(obstacles: object, name: str = "obstacles") -> tuple[Obstacle, ...]:
    """``obstacles`` (a sequence of shapes) as a tuple, checked: an :class:`~ik_layer.IKLayerError` naming
    ``name`` for anything else or more than :data:`MAX_OBSTACLES`."""
    return _checked(obstacles, name, {})[0]


def check_scenes(obstacles: object, targets: int) -> Scenes:
    """``obstacles`` as scenes, checked: a sequence of shapes is one scene shared by every target; a sequence of
    ``targets`` sequences of shapes is one scene per target (in the targets' flattened order), and a sequence of
    one sequence is that scene for every target.

    Raises:
        IKLayerError: anything else (the message names the entry), a scene of more than :data:`MAX_OBSTACLES`, or
            more than :data:`MAX_BATCH_OBSTACLES` over all scenes.
    """
    if not _per_target(obstacles):
        return (check_obstacles(obstacles),)
    assert isinstance(obstacles, (list, tuple))
    if len(obstacles) not in (1, targets):
        raise IKLayerError(
            f"obstacles: one scene per target needs {targets} lists of shapes (one per target), got {len(obstacles)}"
        )
    counts: dict[int, int] = {}  # by id: a shape shared by many scenes is checked once
    scenes, total = [], 0
    for k, scene in enumerate(obstacles):
        checked, count = _checked(scene, f"obstacles[{k}]", counts)
        scenes.append(checked)
        total += count
    if total > MAX_BATCH_OBSTACLES:
        raise IKLayerError(f"obstacles: {total} shapes over all scenes, more than {MAX_BATCH_OBSTACLES}")
    return tuple(scenes)


def _checked(obstacles: object, name: str, counts: dict[int, int]) -> tuple[tuple[Obstacle, ...], int]:
    """``obstacles`` (one scene) as a tuple, checked as :func:`check_obstacles` does, and how many shapes it holds;
    ``counts`` holds each shape's count by id, filled in as shapes are met."""
    if isinstance(obstacles, (Sphere, Box, Capsule)):
        obstacles = [obstacles]
    if not isinstance(obstacles, (list, tuple)):
        raise IKLayerError(f"{name} must be a list of ik_layer.Sphere, Box and Capsule, got {type(obstacles).__name__}")
    total = 0
    for k, shape in enumerate(obstacles):
        count = counts.get(id(shape))
        if count is None:
            if not isinstance(shape, (Sphere, Box, Capsule)):
                raise IKLayerError(
                    f"{name}[{k}] must be an ik_layer.Sphere, Box or Capsule, got {type(shape).__name__}"
                )
            count = counts[id(shape)] = _count(shape)
        total += count
    if total > MAX_OBSTACLES:
        raise IKLayerError(f"{name}: {total} shapes, more than {MAX_OBSTACLES}")
    return tuple(obstacles), total


def as_scenes(obstacles: Sequence[Obstacle] | Sequence[Sequence[Obstacle]] | Scenes) -> Scenes:
    """Checked ``obstacles`` as :data:`Scenes`: a sequence of shapes is one scene, a sequence of sequences one
    scene each."""
    if _per_target(obstacles):
        return tuple(tuple(scene) for scene in obstacles)  # type: ignore[arg-type]
    return (tuple(obstacles),)  # type: ignore[arg-type]


def _per_target(obstacles: object) -> bool:
    """Whether ``obstacles`` is a non-empty sequence of sequences (one scene per target)."""
    return isinstance(obstacles, (list, tuple)) and bool(obstacles) and isinstance(obstacles[0], (list, tuple))


_TRAILING = {"center": 1, "radius": 0, "pose": 2, "size": 1, "a": 1, "b": 1}  # each field's own dimensions


def flattened(shape: Obstacle, dtype: torch.dtype, device: torch.device) -> Obstacle:
    """``shape`` with its tensors in ``dtype`` on ``device`` and its batch flattened to one dimension (every
    field broadcast to it): ``n`` shapes, ``n`` the size of its batch."""
    batch = shape.batch
    flat = {}
    for name, value in vars(shape).items():
        own = value.shape[value.dim() - _TRAILING[name] :]
        flat[name] = value.to(device, dtype).expand((*batch, *own)).reshape(-1, *own)
    return replace(shape, **flat)


def _count(shape: Obstacle) -> int:
    """How many shapes ``shape`` holds: the size of its batch."""
    return math.prod(shape.batch)


def _batch(kind: str, **batches: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of the parameters' ``batches`` (by name); a :class:`ShapeError` naming them if they clash."""
    first, *rest = batches.values()
    if all(b == first for b in rest):  # the common case, without torch's general broadcast
        return tuple(first)
    try:
        return tuple(torch.broadcast_shapes(*batches.values()))
    except RuntimeError as err:
        given = ", ".join(f"{name} {tuple(b)}" for name, b in batches.items())
        raise ShapeError(f"{kind}: the batch shapes of {given} do not broadcast") from err
