"""The engine's obstacle table: the obstacles of every request in flight, one contiguous range of rows each.

The LM kernel reads a slot's obstacles as the rows ``[first, first + count)`` of one table (the ``scene`` of its
problem); :class:`ObstacleTable` places a request's scenes back to back in the first free range that holds them
and frees it when the request is answered. The table grows (up to :data:`TABLE_LIMIT` rows) when a request finds
no room, and shrinks back once empty; a request that still finds no room waits in the queue until one frees.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ik_layer.collision.packed import PackedObstacles
from ik_layer.collision.shapes import MAX_BATCH_OBSTACLES, MAX_OBSTACLES, Box, Capsule, Sphere
from ik_layer.engine.device.collision_step import BOX, ROUND, collision_structs
from ik_layer.model.warp_runtime import bind_struct

__all__ = ["TABLE_LIMIT", "TABLE_ROWS", "ObstacleTable"]

TABLE_ROWS = 4 * MAX_OBSTACLES
"""The rows of an engine's obstacle table when it is empty."""

TABLE_LIMIT = 2 * MAX_BATCH_OBSTACLES
"""The most rows an engine's obstacle table grows to."""


class ObstacleTable:
    """Obstacle rows on ``device`` in ``dtype`` floats, bound as the kernel's ``Obstacles`` struct
    (:attr:`struct`, bound anew when the table grows or shrinks), handed out in contiguous ranges."""

    def __init__(
        self, dtype: torch.dtype, device: torch.device, rows: int = TABLE_ROWS, limit: int = TABLE_LIMIT
    ) -> None:
        self.dtype, self.device = dtype, device
        self.initial, self.limit = rows, max(rows, limit)
        self._taken: dict[int, int] = {}  # first row -> count of each range in use
        self._allocate(rows)

    @property
    def rows(self) -> int:
        """The table's rows now."""
        return int(self.fields["kind"].shape[0])

    def add(self, packed: PackedObstacles) -> np.ndarray | None:
        """Write the scenes of ``packed`` back to back into the first free range that holds them (growing the
        table if none does): each scene's ``(first row, count)`` (int32, (1, 2) for one shared scene, else
        (n, 2)), or None when no range holds them yet. Scenes without obstacles take no rows."""
        counts = packed.counts.reshape(-1).cpu().numpy()
        total = int(counts.sum())
        first = np.cumsum(counts) - counts
        if total == 0:
            return np.zeros((len(counts), 2), dtype=np.int32)
        start = self._free_range(total)
        if start is None and self.rows < self.limit:
            end = max((used + n for used, n in self._taken.items()), default=0)
            self._resize(min(self.limit, max(2 * self.rows, 1 << (end + total - 1).bit_length())))
            start = self._free_range(total)
        if start is None:
            return None
        self._write(packed, start + torch.as_tensor(first, device=self.device))
        self._taken[start] = total
        return np.stack((start + first, counts), -1).astype(np.int32)

    def release(self, scenes: np.ndarray) -> None:
        """Free the rows of ``scenes`` (as :meth:`add` gave them); an emptied table shrinks to its first size."""
        if scenes[:, 1].any():
            del self._taken[int(scenes[0, 0])]
        if not self._taken and self.rows > self.initial:
            self._allocate(self.initial)

    def _write(self, packed: PackedObstacles, first: Tensor) -> None:
        """Write each group of ``packed`` at its scene's ``first`` row (per scene) plus its index in the scene."""
        fields = self.fields
        for group, where in zip(packed.groups, packed.index, strict=True):
            where = where.reshape(-1, where.shape[-1])
            scene, slot = torch.nonzero(where >= 0, as_tuple=True)
            rows = first[scene] + where[scene, slot]
            values = {name: t.detach().reshape(*where.shape, *t.shape[packed.counts.dim() + 1 :])[scene, slot]
                      for name, t in vars(group).items()}  # fmt: skip
            if isinstance(group, Box):
                fields["kind"][rows] = BOX
                fields["rot"][rows] = values["pose"][:, :3, :3]
                fields["pos"][rows] = values["pose"][:, :3, 3]
                fields["extent"][rows] = values["size"] / 2
                fields["radius"][rows] = 0.0
                continue
            a = values["center"] if isinstance(group, Sphere) else values["a"]
            fields["kind"][rows] = ROUND
            fields["rot"][rows] = torch.eye(3, dtype=self.dtype, device=self.device)
            fields["pos"][rows] = a
            fields["extent"][rows] = values["b"] - a if isinstance(group, Capsule) else 0.0  # a capsule's axis
            fields["radius"][rows] = values["radius"]

    def _allocate(self, rows: int) -> None:
        """A fresh table of ``rows`` rows, bound."""
        self.fields = {
            "kind": torch.zeros(rows, dtype=torch.int32, device=self.device),
            "rot": torch.zeros(rows, 3, 3, dtype=self.dtype, device=self.device),
            "pos": torch.zeros(rows, 3, dtype=self.dtype, device=self.device),
            "extent": torch.zeros(rows, 3, dtype=self.dtype, device=self.device),
            "radius": torch.zeros(rows, dtype=self.dtype, device=self.device),
        }
        self.struct = bind_struct(collision_structs(self.dtype)[1], self.fields)

    def _resize(self, rows: int) -> None:
        """The table with ``rows`` rows, the rows in use kept."""
        old, keep = self.fields, min(rows, self.rows)
        self._allocate(rows)
        for name, values in old.items():
            self.fields[name][:keep] = values[:keep]

    def _free_range(self, count: int) -> int | None:
        """The first row of the first free range of ``count`` rows, or None."""
        start = 0
        for used, n in sorted(self._taken.items()):
            if used - start >= count:
                return start
            start = used + n
        return start if self.rows - start >= count else None
