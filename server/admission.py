"""Admission: how an engine's slots are shared between the requests solving on it.

A part of ``r`` rows of a request with ``num_seeds = s`` claims ``r * s`` slots (its worst case: every row
running all its seeds at once). The limits derive from three numbers: the engine's ``capacity``, the largest
``num_seeds`` a request may ask for (``max_seeds``, the bound in :data:`ik_layer.OPTION_SPECS`) and ``share``:

* one request claims at most ``capacity // share`` slots at once (:attr:`AdmissionPolicy.request_limit`), so
  that ``share`` requests solve side by side and a new one finds room as soon as the oldest parts retire;
* that limit holds at least one row of the widest request: ``capacity >= share * max_seeds``
  (:func:`smallest_capacity`), checked when the policy is built, so every request can always make progress;
* a load of at most ``max_seeds`` slots (one widest row, or as many one-seed rows) is light: its engine steps
  run ``light_blocks`` blocks (fewer steps per request; such a step of 64 slots takes about a millisecond).

This module is pure Python: the settings take their bound on ``max_slots`` from :func:`smallest_capacity`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ik_layer import OPTION_SPECS

__all__ = ["MAX_SEEDS", "SHARE", "AdmissionPolicy", "Demand", "smallest_capacity"]

MAX_SEEDS = int(OPTION_SPECS["num_seeds"].maximum)
"""The largest ``num_seeds`` a request may ask for."""

SHARE = 4
"""One request claims at most ``1 / SHARE`` of the slots."""


def smallest_capacity(max_seeds: int = MAX_SEEDS, share: int = SHARE) -> int:
    """The fewest slots in which every request's share holds a row of ``max_seeds`` seeds."""
    return share * max_seeds


@dataclass(frozen=True)
class Demand:
    """What one request asks of the slots now.

    Attributes:
        rows: its rows not yet handed to the engine.
        seeds: its ``num_seeds`` (slots one row may claim).
        claimed: slots its unfinished parts claim.
    """

    rows: int
    seeds: int
    claimed: int


@dataclass(frozen=True)
class AdmissionPolicy:
    """The slot limits of one engine (see the module's docstring); checked when built.

    Attributes:
        capacity: the engine's slots.
        max_seeds: the largest ``num_seeds`` of a request.
        share: one request claims at most ``capacity // share`` slots.
        light_blocks: blocks per engine step while the load is light.

    Raises:
        ValueError: a limit that is not a positive integer, or fewer than :func:`smallest_capacity` slots.
    """

    capacity: int
    max_seeds: int = MAX_SEEDS
    share: int = SHARE
    light_blocks: int = 4

    def __post_init__(self) -> None:
        for name in ("capacity", "max_seeds", "share", "light_blocks"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"admission: {name} must be a positive integer, got {value!r}")
        least = smallest_capacity(self.max_seeds, self.share)
        if self.capacity < least:
            raise ValueError(
                f"admission: {self.capacity} slots cannot give each of {self.share} requests one row of "
                f"num_seeds={self.max_seeds} (the most a request may ask for); give at least {least} slots"
            )

    @property
    def request_limit(self) -> int:
        """Slots one request may claim at once: its share of the pool, at least one row of ``max_seeds``."""
        return self.capacity // self.share

    @property
    def light_load(self) -> int:
        """Slots claimed at most under a light load: one row of ``max_seeds`` seeds."""
        return self.max_seeds

    def allot(self, demands: Sequence[Demand], claimed: int) -> list[int]:
        """Rows to hand to the engine now for each of ``demands``, in priority order (oldest first): as many as
        fit in the request's limit and in the slots left free of ``claimed`` (all requests' claims together).

        Raises:
            ValueError: a demand of no seeds, or of more than ``max_seeds`` (it could never claim a row).
        """
        free = self.capacity - claimed
        rows = []
        for demand in demands:
            if not 1 <= demand.seeds <= self.max_seeds:
                raise ValueError(f"admission: num_seeds={demand.seeds} is outside this policy's [1, {self.max_seeds}]")
            room = max(min(self.request_limit - demand.claimed, free), 0)
            take = min(demand.rows, room // demand.seeds)
            free -= take * demand.seeds
            rows.append(take)
        return rows

    def blocks(self, claimed: int) -> int:
        """Blocks per engine step while ``claimed`` slots are claimed: ``light_blocks`` under a light load, else 1."""
        return self.light_blocks if claimed <= self.light_load else 1
