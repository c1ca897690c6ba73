"""The sparsity of a robot's normal equations ``J^T W J``, and an order to factor them in that keeps it.

A frame's rows of the Jacobian touch only the coordinates on its chain (and a floating base's): on a humanoid, a
foot's rows see its leg, a hand's its arm and torso. So ``J^T W J`` couples two coordinates only if some frame's
chain holds both. :func:`normal_pattern` orders the coordinates so that a chain's far end comes before what it
hangs from (each frame's chain walked from its tip, frames sorted so that those sharing a chain's start sit side by
side, what several frames share last): on a tree that factors with no fill-in, and the LM kernel's ``L D L^T``
(:mod:`ik_layer.engine.device.damped_step`) works only inside each row's envelope, from the row's first coupled
coordinate to its diagonal. The fill-in of a Cholesky factor stays inside that envelope whatever the order, so any
order is exact; this one makes it small. A single serial arm couples everything and gains nothing, loses nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ik_layer.model.chain import ChainDescription

__all__ = ["normal_pattern"]


def normal_pattern(chains: ChainDescription) -> dict[str, Tensor]:
    """The order and envelope of ``chains``' normal equations, as int32 CPU tensors.

    ``order`` (dof,): the tangent coordinate at each position of the factored order; ``first`` (dof,): each
    position's first coupled position (its envelope starts there; itself if coupled to none before it);
    ``frame_slots`` (F dof,): frame ``fr``'s positions, ascending, in ``fr * dof ..``, then padded with zeros;
    ``frame_count`` (F,): how many there are.
    """
    layout = chains.layout
    dof, base, length = layout.dof, layout.dof - layout.joints, layout.length
    cols, moves = chains.cols.cpu().tolist(), (chains.scale != 0).cpu().tolist()
    paths = []  # each frame's coordinates from the base out: the base's, then its chain's entries that move
    for fr in range(layout.frames):
        path = list(range(base))
        for x in range(fr * length, (fr + 1) * length):
            if moves[x] and base + cols[x] not in path:
                path.append(base + cols[x])
        paths.append(path)
    ranks = {fr: rank for rank, fr in enumerate(sorted(range(layout.frames), key=lambda fr: paths[fr]))}
    key: dict[int, tuple[int, int]] = {}  # a coordinate: (the last frame holding it, minus its depth there)
    for fr, path in enumerate(paths):
        for depth, c in enumerate(path):
            key[c] = max(key.get(c, (-1, 0)), (ranks[fr], -depth))
    order = sorted(range(dof), key=lambda c: key.get(c, (-1, 0)))
    position = {c: p for p, c in enumerate(order)}
    slots = [sorted(position[c] for c in path) for path in paths]
    first = list(range(dof))
    for held in slots:
        for p in held:
            first[p] = min(first[p], held[0])
    padded = [held + [0] * (dof - len(held)) for held in slots]
    return {
        "order": torch.tensor(order, dtype=torch.int32),
        "first": torch.tensor(first, dtype=torch.int32),
        "frame_slots": torch.tensor(padded, dtype=torch.int32).flatten(),
        "frame_count": torch.tensor([len(held) for held in slots], dtype=torch.int32),
    }
