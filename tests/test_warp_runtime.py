"""``init_warp``: a CPU run without the NVIDIA driver prints no warp driver warning."""

from __future__ import annotations

import subprocess
import sys

from ik_layer.model.warp_runtime import NO_DRIVER, _has_cuda_driver


def test_init_warp_drops_the_no_driver_line_and_only_it():
    code = "from ik_layer.model.warp_runtime import init_warp; init_warp(); import warp; print(warp.is_cpu_available())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split()[-1] == "True", done.stderr
    assert NO_DRIVER not in done.stderr
    plain = subprocess.run(
        [sys.executable, "-c", "import warp; warp.init()"], capture_output=True, text=True, timeout=300
    )  # fmt: skip
    assert (NO_DRIVER in plain.stderr) == (not _has_cuda_driver())  # what init_warp hides, where there is no driver
