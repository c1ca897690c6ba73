"""Without the ``deploy`` extra (Ray missing, simulated), the Ray Serve deployment says what to install, in one line."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

INSTALL = "pip install -e '.[deploy]' in a checkout of ik-layer"


def test_module_entry_prints_the_install_command_without_a_traceback() -> None:
    """``python -m ik_layer.deploy.ray_serve`` with ``import ray`` failing: status 2 and the one line."""
    as_main = "import runpy, sys; sys.modules['ray'] = None; runpy.run_module('ik_layer.deploy.ray_serve', "
    as_main += "run_name='__main__', alter_sys=True)"  # what `python -m` does, after blocking `import ray`
    proc = subprocess.run([sys.executable, "-c", as_main], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"python -m ik_layer.deploy.ray_serve: error: the Ray Serve deployment needs the deploy extra: {INSTALL}"
    ]


def test_import_raises_an_import_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "ik_layer.deploy.ray_serve", raising=False)
    with pytest.raises(ImportError, match=r"needs the deploy extra: pip install -e '\.\[deploy\]'") as caught:
        importlib.import_module("ik_layer.deploy.ray_serve")
    assert isinstance(caught.value.__cause__, ModuleNotFoundError) and caught.value.__cause__.name == "ray"
