"""Registers, stack and spills per thread of the LM block kernel on a GPU architecture, measured without a GPU.

Warp compiles each kernel to PTX for ``--arch`` (default 90: H100/H200) ahead of time, on the CPU; ``ptxas -v`` (from
the CUDA toolkit, on PATH) assembles it and reports what every thread of the kernel uses, for both kernels of
:func:`ik_layer.engine.device.kernel.lm_block_kernel` (the lazy Jacobian's, which the tensor store runs, and the eager
one). 255 registers is the
most a thread may hold: past it values spill to local memory (the stack), which caps the warps an SM runs at once
and adds memory traffic. Lower is better; the script prints a Markdown table.

    python bench/kernel_resources.py                           # built-in arms, float32 and float64
    python bench/kernel_resources.py --robot panda --dtype float32
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import warp as wp
from common import markdown_table

from ik_layer import load_robot
from ik_layer.engine.device.kernel import lm_block_kernel

DTYPES = {"float32": torch.float32, "float64": torch.float64}
_USAGE = re.compile(r"Used (\d+) registers")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def resources(robot_name: str, dtype: torch.dtype, lazy: bool, arch: int, ptxas: str) -> dict[str, int]:
    """``registers``, ``stack``, ``spill_stores``, ``spill_loads`` [bytes] per thread of the robot's LM kernel
    (``lazy``: with the lazy Jacobian, as the tensor store runs it on a GPU; else the host store's)."""
    robot = load_robot(robot_name, dtype=dtype)
    kernel = lm_block_kernel(robot.chains.layout, dtype, lazy)
    with tempfile.TemporaryDirectory() as folder:
        wp.compile_aot_module(kernel.module, arch=arch, module_dir=folder, use_ptx=True, strip_hash=True)
        (source,) = Path(folder).glob("*.ptx")
        ptx = source.read_bytes().rstrip(b"\0").decode()
        # warp's NVRTC may write a newer PTX version than the toolkit's ptxas reads; the kernel uses nothing newer.
        ptx = re.sub(r"^\.version \d+\.\d+", f".version {_ptx_version(ptxas)}", ptx, count=1, flags=re.M)
        plain = Path(folder) / "kernel.ptx"
        plain.write_text(ptx)
        report = subprocess.run(
            [ptxas, "-v", f"--gpu-name=sm_{arch}", str(plain), "-o", str(Path(folder) / "kernel.cubin")],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    forward = report[report.index("_cuda_kernel_forward") :]
    registers = int(_USAGE.search(forward).group(1))  # type: ignore[union-attr]
    stack, stores, loads = map(int, _FRAME.search(forward).groups())  # type: ignore[union-attr]
    return {"registers": registers, "stack": stack, "spill_stores": stores, "spill_loads": loads}


def _ptx_version(ptxas: str) -> str:
    """The newest PTX ISA version ``ptxas`` reads (CUDA 13.0: 9.0)."""
    major, minor = _release(ptxas)
    return f"{major - 4}.{minor}"


def _release(ptxas: str) -> tuple[int, int]:
    """The CUDA release of ``ptxas`` (major, minor)."""
    out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = map(int, re.search(r"release (\d+)\.(\d+)", out).groups())  # type: ignore[union-attr]
    return major, minor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", action="append", help="robot (repeatable; default: panda, ur5e, iiwa14)")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), help="(repeatable; default both)")
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (default 90)")
    args = parser.parse_args()
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        print("kernel_resources.py: no ptxas on PATH (install the CUDA toolkit)", file=sys.stderr)
        return 2
    wp.config.quiet = True
    rows = []
    for name in args.robot or ["panda", "ur5e", "iiwa14"]:
        for dtype_name in args.dtype or ["float32", "float64"]:
            for jacobian in ("lazy", "eager"):
                used = resources(name, DTYPES[dtype_name], jacobian == "lazy", args.arch, ptxas)
                rows.append([name, dtype_name, jacobian, *(str(value) for value in used.values())])
                print(f"{name} {dtype_name} {jacobian}: {used}", flush=True)
    header = ["robot", "dtype", "Jacobian", "registers", "stack [B]", "spill stores [B]", "spill loads [B]"]
    print(f"\nLM block kernel, sm_{args.arch}, per thread (lazy Jacobian: the tensor store's, as a GPU runs it; eager:")
    print(f"the host store's); warp {wp.config.version}, ptxas {'.'.join(map(str, _release(ptxas)))}:\n")
    print(markdown_table(header, rows, text_columns=3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
