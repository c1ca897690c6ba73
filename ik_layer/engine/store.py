"""The engine's stores: how the host reaches the slots' memory, one class per kind, chosen once per engine.

Every piece of the engine's host-side bookkeeping (admitting targets into slots, retiring them, taking
answers out, reading the step's state) is written once, in :class:`~ik_layer.engine.slots.Slots` and the
scheduler, over a store's arrays; a store defines only how arrays are reached:

* :class:`HostStore` (``"host"``, CPU tensors only): numpy views of the tensors' memory, far cheaper per
  call than torch indexing. The default on the CPU.
* :class:`TensorStore` (``"tensor"``, any device): torch indexing of the tensors. Host indices and values
  reach the device through one staging buffer (pinned on CUDA) by asynchronous copies, recycled after
  the step's one read, which brings the slots' state back in one copy. The default off the CPU; on
  the CPU in CI, so that no branch of it hides behind a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import warp as wp
from torch import Tensor

from ik_layer.engine.slots import Array, Readout, Slots
from ik_layer.exceptions import IKLayerError
from ik_layer.model.lie import numpy_view
from ik_layer.model.robot import Robot
from ik_layer.model.warp_runtime import torch_stream

__all__ = ["STORES", "HostStore", "TensorStore", "default_store", "open_store"]

_ALIGN = 8  # bytes: every staged array starts at a multiple of the widest element


class HostStore(Slots[np.ndarray]):
    """Slots of a CPU robot, reached through numpy views of their tensors."""

    kind = "host"
    lazy_jacobian = False  # a CPU thread takes each candidate's Jacobian in the same walk

    def __init__(self, robot: Robot, capacity: int) -> None:
        if robot.device.type != "cpu":
            raise IKLayerError(f"store 'host' needs a robot on the CPU, got one on {robot.device}; use 'tensor'")
        super().__init__(robot, capacity)

    def array(self, x: Tensor | np.ndarray) -> np.ndarray:
        return numpy_view(x) if isinstance(x, Tensor) else x

    def tensor(self, x: Array) -> Tensor:
        return torch.from_numpy(x) if isinstance(x, np.ndarray) else x

    def copy(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def stage_all(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        return list(values)

    def read(self, top: int) -> Readout:
        return self.readout(self.rows_of["counts"][:top].copy())


class TensorStore(Slots[Tensor]):
    """Slots of a robot on any device, reached through torch indexing of their tensors."""

    kind = "tensor"
    lazy_jacobian = True  # fewer values per GPU thread; on the CPU in CI all the same

    def __init__(self, robot: Robot, capacity: int) -> None:
        super().__init__(robot, capacity)
        self._pinned = self.device.type == "cuda"  # page-locked host memory: copies that do not wait
        self._staging = self._host_buffer(4096)
        self._staged = 0  # bytes of the staging buffer in use since the last read
        self._retired: list[Tensor] = []  # outgrown staging buffers, kept until the copies from them are done
        self._readback = self._host_buffer(0).view(torch.int32)

    def array(self, x: Tensor | np.ndarray) -> Tensor:
        return self.tensor(x)

    def tensor(self, x: Array) -> Tensor:
        return torch.from_numpy(x).to(self.device) if isinstance(x, np.ndarray) else x

    def copy(self, x: Tensor) -> Tensor:
        return x.clone()

    def stage_all(self, values: Sequence[np.ndarray]) -> list[Tensor]:
        """``values`` on the device, copied asynchronously from the staging buffer in one copy (valid until the
        next read)."""
        arrays = [np.ascontiguousarray(v) for v in values]
        if not arrays:
            return []
        starts, end = [], 0
        for array in arrays:  # each at a multiple of the widest element
            start = -(-end // _ALIGN) * _ALIGN
            starts.append(start)
            end = start + array.nbytes
        base = -(-self._staged // _ALIGN) * _ALIGN
        if base + end > len(self._staging):  # outgrown: a larger buffer; the old one lives until the next read
            self._retired.append(self._staging)
            self._staging = self._host_buffer(max(2 * len(self._staging), end))
            base = 0
        self._staged = base + end
        host = self._staging[base : base + end]
        into = host.numpy()
        for array, start in zip(arrays, starts, strict=True):  # host writes (numpy: no device work)
            into[start : start + array.nbytes].view(array.dtype)[:] = array.reshape(-1)
        device = host.to(self.device, non_blocking=True)  # the one copy (on the CPU, the buffer itself)
        return [
            device[start : start + array.nbytes].view(torch.from_numpy(array[:0]).dtype).reshape(array.shape)
            for array, start in zip(arrays, starts, strict=True)
        ]

    def read(self, top: int) -> Readout:
        rows = self.rows_of["counts"][:top]
        if self._readback.numel() < rows.numel():
            self._readback = self._host_buffer(4 * max(rows.numel(), 2 * self._readback.numel())).view(torch.int32)
        host = self._readback[: rows.numel()].view(rows.shape)
        host.copy_(rows)  # waits for the device: every copy staged before has landed too
        self._staged, self._retired = 0, []
        return self.readout(host.numpy().copy())

    def stream(self) -> wp.Stream | None:
        return torch_stream(self.device)

    def _host_buffer(self, size: int) -> Tensor:
        """``size`` bytes of host memory (page-locked on CUDA)."""
        return torch.empty(size, dtype=torch.uint8, pin_memory=self._pinned)


STORES: dict[str, type[HostStore] | type[TensorStore]] = {"host": HostStore, "tensor": TensorStore}
"""The stores by name."""


def default_store(device: torch.device) -> str:
    """The store an engine on ``device`` takes unless told: "host" on the CPU, else "tensor"."""
    return "host" if device.type == "cpu" else "tensor"


def open_store(robot: Robot, capacity: int, store: str | None = None) -> Slots:
    """``capacity`` slots for ``robot`` in the store named ``store`` (default: :func:`default_store`)."""
    if store is None:
        store = default_store(robot.device)
    if store not in STORES:
        raise IKLayerError(f"store must be one of {sorted(STORES)}, got {store!r}")
    return STORES[store](robot, capacity)
