"""The installed distribution exposes one import name, ``ik_layer``; the library never imports the server."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "ik_layer", "server", "robots", "deploy")
SERVER_SIDE = ("ik_layer.server", "ik_layer.deploy")


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """File names inside a wheel built from a copy of the sources (no stale build/ folder can leak in)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(out),
        str(src),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("ik_layer-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_wheel_has_one_top_level_name(wheel_names):
    top = {name.split("/")[0] for name in wheel_names if ".dist-info/" not in name}
    assert top == {"ik_layer"}


def test_wheel_holds_server_robots_and_data(wheel_names):
    for expected in (
        "ik_layer/py.typed",
        "ik_layer/server/app.py",
        "ik_layer/server/routes/ik.py",
        "ik_layer/robots/__init__.py",
        "ik_layer/robots/urdf/panda.urdf",
        "ik_layer/deploy/ray_serve.py",
    ):
        assert expected in wheel_names


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "ik_layer").glob("*.py")), ids=lambda p: p.name)
def test_library_does_not_import_the_server(path):
    bad = {name for name in _imports(path) if name.startswith(SERVER_SIDE)}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for folder in ("ik_layer", "server", "robots", "deploy", "tests", "bench", "examples")
        for p in (ROOT / folder).rglob("*.py")
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_import_of_the_bare_folder_names(path):
    bad = {name for name in _imports(path) if name.split(".")[0] in ("server", "robots", "deploy")}
    assert not bad, (
        f"{path.relative_to(ROOT)} imports {sorted(bad)}: use ik_layer.server / ik_layer.robots / ik_layer.deploy"
    )
