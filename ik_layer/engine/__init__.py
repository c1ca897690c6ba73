"""The solver engine: a fused Levenberg-Marquardt kernel (warp) over fixed-shape slots, on the CPU and CUDA.

* :func:`~ik_layer.engine.device.kernel.lm_block_kernel`: the kernel; one launch advances every RUNNING
  slot by up to ``block`` iterations, the same math as the eager solver (:mod:`ik_layer.reference`);
  its joint sines and cosines come from :mod:`ik_layer.model.trig`.
* :class:`~ik_layer.engine.slots.Slots`: the per-row state in torch tensors shared with warp, and the host-side
  writes and reads of it, the same for every store; :mod:`~ik_layer.engine.slot_rows`: its memory, four buffers
  of one row per slot (a group of targets enters, answers and is read back in whole-row copies).
* :mod:`~ik_layer.engine.store`: how the host reaches that memory, chosen once per engine: numpy views
  (:class:`~ik_layer.engine.store.HostStore`, the CPU's default) or torch indexing
  (:class:`~ik_layer.engine.store.TensorStore`, any device).
* :class:`~ik_layer.engine.launch.BlockLauncher`: the recorded launch over a range of slots.
* :class:`~ik_layer.engine.pace.Pacer`: launches sliced to meet a deadline (the clock is read between them).
* :class:`~ik_layer.engine.scheduler.Engine`: a slot pool and its scheduler (submit, step, cancel, deadlines).
* :func:`~ik_layer.engine.warm_up.warm_up_kernels`: every kernel an engine can launch, built before its first request.
"""

from __future__ import annotations

from ik_layer.engine.device.kernel import EMPTY, EXHAUSTED, RUNNING, SOLVED, lm_block_kernel
from ik_layer.engine.launch import BlockLauncher
from ik_layer.engine.scheduler import CANCELLED, DEADLINE, ROW_STATUS, Engine, Request, lone_budget
from ik_layer.engine.slots import Slots
from ik_layer.engine.store import STORES, HostStore, TensorStore, open_store
from ik_layer.engine.warm_up import warm_up_kernels

__all__ = [
    "CANCELLED",
    "DEADLINE",
    "EMPTY",
    "EXHAUSTED",
    "ROW_STATUS",
    "RUNNING",
    "SOLVED",
    "STORES",
    "BlockLauncher",
    "Engine",
    "HostStore",
    "Request",
    "Slots",
    "TensorStore",
    "lm_block_kernel",
    "lone_budget",
    "open_store",
    "warm_up_kernels",
]
