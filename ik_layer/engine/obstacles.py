"""The engine's obstacle table: the obstacles of every request in flight, one contiguous range of rows each.

The LM kernel reads a slot's obstacles as the rows ``[start, start + count)`` of one table (the ``scene`` of its
problem); :class:`ObstacleTable` places a request's shapes in the first free range that holds them and frees it
when the request is answered. A request that finds no room waits in the queue until one frees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ik_layer.collision.shapes import MAX_OBSTACLES, Box, Obstacle, Sphere, flattened
from ik_layer.engine.collision_step import BOX, ROUND, collision_structs
from ik_layer.model.warp_runtime import bind_struct

__all__ = ["TABLE_ROWS", "ObstacleTable", "pack_obstacles"]

TABLE_ROWS = 4 * MAX_OBSTACLES
"""The rows of an engine's obstacle table: the obstacles of all requests in flight together."""


def pack_obstacles(shapes: Sequence[Obstacle], dtype: torch.dtype, device: torch.device) -> dict[str, Tensor]:
    """The table rows of ``shapes`` (their batches flattened), by field of the kernel's ``Obstacles`` struct."""
    kind, rot, pos, extent, radius = [], [], [], [], []
    eye = torch.eye(3, dtype=dtype, device=device)
    for shape in shapes:
        flat = flattened(shape, dtype, device)
        n = math.prod(shape.batch)
        if isinstance(flat, Box):
            rot.append(flat.pose[:, :3, :3])
            pos.append(flat.pose[:, :3, 3])
            extent.append(flat.size / 2)
            radius.append(torch.zeros(n, dtype=dtype, device=device))
            kind.append(torch.full((n,), BOX, dtype=torch.int32, device=device))
            continue
        a, b = (flat.center, flat.center) if isinstance(flat, Sphere) else (flat.a, flat.b)
        rot.append(eye.expand(n, 3, 3))
        pos.append(a)
        extent.append(b - a)  # a capsule's axis; zero for a sphere
        radius.append(flat.radius)
        kind.append(torch.full((n,), ROUND, dtype=torch.int32, device=device))
    if not kind:
        return {}
    return {
        "kind": torch.cat(kind),
        "rot": torch.cat(rot),
        "pos": torch.cat(pos),
        "extent": torch.cat(extent),
        "radius": torch.cat(radius),
    }


class ObstacleTable:
    """:data:`TABLE_ROWS` obstacle rows on ``device`` in ``dtype`` floats, bound once as the kernel's ``Obstacles``
    struct (:attr:`struct`), handed out in contiguous ranges."""

    def __init__(self, dtype: torch.dtype, device: torch.device, rows: int = TABLE_ROWS) -> None:
        self.rows = rows
        self.fields = {
            "kind": torch.zeros(rows, dtype=torch.int32, device=device),
            "rot": torch.zeros(rows, 3, 3, dtype=dtype, device=device),
            "pos": torch.zeros(rows, 3, dtype=dtype, device=device),
            "extent": torch.zeros(rows, 3, dtype=dtype, device=device),
            "radius": torch.zeros(rows, dtype=dtype, device=device),
        }
        self.struct = bind_struct(collision_structs(dtype)[1], self.fields)
        self._taken: dict[int, int] = {}  # start -> count of each range in use

    def add(self, shapes: Sequence[Obstacle]) -> tuple[int, int] | None:
        """Write ``shapes`` into the first free range that holds them: ``(start, count)``, or None when no range
        does (``(0, 0)`` for no shapes)."""
        pos = self.fields["pos"]
        packed = pack_obstacles(shapes, pos.dtype, pos.device)
        count = 0 if not packed else int(packed["kind"].shape[0])
        if count == 0:
            return 0, 0
        start = self._free_range(count)
        if start is None:
            return None
        for name, values in packed.items():
            self.fields[name][start : start + count] = values
        self._taken[start] = count
        return start, count

    def release(self, scene: tuple[int, int]) -> None:
        """Free the range ``scene`` (as :meth:`add` gave it)."""
        if scene[1]:
            del self._taken[scene[0]]

    def _free_range(self, count: int) -> int | None:
        """The first row of the first free range of ``count`` rows, or None."""
        start = 0
        for used, n in sorted(self._taken.items()):
            if used - start >= count:
                return start
            start = used + n
        return start if self.rows - start >= count else None
