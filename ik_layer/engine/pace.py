"""Launches sliced to meet a deadline: the clock is read between launches, so none may run long.

A launch of ``rows`` slots for ``iterations`` iterations is one call of the kernel, however much work that is (a
block of 20,000 panda targets is a few tenths of a second on one CPU core). Under a deadline, :class:`Pacer`
runs it on the CPU as launches of at most :data:`SLICE_SECONDS` of work each: slices of consecutive slots, each
advanced :data:`SLICE_ITERATIONS` iterations per launch until its slots stop or have run their iterations, sized
by the seconds per slot-iteration of the launches timed before. It stops launching before the deadline; the
slots not reached keep their state, and the scheduler retires them at their deadline. The first slices finish
before later ones start, so the targets solved by the deadline are whole solves. The slots not started that no
slice reached get a launch of no iterations, which measures their starts, so that every answer's errors come
from the kernel; its time (as the last such launches took) is kept from the deadline. Slicing changes no answer:
a slot runs the same iterations in launches of any size (the kernel keeps all of its state in the slot).

Off the CPU a launch only queues the kernel, and the device's blocks are short: there a launch under a deadline
is one launch, as without one, and the scheduler reads the clock at the next step.
"""

from __future__ import annotations

import time

import numpy as np

from ik_layer.engine.device.kernel import DRAWN_START, NEAREST_START, RUNNING
from ik_layer.engine.launch import BlockLauncher

__all__ = ["FIRST_SLICE", "SLICE_ITERATIONS", "SLICE_SECONDS", "Pacer"]

SLICE_SECONDS = 0.005
"""The most seconds of estimated work of one launch under a deadline."""

SLICE_ITERATIONS = 8
"""The most iterations of one launch under a deadline; between launches a slice's stopped slots are skipped."""

FIRST_SLICE = 4096
"""The slot-iterations of the first launch under a deadline, before any launch has been timed."""


class Pacer:
    """:class:`~ik_layer.engine.launch.BlockLauncher` calls sliced to a deadline (see the module's docstring)."""

    def __init__(self, launch: BlockLauncher) -> None:
        self.launch = launch
        self._counts = launch.slots.counts_on_host()  # status, iterations per slot: read between the slices
        self._starts = None if self._counts is None else launch.slots.random_start.numpy()  # how each slot starts
        self.seconds_per_iteration: float | None = None  # per slot-iteration run, from the last timed launches
        self.seconds_per_start: float | None = None  # per slot of a launch of no iterations, likewise

    def __call__(self, iterations: int, rows: int, deadline: float | None = None) -> None:
        """Advance the first ``rows`` slots by up to ``iterations`` iterations: in one launch without a
        ``deadline`` (``time.monotonic()``) or off the CPU, else in slices, none started after the deadline."""
        if deadline is None or self._counts is None or iterations == 0:
            self.launch(iterations, rows)
            return
        status, counted = self._counts[0][:rows], self._counts[1][:rows]
        if rows * iterations <= self._slice_work():  # one slice: one launch, unless the deadline has passed
            if time.monotonic() < deadline:
                self._timed(iterations, counted, 0, rows)
            return
        fresh = np.flatnonzero((counted == 0) & (status == RUNNING))  # not started: measured if not reached
        steps = min(iterations, SLICE_ITERATIONS)
        first = 0
        while first < rows:
            stop = min(rows, first + max(1, self._slice_work() // steps))
            for done in range(0, iterations, steps):
                if self._late(deadline, len(fresh) - int(np.searchsorted(fresh, stop))):
                    self._measure_starts(fresh[np.searchsorted(fresh, first) :])
                    return
                if not (status[first:stop] == RUNNING).any():
                    break
                self._timed(min(steps, iterations - done), counted, first, stop)
            first = stop

    def _slice_work(self) -> int:
        """Slot-iterations of the next launch: :data:`SLICE_SECONDS` of work by the estimate."""
        if self.seconds_per_iteration is None:
            return FIRST_SLICE
        return max(1, int(SLICE_SECONDS / self.seconds_per_iteration))

    def _late(self, deadline: float, waiting: int) -> bool:
        """Whether the next launch would end after ``deadline``, less the time of measuring the starts of the
        ``waiting`` slots not started after it."""
        per_start = self.seconds_per_start
        if per_start is None:  # until timed: half an iteration (a start is one evaluation, an iteration about two)
            per_start = 0.5 * (self.seconds_per_iteration or 0.0)
        return time.monotonic() + waiting * per_start >= deadline

    def _timed(self, iterations: int, counted: np.ndarray, first: int, stop: int) -> None:
        """One launch of slots ``first:stop``, timed into the estimate (per slot-iteration run, by the slots'
        iteration counts ``counted``; a mean of the last few launches, weighted towards the newest)."""
        counted = counted[first:stop]
        before = int(counted.sum(dtype=np.int64))
        start = time.perf_counter()
        self.launch(iterations, stop - first, first)
        seconds = time.perf_counter() - start
        ran = int(counted.sum(dtype=np.int64)) - before
        if ran > 0:
            last, now = self.seconds_per_iteration, seconds / ran
            self.seconds_per_iteration = now if last is None else 0.5 * (last + now)

    def _measure_starts(self, fresh: np.ndarray) -> None:
        """A launch of no iterations over the slots not started that no slice reached (``fresh``, ascending): each
        is evaluated at its start (drawn if not given), which it records as its best; timed into the estimate of a
        start. A slot that would start at the seed table's nearest configuration draws instead: its target is not
        solved either way, and the lookup costs several times the evaluation (time kept from the deadline). (Started
        slots among them are evaluated again, which changes nothing.)"""
        if len(fresh) == 0:
            return
        assert self._starts is not None  # (on the CPU, as the counts)
        kinds = self._starts[fresh]
        self._starts[fresh] = np.where(kinds == NEAREST_START, DRAWN_START, kinds)
        first, stop = int(fresh[0]), int(fresh[-1]) + 1
        start = time.perf_counter()
        self.launch(0, stop - first, first)
        now = (time.perf_counter() - start) / (stop - first)
        last = self.seconds_per_start
        self.seconds_per_start = now if last is None else 0.5 * (last + now)
