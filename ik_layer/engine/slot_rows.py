"""The slots' memory as four buffers of one row per slot; every field the kernel binds is a view of some columns.

Writing a group of targets into the slots, taking their answers out and reading the step's counts are then a few
whole-row copies, whatever the number of fields or targets (on a GPU each copy is a launch):

* ``given`` (reals): what a request brings per target: its target, weights, its terms' data (the posture's...)
  and first start. A request's
  rows are packed once (:meth:`~ik_layer.engine.slots.Slots.pack`) and copied into slots as they are admitted.
* ``settings`` (32-bit words; reals by their bits, two words each in float64): what the host sets per slot from the
  options and the scheduler (tolerances, gains, budgets, scene, restart stream...), built on the host per group.
* ``counts`` (words): each slot's best score, status, iterations and age: what a step reads back, in one copy.
* ``answer`` (reals): each slot's best configuration, its errors and least collision distance: a target's answer.

The fields the kernel alone reads and writes (``check_cost``, ``cost``, ``polish_scale``, ``best_pair``) are tensors
of their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

__all__ = ["BUFFERS", "Column", "RowLayout"]

BUFFERS = ("given", "settings", "counts", "answer")
"""The slots' row buffers; ``settings`` and ``counts`` hold 32-bit words, the others reals."""

_WORDS = {"settings", "counts"}

Rows = TypeVar("Rows", np.ndarray, Tensor)


@dataclass(frozen=True)
class Column:
    """Where one field lies: ``buffer``, its first column (reals, or words), its ``width`` in columns, its shape
    per slot, and whether it is a real held in a buffer of words."""

    buffer: str
    first: int
    width: int
    shape: tuple[int, ...]
    real: bool


class RowLayout:
    """The columns of every field for ``dtype`` reals, ``frames`` end-effector frames, ``nq`` coordinates,
    ``terms`` secondary terms and ``data`` reals of their per-target data; :attr:`widths` per buffer (columns of
    reals, or words)."""

    def __init__(self, dtype: torch.dtype, frames: int, nq: int, terms: int, data: int) -> None:
        self.dtype = dtype
        self.words_per_real = torch.empty(0, dtype=dtype).element_size() // 4
        self.real = torch.empty(0, dtype=dtype).numpy().dtype  # numpy's
        self.columns: dict[str, Column] = {}
        self.widths = dict.fromkeys(BUFFERS, 0)
        given: list[tuple[str, tuple[int, ...]]] = [
            ("target_rot", (frames, 3, 3)), ("target_pos", (frames, 3)), ("weights", (frames, 6)),
            ("data", (max(data, 1),)), ("q", (nq,)),
        ]  # fmt: skip
        for name, shape in given:
            self._add("given", name, shape)
        reals: list[tuple[str, tuple[int, ...]]] = [("tolerance", (2,)), ("gains", (terms,)), ("collision", (2,))]
        for name, shape in [*reals, ("mu", ())]:
            self._add("settings", name, shape, real=True)
        for name in ("budget", "restart_after", "check_every"):
            self._add("settings", name, ())
        self._add("settings", "scene", (2,))
        for name in ("self_collision", "pool", "random_start", "polish_from", "rng", "rng_seed"):
            self._add("settings", name, ())
        self._add("counts", "best_score", (), real=True)
        for name in ("status", "iterations", "age"):
            self._add("counts", name, ())
        self._add("answer", "best_q", (nq,))
        self._add("answer", "best_error", (2,))
        self._add("answer", "best_least", ())
        for buffer in _WORDS:  # rows start aligned for the reals in them
            self.widths[buffer] = -(-self.widths[buffer] // self.words_per_real) * self.words_per_real
        self._columns_of = {  # each buffer's fields, in order
            buffer: [(name, column) for name, column in self.columns.items() if column.buffer == buffer]
            for buffer in BUFFERS
        }

    def _add(self, buffer: str, name: str, shape: tuple[int, ...], real: bool = False) -> None:
        first = self.widths[buffer]
        if real:  # aligned to a real
            first = -(-first // self.words_per_real) * self.words_per_real
        width = math.prod(shape) * (self.words_per_real if real else 1)
        self.columns[name] = Column(buffer, first, width, shape, real)
        self.widths[buffer] = first + width

    def allocate(self, rows: int, device: torch.device) -> dict[str, Tensor]:
        """Zeroed buffers of ``rows`` rows, by name."""
        return {
            name: torch.zeros(rows, width, dtype=torch.int32 if name in _WORDS else self.dtype, device=device)
            for name, width in self.widths.items()
        }

    def views(self, buffer: str, rows: Rows) -> dict[str, Rows]:
        """The fields of ``buffer`` as views of ``rows`` (its rows, (n, width): a tensor or a numpy array), each
        (n, *shape)."""
        n = len(rows)
        views: dict[str, Rows] = {}
        for name, column in self._columns_of[buffer]:
            part = rows[:, column.first : column.first + column.width]
            if isinstance(part, np.ndarray):
                part = part.view(self.real) if column.real and buffer in _WORDS else part  # the real's bits
                views[name] = part[:, 0] if not column.shape else part.reshape(n, *column.shape)
            else:  # unflatten: a view, never a copy
                part = part.view(self.dtype) if column.real and buffer in _WORDS else part
                views[name] = part[:, 0] if not column.shape else part.unflatten(1, column.shape)
        return views

    def host_words(self, buffer: str, rows: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A zeroed host block of ``rows`` rows of the word buffer ``buffer`` and numpy views of its fields."""
        block = np.zeros((rows, self.widths[buffer]), dtype=np.int32)
        return block, self.views(buffer, block)
