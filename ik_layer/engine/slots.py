"""Fixed-shape slot buffers of the LM engine, and the host-side bookkeeping every store shares.

A :class:`Slots` holds ``capacity`` rows of problem (target, weights, tolerances, budgets, terms) and state
(q, damping, best configuration, iterations, status, restart RNG, progress window). The tensors are
allocated by torch on the robot's device and dtype; the warp views the kernel reads and writes are
made once, here, so a launch binds no new arrays. :meth:`Slots.admit` fills rows (no host sync; the
kernel resets the rest at the slot's first launch), :meth:`Slots.retire` empties them, :meth:`Slots.read`
is a step's one wait for the device.

How the host reaches that memory is a store's one job (:mod:`ik_layer.engine.store`): :class:`Slots` is
abstract; its subclasses define :meth:`~Slots.array`, :meth:`~Slots.tensor`, :meth:`~Slots.copy`,
:meth:`~Slots.stage` and :meth:`~Slots.read`, and every write here goes through them, so the same bookkeeping runs
on every store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, NamedTuple, TypeAlias, TypedDict, TypeVar

import numpy as np
import torch
import warp as wp
from torch import Tensor

from ik_layer.core.lm import LM
from ik_layer.core.options import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.core.seeding import seed_table
from ik_layer.engine.device.collision_step import (
    SphereLayout,
    collision_structs,
    sphere_order,
    sphere_tensors,
    spine_tensors,
)
from ik_layer.engine.device.kernel import (
    DRAWN_START,
    EMPTY,
    GIVEN_START,
    POOL_STARTS,
    RUNNING,
    START_POOLS,
    slot_structs,
)  # fmt: skip
from ik_layer.engine.obstacles import TABLE_ROWS, ObstacleTable
from ik_layer.engine.slot_rows import RowLayout
from ik_layer.model.robot import Robot
from ik_layer.model.warp_chain import bind_chain
from ik_layer.model.warp_runtime import bind_struct, init_warp
from ik_layer.terms import TermInput, gains_of, registered_terms, term_data, used_terms
from ik_layer.terms.kernel_sum import KernelTerm

if TYPE_CHECKING:
    from warp._src.codegen import Struct  # what @wp.struct returns; warp exports no public name for it

__all__ = ["Array", "Readout", "Slots", "StoreArray", "compact_index"]

Array: TypeAlias = "np.ndarray | Tensor"
"""A store's view of slot or request memory: a numpy view (host store) or a tensor (tensor store)."""

StoreArray = TypeVar("StoreArray", np.ndarray, Tensor)
"""The arrays of one store: numpy views for :class:`~ik_layer.engine.store.HostStore`, tensors for
:class:`~ik_layer.engine.store.TensorStore` (a :class:`Slots` never mixes the two)."""


class _Placement(TypedDict):
    """The ``dtype`` and ``device`` keywords of a torch factory."""

    dtype: torch.dtype
    device: torch.device


class Readout(NamedTuple):
    """Host copies of the slots' state below a step's top slot (:meth:`Slots.read`)."""

    status: np.ndarray  # int32 codes
    iterations: np.ndarray  # int32
    age: np.ndarray  # int32 iterations since the slot's configuration (re)started
    best_score: np.ndarray  # the rank of each slot's best configuration


