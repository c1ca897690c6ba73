"""The installed distribution exposes one import name, ``ik_layer``; the library never imports the server."""

from __future__ import annotations

import ast
import json
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
        "ik_layer/client/sync.py",
        "ik_layer/robots/__init__.py",
        "ik_layer/robots/urdf/panda.urdf",
        "ik_layer/deploy/ray_serve.py",
    ):
        assert expected in wheel_names


def test_wheel_holds_every_source_module(wheel_names):
    """Every module of the sources, installed where the package-dir mapping puts it (a package left out of
    pyproject.toml's list installs without it, and only an editable install hides that)."""
    installed = {"ik_layer": "ik_layer", "server": "ik_layer/server", "robots": "ik_layer/robots",
                 "deploy": "ik_layer/deploy"}  # fmt: skip
    expected = {
        f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder, prefix in installed.items()
        for path in (ROOT / folder).rglob("*.py")
    }
    assert expected - set(wheel_names) == set()


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


# --- light imports and the client-only distribution (client-packaging/) -----------------------------------------------

HEAVY = ("torch", "warp", "pinocchio")
WEB = ("fastapi", "uvicorn")


@pytest.mark.parametrize(
    ("module", "absent"),
    [("ik_layer", HEAVY), ("ik_layer.client", HEAVY), ("ik_layer.server", WEB), ("ik_layer.server.decode", WEB)],
)
def test_import_loads_only_what_the_module_uses(module, absent):
    code = f"import sys, {module}; print(sorted(set({absent!r}) & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import {module} loaded {done.stdout.strip()}"


def test_lazy_names_match_all_and_the_typed_imports():
    import ik_layer

    homes = {name: module for module, names in ik_layer._EXPORTS.items() for name in names}
    assert sorted(homes) == ik_layer.__all__
    typed = {}  # the `if TYPE_CHECKING:` imports that type checkers read
    for node in ast.walk(ast.parse((ROOT / "ik_layer" / "__init__.py").read_text())):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            typed = {a.name: imp.module for imp in node.body if isinstance(imp, ast.ImportFrom) for a in imp.names}
    assert typed == homes


CLIENT_FILES = {
    "ik_layer/__init__.py",
    "ik_layer/client/__init__.py",
    "ik_layer/client/_core.py",
    "ik_layer/client/aio.py",
    "ik_layer/client/sync.py",
    "ik_layer/client/wire.py",
    "ik_layer/exceptions.py",
    "ik_layer/core/__init__.py",
    "ik_layer/model/__init__.py",
    "ik_layer/model/host.py",
    "ik_layer/core/options.py",
    "ik_layer/py.typed",
}


@pytest.fixture(scope="module")
def client_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ik-layer-client wheel built from client-packaging/ (offline: hatchling from this environment)."""
    out = tmp_path_factory.mktemp("client-wheel")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
    subprocess.run([*command, str(ROOT / "client-packaging")], check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("ik_layer_client-*.whl")
    return wheel


def test_client_wheel_holds_the_client_alone(client_wheel):
    with zipfile.ZipFile(client_wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {n for n in names if ".dist-info/" not in n} == CLIENT_FILES
    requires = sorted(
        line.split(":", 1)[1].split(">")[0].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    )
    assert requires == ["httpx", "numpy"]
    import ik_layer

    assert f"ik_layer_client-{ik_layer.__version__}-" in client_wheel.name


CLIENT_ONLY = r"""
import json
import sys
for name in ("torch", "warp", "pinocchio"):
    sys.modules[name] = None  # not installed: importing them raises ImportError
sys.meta_path[:] = [f for f in sys.meta_path if not f.__module__.startswith("__editable__")]  # no checkout
sys.path.insert(0, sys.argv[1])
import httpx
import numpy as np
import ik_layer
from ik_layer.client import Client

assert ik_layer.__file__.startswith(sys.argv[1]), ik_layer.__file__
try:
    ik_layer.solve
except ImportError as err:
    print("solve:", err)
ROBOT = {"name": "planar3", "dof": 3, "joint_names": ["a", "b", "c"], "lower": [-3] * 3, "upper": [3] * 3,
         "ee_frame": "tip"}
def answer(request):
    if request.url.path == "/v1/robots":
        return httpx.Response(200, json={"robots": [ROBOT]})
    target = json.loads(request.content)["targets"][0]
    print("sent:", json.dumps(target))
    solution = {"q": [0.1, 0.2, 0.3], "success": True, "position_error": 1e-9, "orientation_error": 2e-9,
                "iterations": 4, "status": "solved"}
    return httpx.Response(200, json={"robot": "planar3", "solutions": [solution]})
with Client("http://ik.test", transport=httpx.MockTransport(answer)) as client:
    turn = np.array([[0.0, -1, 0, 0.5], [1, 0, 0, 0.2], [0, 0, 1, 0], [0, 0, 0, 1]])  # 90 degrees about z
    result = client.solve("planar3", turn)
print("q:", type(result.q).__name__, result.q.tolist(), result.status)
"""


def test_client_only_install_solves_over_http_and_points_to_the_full_package(client_wheel, tmp_path):
    with zipfile.ZipFile(client_wheel) as archive:
        archive.extractall(tmp_path / "site")
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_ONLY, str(tmp_path / "site")], capture_output=True, text=True, timeout=120,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert "client-only install" in lines["solve"] and "pip install -e ." in lines["solve"]
    half = 0.5**0.5  # the 4x4 target went out as a pose with the quaternion of a quarter turn about z
    assert json.loads(lines["sent"]) == {"position": [0.5, 0.2, 0.0], "orientation": pytest.approx([0, 0, half, half])}
    assert lines["q"] == "ndarray [0.1, 0.2, 0.3] solved"
