"""Fixed-shape slot buffers of the LM engine: one row per problem, in torch tensors shared with warp.

A :class:`Slots` holds ``capacity`` rows of problem (target, weights, tolerances, budgets, posture) and state
(q, damping, best configuration, iterations, status, restart RNG, progress window). The tensors are
allocated by torch on the robot's device and dtype; the warp views the kernel reads and writes are
made once, here, so a launch binds no new arrays. :meth:`Slots.admit` fills rows (no host sync; the
kernel resets the rest at the slot's first launch), :meth:`Slots.retire` empties them; on the CPU both
write through numpy views of the tensors (far cheaper per call than torch indexing).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import warp as wp
from torch import Tensor

from ik_layer.engine.kernel import EMPTY, RUNNING, Layout, chain_struct, warp_types
from ik_layer.kinematics import Robot
from ik_layer.options import SolveOptions
from ik_layer.solver import _MU_INIT

__all__ = ["Slots"]


class Slots:
    """``capacity`` LM slots for ``robot`` (its dtype and device, fixed at creation).

    Attributes (torch tensors, first dimension ``capacity``; F end-effector frames, nq coordinates):
        target_rot (F, 3, 3), target_pos (F, 3), weights (F, 6), tolerance (2,) [m, rad]: the problem.
        budget, restart_after, check_every: int32 iteration counts of the problem.
        posture (nq,), has_posture: the preferred configuration, used where the int32 flag is 1.
        random_start: int32 1 where the slot's start is to be drawn by the kernel (uniform in the limits,
            from the slot's restart stream), 2 once drawn, 0 for a given start.
        q (nq,), mu: the current configuration and relative damping.
        best_q (nq,), best_score: the lowest-rank configuration seen (the answer) and its rank: the
            score (error over tolerance, <= 1 is success), or ``d / (1 + d)`` for a success with a
            posture at distance ``d`` from it (as ``ik_layer.solver._Problem._record``).
        iterations: int32 iterations used; status: int32 ``RUNNING``, ``SOLVED``, ``EXHAUSTED`` or ``EMPTY``.
        rng: int32 bits of the uint32 restart RNG state (its stream offset until the first launch);
        rng_seed: int32 seed of the restart stream; check_cost: cost at the last progress check;
        age: int32 iterations since the slot's configuration (re)started.
        cost: the weighted squared error at ``q`` after the last launch (inf before the first).
        best_error (2,): position [m] and orientation [rad] errors at ``best_q`` over the weighted axes.
        chain: the robot's chains and joint limits as the kernel reads them
            (:func:`~ik_layer.engine.kernel.chain_struct`).
    """

    def __init__(self, robot: Robot, capacity: int) -> None:
        if not isinstance(robot, Robot):
            raise TypeError(f"robot must be an ik_layer.Robot, got {type(robot).__name__}")
        if not (isinstance(capacity, int) and capacity >= 0):
            raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
        self.robot = robot
        self.capacity = capacity
        self.device = robot.device
        self.dtype = robot.dtype
        wp.init()
        f, vec2, vec3, vec6, mat33 = warp_types(self.dtype)
        self.layout = Layout.of(robot)
        n, nq, frames = capacity, robot.nq, self.layout.frames
        real = {"dtype": self.dtype, "device": self.device}
        count = {"dtype": torch.int32, "device": self.device}

        self.target_rot = torch.zeros(n, frames, 3, 3, **real)
        self.target_pos = torch.zeros(n, frames, 3, **real)
        self.weights = torch.zeros(n, frames, 6, **real)
        self.tolerance = torch.ones(n, 2, **real)
        self.budget = torch.zeros(n, **count)
        self.restart_after = torch.ones(n, **count)
        self.check_every = torch.ones(n, **count)
        self.posture = torch.zeros(n, nq, **real)
        self.has_posture = torch.zeros(n, **count)
        self.random_start = torch.zeros(n, **count)
        self.q = torch.zeros(n, nq, **real)
        self.mu = torch.full((n,), _MU_INIT, **real)
        self.best_q = torch.zeros(n, nq, **real)
        self.best_score = torch.full((n,), torch.inf, **real)
        self.iterations = torch.zeros(n, **count)
        self.status = torch.full((n,), EMPTY, **count)
        self.rng = torch.zeros(n, **count)
        self.rng_seed = torch.zeros(n, **count)
        self.check_cost = torch.full((n,), torch.inf, **real)
        self.age = torch.zeros(n, **count)
        self.cost = torch.full((n,), torch.inf, **real)
        self.best_error = torch.full((n, 2), torch.inf, **real)

        # The chains, as the kernel reads them: F x length entries in a row, int32 flags and indices, each frame's
        # tip split in rotation and position.
        entries = frames * self.layout.length
        tip = robot._tip.reshape(frames, 4, 4)
        self._chain = {  # kept alive here: the warp views below do not own them
            "place_rot": robot._place_rot.reshape(entries, 3, 3).contiguous(),
            "place_rot_k": robot._place_rot_k.reshape(entries, 3, 3).contiguous(),
            "place_rot_k2": robot._place_rot_k2.reshape(entries, 3, 3).contiguous(),
            "place_pos": robot._place_pos.reshape(entries, 3).contiguous(),
            "slide": robot._slide.reshape(entries, 3).contiguous(),
            "axis": robot._axis.reshape(entries, 3).contiguous(),
            "revolute": robot._revolute.reshape(entries).to(torch.int32),
            "cols": robot._chain_cols.reshape(entries).to(torch.int32),
            "scale": robot._chain_scale.reshape(entries).to(self.dtype),
            "offset": robot._chain_offset.reshape(entries).to(self.dtype),
            "tip_rot": tip[:, :3, :3].contiguous(),
            "tip_pos": tip[:, :3, 3].contiguous(),
            "lower": robot.lower.contiguous(),
            "upper": robot.upper.contiguous(),
            "continuous": robot.continuous.to(torch.int32),
            "full_turn": robot.full_turn.to(torch.int32),
        }
        Chain = chain_struct(self.dtype)
        self.chain = Chain()  # the kernel's struct of warp views of those tensors, bound once
        for name, tensor in self._chain.items():
            setattr(self.chain, name, wp.from_torch(tensor, dtype=Chain.vars[name].type.dtype))
        state = [
            (self.target_rot, mat33),
            (self.target_pos, vec3),
            (self.weights, vec6),
            (self.tolerance, vec2),
            (self.budget, wp.int32),
            (self.restart_after, wp.int32),
            (self.check_every, wp.int32),
            (self.posture, f),
            (self.has_posture, wp.int32),
            (self.random_start, wp.int32),
            (self.q, f),
            (self.mu, f),
            (self.best_q, f),
            (self.best_score, f),
            (self.iterations, wp.int32),
            (self.status, wp.int32),
            (self.rng, wp.uint32),
            (self.rng_seed, wp.int32),
            (self.check_cost, f),
            (self.age, wp.int32),
            (self.cost, f),
            (self.best_error, vec2),
        ]
        self._state_views = [wp.from_torch(t, dtype=d) for t, d in state]
        # What admit and retire write to: numpy views of the same memory on the CPU, else the tensors.
        self._fields = {name: value for name, value in vars(self).items() if isinstance(value, Tensor)}
        if self.device.type == "cpu":
            self._fields = {name: t.numpy() for name, t in self._fields.items()}

    def state_arrays(self) -> list[wp.array]:
        """Warp views of the slots' problem and state, in the kernel's argument order."""
        return list(self._state_views)

    def admit(
        self,
        index: Tensor | Sequence[int] | slice,
        target: Tensor,
        q: Tensor | None,
        options: SolveOptions,
        *,
        weights: Tensor | None = None,
        seed: int = 0,
        rng_offset: Tensor | np.ndarray | None = None,
        posture: Tensor | None = None,
    ) -> None:
        """Start problems in the slots ``index`` (k,): RUNNING from ``q`` (k, nq) towards ``target`` (k, [F,] 4, 4).

        ``q`` is brought inside the limits by the kernel at its first launch (as :meth:`Robot.wrap`).

        ``q`` None: each slot's start is drawn by the kernel at its first launch, uniform in the limits (as
        :meth:`Robot.random_q`), from the slot's restart stream (so it depends only on ``seed`` and the offset).

        ``index`` is a sequence of slots or a ``slice`` of them (fewer copies). Budgets and tolerances come
        from ``options``; ``weights`` (k, [F,] 6) default to ones; ``posture`` (k, nq), if given, is pulled
        towards in the null space and preferred among successes (None: no posture for these slots). The
        slots' restart RNG streams are ``wp.rand_init(seed, rng_offset)``, the offsets defaulting to the slot
        indices. Values are not validated (no host sync): check them first, as :func:`ik_layer.solve` does.
        """
        idx = self._ints(index)
        put, value = self._fields, self._value
        if rng_offset is not None:  # as given on the CPU (int32 into int32, no copy to int64 and back)
            rng = value(rng_offset) if self.device.type == "cpu" else self._ints(rng_offset)
        elif isinstance(idx, slice):  # the slot indices
            bounds = idx.indices(self.capacity)
            rng = np.arange(*bounds) if self.device.type == "cpu" else torch.arange(*bounds, device=self.device)
        else:
            rng = idx
        frames = self.layout.frames
        target = value(target).reshape(-1, frames, 4, 4)
        put["target_rot"][idx] = target[:, :, :3, :3]
        put["target_pos"][idx] = target[:, :, :3, 3]
        put["weights"][idx] = 1.0 if weights is None else value(weights).reshape(-1, frames, 6)
        put["tolerance"][idx, 0] = options.position_tolerance
        put["tolerance"][idx, 1] = options.orientation_tolerance
        put["budget"][idx] = options.max_iterations
        put["restart_after"][idx] = options.restart_after
        put["check_every"][idx] = options.check_every
        put["has_posture"][idx] = 0 if posture is None else 1
        if posture is not None:
            put["posture"][idx] = value(posture)
        if q is None:
            put["random_start"][idx] = 1
        else:
            put["random_start"][idx] = 0
            put["q"][idx] = value(q)
        put["mu"][idx] = _MU_INIT
        put["iterations"][idx] = 0
        put["rng"][idx] = rng
        put["rng_seed"][idx] = (int(seed) + 2**31) % 2**32 - 2**31  # as int32
        put["status"][idx] = RUNNING

    def set_budget(self, index: Tensor | Sequence[int] | slice, budget: Tensor | np.ndarray) -> None:
        """Set the iteration budgets (k,) int32 of the slots ``index`` (after :meth:`admit`)."""
        self._fields["budget"][self._ints(index)] = self._value(budget)

    def retire(self, index: Tensor | np.ndarray | Sequence[int]) -> None:
        """Empty the slots ``index``: the kernel skips them until they are admitted again."""
        self._fields["status"][self._ints(index)] = EMPTY

    def _ints(self, index: Tensor | np.ndarray | Sequence[int] | slice) -> slice | Tensor | np.ndarray:
        """Slots (or other integers) as :attr:`_fields` take them: a slice as is, else a flat int64 numpy array
        (CPU) or tensor."""
        if isinstance(index, slice):
            return index
        if self.device.type == "cpu":
            return np.asarray(index, dtype=np.int64).reshape(-1)
        return torch.as_tensor(index, dtype=torch.long, device=self.device).reshape(-1)

    def _value(self, x: Tensor | np.ndarray) -> Tensor | np.ndarray:
        """Tensor ``x`` as :attr:`_fields` take it: its numpy view on the CPU, else itself (numpy arrays, on the
        CPU, as they are)."""
        if isinstance(x, np.ndarray) or self.device.type != "cpu":
            return x
        return x.detach().numpy()

    def running(self) -> Tensor:
        """(capacity,) bool: the slots still iterating."""
        return self.status == RUNNING
