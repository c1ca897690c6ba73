"""warp beside torch: initialised quietly on a machine without the NVIDIA driver; launches on torch's stream.

warp's native library prints "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver" to the
process's stderr (C ``fprintf``, no Python logging, no ``warp.config`` switch) when :func:`warp.init` finds
no driver: every CPU run would show it. :func:`init_warp` drops that one line and nothing else, and changes
no warp setting.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import torch
import warp as wp

if TYPE_CHECKING:
    from warp._src.codegen import Struct  # what @wp.struct returns; warp exports no public name for it

__all__ = ["bind_struct", "init_warp", "quiet_warp", "torch_stream"]

NO_DRIVER = "Could not find or load the NVIDIA CUDA driver"


@contextlib.contextmanager
def quiet_warp() -> Iterator[None]:
    """warp's informational messages (its banner, module compile and load times) silenced inside, and the user's
    ``wp.config.log_level`` restored after: the library changes no warp setting for good."""
    saved = wp.config.log_level
    wp.config.log_level = max(saved, wp.LOG_WARNING)
    try:
        yield
    finally:
        wp.config.log_level = saved


@functools.cache
def init_warp() -> None:
    """:func:`warp.init`, without warp's no-driver line on stderr when there is no CUDA driver (other output kept);
    once per process (later calls return at once)."""
    if _has_cuda_driver():
        with quiet_warp():
            wp.init()
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            with quiet_warp():
                wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        kept = [line for line in captured.read().decode(errors="replace").splitlines(True) if NO_DRIVER not in line]
    sys.stderr.write("".join(kept))


def _has_cuda_driver() -> bool:
    """Whether the NVIDIA driver library loads (as warp looks for it: libcuda.so, libcuda.so.1, nvcuda.dll)."""
    for name in ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so", "libcuda.so.1"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def torch_stream(device: torch.device) -> wp.Stream | None:
    """torch's current stream on ``device`` as a warp stream, so that launches keep torch's order (None on the
    CPU)."""
    if device.type != "cuda":
        return None
    return wp.stream_from_torch(torch.cuda.current_stream(device))


def bind_struct(struct_type: Struct, tensors: Mapping[str, torch.Tensor]) -> object:
    """A ``struct_type`` (a ``@wp.struct``) whose array fields are warp views of ``tensors`` (by field name; the
    tensors must outlive it)."""
    struct = struct_type()
    for name, tensor in tensors.items():
        dtype = struct_type.vars[name].type.dtype  # type: ignore[attr-defined]  # a field's wp.array annotation
        setattr(struct, name, wp.from_torch(tensor, dtype=dtype))
    return struct
