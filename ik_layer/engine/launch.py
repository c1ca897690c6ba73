"""The recorded launch of the LM block kernel over one set of slots, with the host store's argument struct bound
once."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import warp as wp

from ik_layer.engine.device.kernel import lm_block_kernel
from ik_layer.engine.slots import Slots
from ik_layer.engine.store import HostStore
from ik_layer.model.warp_runtime import quiet_warp

__all__ = ["BlockLauncher"]


class BlockLauncher:
    """A recorded launch of :func:`lm_block_kernel` over one :class:`~ik_layer.engine.slots.Slots`.

    One recorded launch per set of secondary terms the slots have used (:attr:`Slots.terms_used`) and whether they
    checked collision (:attr:`Slots.collision_used`): a plain solve runs the kernel without either. The arguments
    (the robot's chains, the collision spheres, the obstacle table and the slots' warp views) are bound once (again
    when the obstacle table grows or shrinks); each call
    replays the launch with a new ``block`` and does not wait for it to finish (on CUDA it is
    queued on torch's current stream, as the store gives it; on the CPU warp runs it before returning).
    Over a host store the launch skips warp's per-call argument packing (see :func:`_cpu_arguments`).
    """

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self.device = wp.device_from_torch(slots.device)
        self._launches: dict[tuple[frozenset[int], bool], _Launch] = {}
        self._launch_for(slots.terms_used, slots.collision_used)  # the plain kernel compiles or loads here

    def __call__(self, block: int, rows: int | None = None, first: int = 0) -> None:
        """Advance every RUNNING slot among ``rows`` slots from slot ``first`` (default: all) by up to ``block``
        iterations."""
        if not (isinstance(block, int) and block >= 0):
            raise ValueError(f"block must be an int >= 0, got {block!r}")
        capacity = self.slots.capacity
        if not (isinstance(first, int) and 0 <= first <= capacity):
            raise ValueError(f"first must lie in [0, {capacity}], got {first!r}")
        rows = capacity - first if rows is None else rows
        if not 0 <= rows <= capacity - first:
            raise ValueError(f"rows must lie in [0, {capacity - first}] from slot {first}, got {rows!r}")
        if rows == 0:
            return
        launch = self._launch_for(self.slots.terms_used, self.slots.collision_used)
        if rows != launch.rows:
            launch.command.set_dim(rows)
            launch.rows = rows
        if launch.cpu_args is not None and not _cpu_capturing(self.device):
            # The CPU launch without warp's per-call argument packing: the bound arguments' struct is
            # built once; only the block, the first slot and the bounds change.
            launch.cpu_args.block, launch.cpu_args.first = block, first
            launch.command.hooks.forward(ctypes.byref(launch.command.bounds), ctypes.byref(launch.cpu_args))
            return
        launch.command.set_param_at_index(_BLOCK_INDEX, block)
        launch.command.set_param_at_index(_FIRST_INDEX, first)
        launch.command.launch(stream=self.slots.stream())

    def _launch_for(self, terms: frozenset[int], collision: bool) -> _Launch:
        """The recorded launch of the kernel with the secondary ``terms`` and, if ``collision``, the collision term
        compiled in, recorded at its first use."""
        launch = self._launches.get((terms, collision))
        if launch is None or launch.table is not self.slots.obstacles.struct:
            slots = self.slots
            spheres = slots.sphere_layout if collision else None
            kernel_terms = slots.kernel_terms(terms)
            kernel = lm_block_kernel(slots.layout, slots.dtype, slots.lazy_jacobian, kernel_terms, spheres)
            inputs = [slots.chain, slots.problem, slots.state, slots.link_chain, slots.spheres, slots.obstacles.struct]
            with quiet_warp():  # the module compiles or loads here
                command = wp.launch(
                    kernel, dim=slots.capacity, inputs=[*inputs, 1, 0], device=self.device, record_cmd=True
                )
            cpu_args = _cpu_arguments(command) if isinstance(slots, HostStore) else None
            table = slots.obstacles.struct
            launch = self._launches[terms, collision] = _Launch(command, slots.capacity, cpu_args, table)
        return launch


# The launch's inputs: chain, problem, state, link_chain, spheres, obstacles, block, first.
_BLOCK_INDEX, _FIRST_INDEX = 6, 7


@dataclass
class _Launch:
    """One recorded launch: the command, the rows it was last set to, its CPU argument struct (if built) and the
    obstacle table's struct it binds."""

    command: wp.Launch
    rows: int
    cpu_args: ctypes.Structure | None
    table: object


def _cpu_arguments(command: wp.Launch) -> ctypes.Structure | None:
    """The ctypes argument struct of a recorded CPU launch of a forward kernel, built once (warp builds it at every
    ``Launch.launch``); None where this warp version's launch internals differ (launches then go through warp)."""
    try:
        from warp._src.context import _build_cpu_args_structs

        if command.adjoint or command.block_dim > 1 or command.hooks.forward is None:
            return None
        args, _ = _build_cpu_args_structs(command.kernel, command.hooks, command.params, False)
        args.block = args.first = 0  # the fields exist and take ints
        return args
    except (ImportError, AttributeError, TypeError):
        return None


def _cpu_capturing(device: wp.Device) -> bool:
    """Whether a warp CPU capture (APIC) records launches on ``device``: launches then go through warp."""
    capture = getattr(wp._src.context, "_get_apic_capture_for_device", None)
    return capture is not None and capture(device) is not None