class Slots(ABC, Generic[StoreArray]):
    """``capacity`` LM slots for ``robot`` (its dtype and device, fixed at creation).

    Attributes (torch tensors, first dimension ``capacity``; F end-effector frames, nq coordinates):
        target_rot (F, 3, 3), target_pos (F, 3), weights (F, 6), tolerance (2,) [m, rad]: the problem.
        budget, restart_after, check_every: int32 iteration counts of the problem.
        data (D,): the secondary terms' per-target data (:attr:`terms`' in turn: the posture's first).
        gains (T,): each secondary term's gain, in :attr:`terms` order (0: off).
        scene (2,): int32 the first row and count of the slot's obstacles in :attr:`obstacles`; self_collision:
            int32 1 where the robot's self-collision pairs count; collision (2,): the margin and activation [m].
        random_start: int32 how the slot starts at its first launch (:data:`~ik_layer.engine.device.kernel.GIVEN_START`
            0: from its ``q``; ``DRAWN_START`` 1: drawn by the kernel, uniform in the limits, from the slot's restart
            stream, 2 once drawn; ``NEAREST_START`` 3: the configuration of :attr:`table` nearest its targets).
        q (nq,), mu: the current configuration and relative damping.
        best_q (nq,), best_score: the lowest-rank configuration seen (the answer) and its rank: the
            score (error over tolerance, <= 1 is success), or for a success with secondary terms
            :func:`ik_layer.terms.rank_of_cost` of their cost, in (0.25, 0.75) (as ``ik_layer.reference``).
        iterations: int32 iterations used; status: int32 ``RUNNING``, ``SOLVED``, ``EXHAUSTED`` or ``EMPTY``.
        rng: int32 bits of the uint32 restart RNG state (its stream offset until the first launch);
        rng_seed: int32 seed of the restart stream; check_cost: cost at the last progress check;
        age: int32 iterations since the slot's configuration (re)started.
        cost: the weighted squared error at ``q`` after the last launch (inf before the first).
        best_error (2,): position [m] and orientation [rad] errors at ``best_q`` over the weighted axes.
        polish_from: int32 iteration of the slot's first success with secondary terms (it then polishes), else -1
            (-2: it polished to no success and waits for its restart); polish_scale: the polish's step, a fraction of
            the terms' pull.
        best_least: the least collision distance at ``best_q`` where the kernel measured it (NaN elsewhere);
        best_pair (2,): int32, its pair (:func:`~ik_layer.engine.device.collision_step.collision_functions`'s
            ``clearance``: spheres in :attr:`sphere_order`).
        chain: the robot's chains and joint limits as the kernel reads them
            (:func:`~ik_layer.model.warp_chain.chain_struct`).
        sphere_layout: what the kernel compiles in of the robot's collision spheres (None: no spheres);
        sphere_order: (S,) int64 on the CPU, the collision model's index of each sphere in the kernel's order;
            link_chain, spheres: the chains of the links carrying them and the spheres as the kernel reads them
            (:func:`~ik_layer.engine.device.collision_step.collision_structs`).
        obstacles: the table of the obstacles of the scenes in flight (a row without collision spheres).
        table: the robot's :class:`~ik_layer.core.seeding.SeedTable` (None with a floating base), the kernel's
            ``table_q`` and ``table_pose`` (empty without).
        fields: this store's arrays (``StoreArray``: numpy views or the tensors) of the same memory, by name.
    """

    # The fields in the row buffers (:mod:`~ik_layer.engine.slot_rows`), views set in __init__.
    target_rot: Tensor
    target_pos: Tensor
    weights: Tensor
    data: Tensor
    q: Tensor
    tolerance: Tensor
    gains: Tensor
    collision: Tensor
    mu: Tensor
    budget: Tensor
    restart_after: Tensor
    check_every: Tensor
    scene: Tensor
    self_collision: Tensor
    pool: Tensor
    random_start: Tensor
    polish_from: Tensor
    rng: Tensor
    rng_seed: Tensor
    best_score: Tensor
    status: Tensor
    iterations: Tensor
    age: Tensor
    best_q: Tensor
    best_error: Tensor
    best_least: Tensor

    def __init__(self, robot: Robot, capacity: int) -> None:
        if not isinstance(robot, Robot):
            raise TypeError(f"robot must be an ik_layer.Robot, got {type(robot).__name__}")
        if not (isinstance(capacity, int) and capacity >= 0):
            raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
        self.robot = robot
        self.capacity = capacity
        self.device = robot.device
        self.dtype = robot.dtype
        init_warp()
        self.chains = robot.chains  # what the kernel binds; the engine reads nothing else of the robot's model
        self.layout = self.chains.layout
        n, nq, frames = capacity, robot.nq, self.layout.frames
        real = _Placement(dtype=self.dtype, device=self.device)
        count = _Placement(dtype=torch.int32, device=self.device)

        self.terms = registered_terms()  # the secondary terms, in the order of the gains and data columns
        self.data_of: dict[str, slice] = {}  # each term's columns of the data, one term after the other
        data_width = 0
        for term in self.terms:
            self.data_of[term.name] = slice(data_width, data_width + term.data_size(self.layout))
            data_width = self.data_of[term.name].stop
        self.rows = RowLayout(self.dtype, frames, nq, len(self.terms), data_width)
        self.buffers = self.rows.allocate(n, self.device)
        for buffer, rows in self.buffers.items():
            for name, view in self.rows.views(buffer, rows).items():
                setattr(self, name, view)
        self.tolerance.fill_(1.0)
        self.restart_after.fill_(1)
        self.check_every.fill_(1)
        self.pool.fill_(-1)
        self.mu.fill_(LM.mu_init)
        self.best_score.fill_(torch.inf)
        self.status.fill_(EMPTY)
        self.best_error.fill_(torch.inf)
        self.polish_from.fill_(-1)
        self.best_least.fill_(torch.nan)
        self.terms_used: frozenset[int] = frozenset()  # of the slots admitted since the last forget_terms()
        self.collision_used = False  # whether a slot admitted since the last forget_terms() checks collision
        self.pool_q = torch.zeros(START_POOLS * POOL_STARTS, nq, **real)
        self.pool_count = torch.zeros(START_POOLS, **count)
        self.table = seed_table(robot)
        self.table_q = torch.zeros(0, nq, **real) if self.table is None else self.table.q
        self.table_pose = torch.zeros(0, frames, 12, **real) if self.table is None else self.table.pose
        self.check_cost = torch.full((n,), torch.inf, **real)
        self.cost = torch.full((n,), torch.inf, **real)
        self.polish_scale = torch.ones(n, **real)
        self.best_pair = torch.full((n, 2), -1, **count)

        self.chain = bind_chain(self.chains)  # the kernel's struct
        self._bind_collision(robot)
        self.problem, self.state = (self._bind(struct) for struct in slot_structs(self.dtype))  # the kernel's
        # How the host reaches the slots: this store's arrays of the same memory (numpy views or the tensors).
        names = [name for struct in slot_structs(self.dtype) for name in struct.vars]
        self.fields: dict[str, StoreArray] = {name: self.array(getattr(self, name)) for name in names}
        self.rows_of: dict[str, StoreArray] = {name: self.array(rows) for name, rows in self.buffers.items()}
        self._given_views: dict[str, StoreArray] = self.rows.views("given", self.rows_of["given"])  # by field
        self._counts_at_start, start = self.rows.host_words("counts", 1)  # an admitted slot's counts
        start["status"][:] = RUNNING
        start["best_score"][:] = np.inf  # none yet: a slot retired before its first launch gives no answer
        self._settings_kept: tuple[tuple[object, ...], np.ndarray, frozenset[int]] | None = None
        self._gains_kept: dict[tuple[SolveOptions, bool], tuple[float, ...]] = {}  # by options and posture

    # ------------------------------------------------------------------------ what each store defines

    kind: ClassVar[str]
    """The store's name (a key of :data:`~ik_layer.engine.store.STORES`)."""

    lazy_jacobian: bool
    """The LM kernel the store's launches take (see :func:`~ik_layer.engine.device.kernel.lm_block_kernel`)."""

    @abstractmethod
    def array(self, x: Array) -> StoreArray:
        """A tensor on the slots' device as this store's arrays (the same memory); a host array (a host problem's,
        :data:`~ik_layer.core.problem.RowsT`) on the device; this store's arrays as they are."""

    @abstractmethod
    def tensor(self, x: Array) -> Tensor:
        """One of this store's arrays as a tensor (the same memory); a host numpy array as a tensor on the device."""

    @abstractmethod
    def copy(self, x: StoreArray) -> StoreArray:
        """A copy of one of this store's arrays, in memory of its own."""

    @abstractmethod
    def stage_all(self, values: Sequence[np.ndarray]) -> list[StoreArray]:
        """Host arrays ``values`` for writes into the slots before the next :meth:`read`, in one copy (they may
        share a buffer)."""

    def stage(self, values: np.ndarray) -> StoreArray:
        """Host ``values`` for writes into the slots before the next :meth:`read` (:meth:`stage_all` of one)."""
        return self.stage_all([values])[0]

    @abstractmethod
    def read(self, top: int) -> Readout:
        """Host copies of the state of the slots below ``top``: the step's one wait for the device."""

    def readout(self, counts: np.ndarray) -> Readout:
        """The :class:`Readout` of host rows (top, width) of the ``counts`` buffer, as :meth:`read` copies them."""
        column = self.rows.columns
        score = column["best_score"].first
        return Readout(
            counts[:, column["status"].first],
            counts[:, column["iterations"].first],
            counts[:, column["age"].first],
            counts[:, score : score + self.rows.words_per_real].view(self.rows.real)[:, 0],
        )

    def stream(self) -> wp.Stream | None:
        """The warp stream launches go on (None: warp's default for the device)."""
        return None

    # ------------------------------------------------------------------------ the same for every store

    def _bind_collision(self, robot: Robot) -> None:
        """The kernel's structs of the robot's collision spheres (empty without them) and the obstacle table."""
        model = robot.collision
        self._link_chains = None if model is None else robot.chains_to(model.links)  # kept alive: bound below
        self.sphere_layout = None
        if model is not None and self._link_chains is not None:
            self.sphere_layout = SphereLayout(self._link_chains.layout, len(model))
        self.link_chain = self.chain if self._link_chains is None else bind_chain(self._link_chains)
        self.obstacles = ObstacleTable(self.dtype, self.device, TABLE_ROWS if model is not None else 1)
        self._sphere_tensors = {  # (no spheres: one empty link)
            "first": torch.zeros(2, dtype=torch.int32, device=self.device),
            "bound_center": torch.zeros(1, 3, dtype=self.dtype, device=self.device),
            "bound_radius": torch.zeros(1, dtype=self.dtype, device=self.device),
            "center": torch.zeros(0, 3, dtype=self.dtype, device=self.device),
            "radius": torch.zeros(0, dtype=self.dtype, device=self.device),
            "link_pairs": torch.zeros(0, 2, dtype=torch.int32, device=self.device),
            "spine": torch.full((1,), -1, dtype=torch.int32, device=self.device),
            "ends": torch.zeros(1, dtype=torch.int32, device=self.device),
        }
        self.sphere_order = torch.zeros(0, dtype=torch.long)  # (on the CPU) the model's index of each sphere
        if model is not None and self._link_chains is not None:
            self._sphere_tensors = {**sphere_tensors(model), **spine_tensors(self._link_chains)}
            self.sphere_order = sphere_order(model).cpu()
        self.spheres = bind_struct(collision_structs(self.dtype)[0], self._sphere_tensors)

    def _bind(self, struct_type: Struct) -> object:
        """A ``struct_type`` (:func:`~ik_layer.engine.device.kernel.slot_structs`) of warp views of the fields of
        that name."""
        return bind_struct(struct_type, {name: getattr(self, name) for name in struct_type.vars})

    def index(self, index: Tensor | np.ndarray | Sequence[int] | slice) -> slice | StoreArray:
        """Slots (or rows) as this store's arrays take them: a slice as is, else a flat int64 index."""
        if isinstance(index, slice):
            return index
        if isinstance(index, Tensor):
            return self.array(index.to(self.device, torch.int64).reshape(-1))
        return self.stage(np.asarray(index, dtype=np.int64).reshape(-1))

    def admit(
        self,
        index: Tensor | np.ndarray | Sequence[int] | slice,
        target: Tensor | StoreArray,
        q: Tensor | StoreArray | None,
        options: SolveOptions,
        *,
        weights: Tensor | StoreArray | None = None,
        seed: int = 0,
        rng_offset: Tensor | np.ndarray | Sequence[int] | None = None,
        posture: Tensor | StoreArray | None = None,
        terms: Mapping[str, TermInput] | None = None,
        scene: tuple[int, int] | np.ndarray = (0, 0),
        pool: int = -1,
    ) -> None:
        """Start problems in the slots ``index`` (k,): RUNNING from ``q`` (k, nq) towards ``target`` (k, [F,] 4, 4).

        ``q`` is brought inside the limits by the kernel at its first launch (as :meth:`Robot.wrap`).

        ``q`` None: each slot's start is drawn by the kernel at its first launch, uniform in the limits (as
        :meth:`Robot.random_q`), from the slot's restart stream (so it depends only on ``seed`` and the offset).

        ``index`` is a sequence of slots or a ``slice`` of them (fewer copies). Arrays are tensors on the slots'
        device or this store's arrays. Budgets and tolerances come from ``options``; ``weights`` (k, [F,] 6)
        default to ones; ``posture`` (k, nq), if given, is pulled towards in the null space and preferred among
        successes (None: no posture for these slots), as the added ``terms`` are (their data (k, D)). ``scene``
        (first row, count) are the slots' obstacles in
        :attr:`obstacles`, shared, or a host array (k, 2) of them per slot; with them or
        ``options.self_collision`` the robot's spheres must exist; ``pool`` is their start pool (-1: none, see
        :meth:`add_starts`). The slots' restart RNG streams are
        ``wp.rand_init(seed, rng_offset)``, the offsets defaulting to the slot indices. Values are not validated
        (no host sync): check them first, as :func:`ik_layer.solve` does.
        """
        if rng_offset is None:
            rng_offset = np.arange(*index.indices(self.capacity)) if isinstance(index, slice) else index
        if isinstance(rng_offset, Tensor):
            rng_offset = rng_offset.cpu()
        slots = index.cpu().numpy() if isinstance(index, Tensor) else index
        slots = slots if isinstance(slots, slice) else np.asarray(slots, dtype=np.int64).reshape(-1)
        given = self.pack(target, q, weights=weights, data=term_data(posture, terms))
        gains = gains_of(options, posture is not None, terms, self.terms)
        self.place(
            slots, given, options, gains=gains, start=DRAWN_START if q is None else GIVEN_START, seed=seed,
            rng_offset=np.asarray(rng_offset, dtype=np.int64).reshape(-1), scene=scene, pool=pool,
        )  # fmt: skip

    def pack(
        self,
        target: Tensor | StoreArray,
        q: Tensor | StoreArray | None = None,
        *,
        weights: Tensor | StoreArray | None = None,
        data: Mapping[str, Tensor | StoreArray] | None = None,
        into: slice | None = None,
    ) -> StoreArray:
        """The ``given`` rows (:mod:`~ik_layer.engine.slot_rows`) of targets (k, [F,] 4, 4) with their ``weights``
        (k, [F,] 6; default ones), their terms' ``data`` (k, D) by name (:func:`~ik_layer.terms.term_data`) and
        first start ``q`` (k, nq; default zeros): what :meth:`place`
        copies into slots; written in place into the slots ``into`` if given (a view of their rows is returned).
        Arrays are tensors on the slots' device or this store's arrays."""
        frames = self.layout.frames
        target = self.array(target).reshape(-1, frames, 4, 4)
        if into is None:
            rows = self.array(torch.empty(len(target), self.rows.widths["given"], dtype=self.dtype, device=self.device))
            put, at = self.rows.views("given", rows), slice(None)
        else:
            rows, put, at = self.rows_of["given"][into], self._given_views, into  # (the slots' rows)
        put["target_rot"][at] = target[:, :, :3, :3]
        put["target_pos"][at] = target[:, :, :3, 3]
        put["weights"][at] = 1.0 if weights is None else self.array(weights).reshape(-1, frames, 6)
        put["data"][at] = 0.0
        for name, x in (data or {}).items():
            put["data"][at, self.data_of[name]] = self.array(x)
        put["q"][at] = 0.0 if q is None else self.array(q)
        return rows

    def place(
        self,
        index: np.ndarray | slice,
        given: StoreArray | None,
        options: SolveOptions,
        *,
        of: np.ndarray | slice = slice(None),
        gains: tuple[float, ...],
        start: int | np.ndarray,
        seed: int,
        rng_offset: np.ndarray,
        scene: tuple[int, int] | np.ndarray = (0, 0),
        pool: int = -1,
        budget: int | np.ndarray | None = None,
        q: StoreArray | None = None,
    ) -> None:
        """Start the rows ``of`` of ``given`` (:meth:`pack`; None: packed into the slots already) in the slots
        ``index`` (k,), RUNNING, with ``options``:
        the secondary terms' ``gains`` (:meth:`gains_of`), starting as ``start`` tells (one for all, or (k,): see
        :attr:`random_start`; a given start is ``q`` (k, nq) if given, else the rows' ``q``), restart streams
        ``wp.rand_init(seed, rng_offset)`` (k,), ``scene`` and ``pool`` as
        :meth:`admit`'s, and iteration budgets ``budget`` (k,) or one for all (default ``options.max_iterations``).

        Whatever the number of slots, this is one host-to-device copy and a write of each row buffer's rows (or a
        copy of ``given``'s rows where both ``index`` and ``of`` are slices)."""
        k, column = len(rng_offset), self.rows.columns
        # (most calls: one scene and kind of start for every slot, in the row)
        shared = (scene, start) if isinstance(scene, tuple) and isinstance(start, int) else None
        row, used = self._settings_of(options, gains, pool, shared)
        settings = row.repeat(k, axis=0)
        if shared is None:
            first = column["scene"].first
            settings[:, first : first + 2] = scene
            settings[:, column["random_start"].first] = start
        if budget is not None:
            settings[:, column["budget"].first] = budget
        settings[:, column["rng"].first] = rng_offset
        settings[:, column["rng_seed"].first] = (int(seed) + 2**31) % 2**32 - 2**31  # as int32
        if used:
            self.terms_used |= used
        with_obstacles = scene[1] > 0 if isinstance(scene, tuple) else bool(scene[:, 1].any())
        self.collision_used |= with_obstacles or bool(options.self_collision)
        arrays = [settings, self._counts_at_start]  # (one row of counts for every slot)
        arrays += [] if isinstance(index, slice) else [np.asarray(index, dtype=np.int64)]
        arrays += [] if isinstance(of, slice) else [np.asarray(of, dtype=np.int64)]
        staged = self.stage_all(arrays)
        into = index if isinstance(index, slice) else staged[2]
        rows = of if isinstance(of, slice) else staged[-1]
        buffers = self.rows_of
        buffers["settings"][into] = staged[0]
        buffers["counts"][into] = staged[1]
        if given is not None:
            buffers["given"][into] = given[rows]
        if q is not None:
            self.fields["q"][into] = q

    def _settings_of(
        self,
        options: SolveOptions,
        gains: tuple[float, ...],
        pool: int,
        shared: tuple[tuple[int, int], int] | None = None,
    ) -> tuple[np.ndarray, frozenset[int]]:
        """(1, width) the ``settings`` row of a slot with ``options`` (its budget), the secondary terms' ``gains``,
        start ``pool`` and, if ``shared``, its scene and how it starts; less its restart stream
        (:meth:`place` sets it per slot, and the rest where not shared); the last one made is kept (most steps admit
        seeds of one request), with the terms its gains use (:func:`~ik_layer.terms.used_terms`)."""
        key = (options, gains, pool, shared)
        if self._settings_kept is not None and self._settings_kept[0] == key:
            return self._settings_kept[1], self._settings_kept[2]
        row, put = self.rows.host_words("settings", 1)
        scale = LM.tolerance_scale(self.dtype)  # float32: a margin, so that successes hold in float64
        put["tolerance"][:] = (options.position_tolerance * scale, options.orientation_tolerance * scale)
        put["gains"][:] = gains
        put["collision"][:] = (options.collision_margin, options.collision_activation)
        put["mu"][:] = LM.mu_init
        put["budget"][:] = options.max_iterations
        put["restart_after"][:] = options.restart_after
        put["check_every"][:] = options.check_every
        put["self_collision"][:] = options.self_collision
        put["pool"][:] = pool
        put["polish_from"][:] = -1
        if shared is not None:
            put["scene"][:], put["random_start"][:] = shared
        used = used_terms(gains)
        self._settings_kept = (key, row, used)
        return row, used

    def add_starts(self, pool: int, added: int, q: StoreArray) -> None:
        """Put the collision-free answers ``q`` (m, nq) (this store's array) into start ``pool``, which held
        ``added`` answers so far since :meth:`empty_starts` (the oldest make room: a ring of
        :data:`POOL_STARTS`)."""
        m = min(len(q), POOL_STARTS)
        rows = pool * POOL_STARTS + (added + len(q) - m + np.arange(m)) % POOL_STARTS
        self.fields["pool_q"][self.index(rows)] = q[len(q) - m :]
        self.fields["pool_count"][pool] = min(added + len(q), POOL_STARTS)

    def empty_starts(self, pool: int) -> None:
        """Empty start ``pool`` (for a new request)."""
        self.fields["pool_count"][pool] = 0

    def gains_of(self, problem: Problem[Tensor | np.ndarray]) -> tuple[float, ...]:
        """The gains of :attr:`terms` in a solve of ``problem``.

        Raises:
            IKLayerError: the problem adds a term registered after these slots were made.
        """
        if problem.terms:
            return gains_of(problem.options, problem.posture is not None, problem.terms, self.terms)
        key = (problem.options, problem.posture is not None)  # most problems: the options' terms alone
        gains = self._gains_kept.get(key)
        if gains is None:
            gains = self._gains_kept[key] = gains_of(problem.options, key[1], None, self.terms)
        return gains

    def kernel_terms(self, used: frozenset[int]) -> tuple[KernelTerm, ...]:
        """The terms ``used`` (indices in :attr:`terms`) as the kernel compiles them in."""
        return tuple(KernelTerm(k, self.terms[k], self.data_of[self.terms[k].name].start) for k in sorted(used))

    def forget_terms(self) -> None:
        """Let the launches drop the secondary and collision terms: call when no slot runs (the next admissions add
        theirs)."""
        self.terms_used = frozenset()
        self.collision_used = False

    def retire(self, index: Tensor | np.ndarray | Sequence[int] | slice) -> None:
        """Empty the slots ``index``: the kernel skips them until they are admitted again."""
        self.fields["status"][self.index(index)] = EMPTY

    def take_best(
        self, answer: StoreArray, rows: np.ndarray, slots: np.ndarray, pair: StoreArray | None = None
    ) -> None:
        """``answer[rows]`` (a request's ``answer`` rows: its targets' best configurations, errors and least
        distances) from the ``answer`` rows of ``slots``, and ``pair[rows]``, if given, from their closest pairs."""
        into, take = compact_index(rows), compact_index(slots)
        staged = self.stage_all([x for x in (into, take) if not isinstance(x, slice)])
        at = into if isinstance(into, slice) else staged[0]
        of = take if isinstance(take, slice) else staged[-1]
        answer[at] = self.rows_of["answer"][of]
        if pair is not None:
            pair[at] = self.fields["best_pair"][of]

    def counts_on_host(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(capacity,) int32 numpy views of the slots' status and iterations, on the CPU; None on other devices
        (their counts come back by :meth:`read` alone)."""
        if self.device.type != "cpu":
            return None
        return self.status.numpy(), self.iterations.numpy()

    def running(self) -> Tensor:
        """(capacity,) bool: the slots still iterating."""
        return self.status == RUNNING


def compact_index(values: np.ndarray) -> slice | np.ndarray:
    """Distinct ``values`` as a slice when they are consecutive (cheaper to copy), else as an int64 numpy array."""
    if len(values) == 1:
        return slice(int(values[0]), int(values[0]) + 1)
    if len(values) and values[-1] - values[0] == len(values) - 1 and bool((np.diff(values) == 1).all()):
        return slice(int(values[0]), int(values[-1]) + 1)
    return np.ascontiguousarray(values, dtype=np.int64)
