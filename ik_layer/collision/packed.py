"""Obstacles packed for batched distances: grouped by shape, one scene shared by every target or one per target.

A scene is the obstacles one target keeps clear of, each batched shape counting its batch (flattened, in order).
:class:`PackedObstacles` holds the scenes of a solve as one padded batch per shape kind: ``(*scenes, m)`` shapes,
``scenes`` the scenes' batch shape (``()`` for one shared scene, the targets' otherwise) and ``m`` the most shapes of
that kind in one scene. Padding entries are harmless unit shapes whose distances read ``+inf``. Built from the
user's shapes with differentiable tensor operations, so that gradients reach their tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ik_layer.collision.shapes import Box, Capsule, Obstacle, Scenes, Sphere, flattened

__all__ = ["PackedObstacles"]

_KINDS: tuple[type[Obstacle], ...] = (Sphere, Box, Capsule)

_OWN_DIMS = {"center": 1, "radius": 0, "pose": 2, "size": 1, "a": 1, "b": 1}  # each field's own dimensions


@dataclass(frozen=True)
class PackedObstacles:
    """The scenes of one solve, packed by shape kind (see the module's docstring).

    Attributes:
        groups: the shapes of each kind present, ``(*scenes, m)`` each (padded).
        index: per group, ``(*scenes, m)`` int64: each shape's index in its scene; -1 for padding.
        counts: ``(*scenes,)`` int64: the obstacles of each scene.
    """

    groups: tuple[Obstacle, ...]
    index: tuple[Tensor, ...]
    counts: Tensor

    @staticmethod
    def of(scenes: Scenes, dtype: torch.dtype, device: torch.device) -> PackedObstacles:
        """Pack ``scenes`` (one: shared, scene shape ``()``; else one per target, scene shape ``(n,)``), their
        tensors in ``dtype`` on ``device`` (a shape shared by several scenes flattened once)."""
        n = len(scenes)
        shapes = [shape for scene in scenes for shape in scene]  # every scene's, in order
        lengths = np.fromiter(map(len, scenes), dtype=np.int64, count=n)
        ids = np.fromiter(map(id, shapes), dtype=np.int64, count=len(shapes))
        _, first, key_of = np.unique(ids, return_index=True, return_inverse=True)  # a shape shared: flattened once
        flats = [shapes[i] if _unbatched(shapes[i]) else flattened(shapes[i], dtype, device) for i in first.tolist()]
        rows_of = np.array([_rows(flat) for flat in flats], dtype=np.int64)[key_of]
        kind_of = np.array([_KINDS.index(type(flat)) for flat in flats], dtype=np.int64)[key_of]
        scene_of = np.repeat(np.arange(n), lengths)
        before = np.cumsum(rows_of) - rows_of  # the rows of every shape before it, over all scenes
        at_of = before - before[(np.cumsum(lengths) - lengths)[scene_of]]  # and before it in its own scene
        counts = np.bincount(scene_of, weights=rows_of, minlength=n).astype(np.int64)
        groups, index = [], []
        for k, kind in enumerate(_KINDS):
            mine = kind_of == k
            if mine.any():
                entries = (scene_of[mine], at_of[mine], key_of[mine], rows_of[mine])
                group, where = _padded(kind, entries, flats, n, dtype, device)
                groups.append(group)
                index.append(where)
        packed = PackedObstacles(tuple(groups), tuple(index), torch.as_tensor(counts, device=device))
        return packed.reshaped(()) if n == 1 else packed

    @property
    def scenes(self) -> tuple[int, ...]:
        """The scenes' batch shape: ``()`` for one shared scene."""
        return tuple(self.counts.shape)

    @property
    def width(self) -> int:
        """The shapes of all groups in one scene, padding included."""
        return sum(where.shape[-1] for where in self.index)

    def __bool__(self) -> bool:
        return self.width > 0

    def reshaped(self, scenes: Sequence[int]) -> PackedObstacles:
        """These scenes with the batch shape ``scenes`` (the same number of scenes)."""
        scenes = tuple(scenes)
        groups = tuple(
            _built(g, {name: t.reshape(*scenes, *t.shape[len(self.scenes) :]) for name, t in vars(g).items()})
            for g in self.groups
        )
        index = tuple(where.reshape(*scenes, where.shape[-1]) for where in self.index)
        return PackedObstacles(groups, index, self.counts.reshape(scenes))

    def take(self, rows: Tensor) -> PackedObstacles:
        """The scenes of the targets ``rows`` (a 1-d index), as a batch of them; one shared scene stays as it
        is."""
        if not self.scenes:
            return self
        groups = tuple(_built(g, {name: t[rows] for name, t in vars(g).items()}) for g in self.groups)
        return PackedObstacles(groups, tuple(where[rows] for where in self.index), self.counts[rows])

    def distances(self, centres: Tensor, radii: Tensor) -> Tensor:
        """Signed distances (..., S, W) between spheres of ``radii`` (S,) centred at ``centres`` (..., S, 3) and
        each scene's shapes (:attr:`width` columns, group by group; padding +inf). The scenes' batch shape aligns
        with the leading dimensions of ``centres``'s batch."""
        lead = centres.dim() - 2 - len(self.scenes)  # batch dimensions beyond the scenes'
        points = centres[..., :, None, :]
        columns = []
        for group, where in zip(self.groups, self.index, strict=True):
            aligned = _built(group, {name: self._aligned(t, lead) for name, t in vars(group).items()})
            d = aligned.signed_distance(points) - radii[:, None]
            columns.append(torch.where(self._aligned(where, lead) >= 0, d, torch.inf))
        if not columns:
            return centres.new_zeros(*centres.shape[:-1], 0)
        return torch.cat(columns, -1)

    def obstacle_of(self, column: Tensor) -> Tensor:
        """The index in its scene of the shape in ``column`` (...) of :meth:`distances` (the batch of ``column``
        starts with the scenes')."""
        where = torch.cat(self.index, -1)  # (*scenes, W)
        lead = column.dim() - len(self.scenes)
        where = where.reshape(*self.scenes, *([1] * lead), where.shape[-1]).expand(*column.shape, -1)
        return where.gather(-1, column[..., None]).squeeze(-1)

    def _aligned(self, t: Tensor, lead: int) -> Tensor:
        """The group tensor ``t`` (*scenes, m, own...) shaped to broadcast against points
        (..., S, 1, 3): (*scenes, 1 x lead, 1, m, own...)."""
        k = len(self.scenes)
        return t.reshape(*t.shape[:k], *([1] * (lead + 1)), *t.shape[k:])


def _unbatched(shape: Obstacle) -> bool:
    """Whether ``shape`` holds one shape (no batch dimensions): the common case, stacked with its kind at once."""
    return all(t.dim() == _OWN_DIMS[name] for name, t in vars(shape).items())


def _rows(flat: Obstacle) -> int:
    """The shapes in a flattened batch (1 for an unbatched shape)."""
    first = next(iter(vars(flat).items()))
    return 1 if first[1].dim() == _OWN_DIMS[first[0]] else first[1].shape[0]


def _padded(
    kind: type[Obstacle],
    entries: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    flats: list[Obstacle],
    n: int,
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[Obstacle, Tensor]:
    """The shapes of one ``kind`` in ``n`` scenes, from ``entries`` (per entry: its scene, the index of the shape's
    first row in its scene, the shape's index in ``flats`` (the distinct shapes, flattened), its rows): the padded
    group ``(n, m)`` and each entry's index in its scene (-1 for padding)."""
    scene_of, at_of, key_of, rows_of = entries
    keys, first, distinct = np.unique(key_of, return_index=True, return_inverse=True)  # the distinct shapes
    sizes = rows_of[first]  # their rows, one shape's after another's in the order of keys
    start = (np.cumsum(sizes) - sizes)[distinct]  # each entry's first row among them
    offset = np.arange(rows_of.sum()) - np.repeat(np.cumsum(rows_of) - rows_of, rows_of)  # row within its shape
    scene = np.repeat(scene_of, rows_of)
    obstacle = np.repeat(at_of, rows_of) + offset
    source = np.repeat(start, rows_of) + offset  # the row in the distinct shapes' rows
    per_scene = np.bincount(scene, minlength=n)
    slot = np.arange(len(scene)) - (np.cumsum(per_scene) - per_scene)[scene]  # rank in its scene
    m = int(per_scene.max())
    scene_t, slot_t = torch.as_tensor(scene, device=device), torch.as_tensor(slot, device=device)
    pick = torch.as_tensor(source, device=device)
    fields = {}
    for name, filler in _FILLERS[kind].items():
        own = _OWN_DIMS[name]  # unbatched shapes' tensors (as given) stacked, flattened ones' (converted) joined
        parts = [getattr(flats[key], name) for key in keys.tolist()]
        if all(t.dim() == own for t in parts) and len({(t.dtype, t.device) for t in parts}) == 1:
            values = torch.stack(parts).to(device, dtype)
        else:
            values = torch.cat([t.to(device, dtype).reshape(-1, *t.shape[t.dim() - own :]) for t in parts])
        values = values.index_select(0, pick)
        unit = torch.as_tensor(filler, dtype=dtype, device=device)
        fields[name] = unit.expand(n, m, *unit.shape).contiguous().index_put((scene_t, slot_t), values)
    where = torch.full((n, m), -1, dtype=torch.long, device=device)
    where = where.index_put((scene_t, slot_t), torch.as_tensor(obstacle, device=device))
    return _built(kind, fields), where


def _built(like: Obstacle | type[Obstacle], fields: dict[str, Tensor]) -> Obstacle:
    """A shape of the kind of ``like`` holding ``fields`` as they are: no checks (they were checked when the
    user's shapes were built), no host sync, gradients kept."""
    shape = object.__new__(like if isinstance(like, type) else type(like))
    for name, value in fields.items():
        object.__setattr__(shape, name, value)
    return shape


_EYE = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]

_FILLERS: dict[type[Obstacle], dict[str, object]] = {  # padding: unit shapes (finite distances, finite gradients)
    Sphere: {"center": [0.0, 0.0, 0.0], "radius": 1.0},
    Box: {"pose": _EYE, "size": [1.0, 1.0, 1.0]},
    Capsule: {"a": [0.0, 0.0, 0.0], "b": [1.0, 0.0, 0.0], "radius": 1.0},
}
