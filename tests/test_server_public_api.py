"""The service is a client of the library, through names the library publishes: the package's face
(``ik_layer.__all__``) for what a user calls too, and a library module's ``__all__`` for what only the server
needs (``ik_layer.core.solutions.SolutionSearch``, ``ik_layer.core.options.OptionSpec``...); never a private module
or name (a ``_`` in the path), and never a name a module does not publish. The face keeps what a user calls: the
server-only names are not on it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import ik_layer

SERVER = Path(__file__).resolve().parents[1] / "server"

# Names only the server uses, published by their modules and no longer on the package's face (issue 42).
SERVER_ONLY = {
    "ik_layer.collision.shapes": {"Scenes", "check_obstacles", "check_scenes"},
    "ik_layer.core.options": {"POSTURE_HELP", "OptionSpec"},
    "ik_layer.core.problem": {"check_collision"},
    "ik_layer.core.solutions": {"SolutionSearch", "best_goals", "check_objective", "objective_problem"},
    "ik_layer.model.host": {"QUATERNION_NORM_TOLERANCE", "check_quaternion_norm"},
    "ik_layer.model.sources": {"MODEL_SUFFIXES"},
}


def library_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every use of the library outside ``ik_layer.server``: names imported from it,
    modules imported, and attributes read from the imported ``ik_layer`` module."""
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "ik_layer":
            uses += [(node.lineno, f"{node.module}:{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            uses += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "ik_layer"]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ik_layer":
            uses.append((node.lineno, f"ik_layer:{node.attr}"))
    return [(line, name) for line, name in uses if not name.startswith(("ik_layer.server", "ik_layer:server"))]


def published(module: str) -> set[str]:
    """The names ``module`` publishes: its ``__all__`` (a module without one publishes nothing by name)."""
    return set(getattr(importlib.import_module(module), "__all__", ()))


def is_published(name: str) -> bool:
    """Whether ``name`` (``module`` or ``module:attribute``) is a public module of the library, or a name its module
    publishes; nothing private (a ``_`` part) is."""
    module, _, attribute = name.partition(":")
    if any(part.startswith("_") for part in (*module.split("."), attribute) if part):
        return False
    return not attribute or attribute in published(module)


SOURCES = sorted(SERVER.rglob("*.py"))


def test_the_checks_see_the_server_and_tell_published_from_private_names() -> None:
    files = {path.relative_to(SERVER).as_posix() for path in SOURCES}
    assert {"worker.py", "decode.py", "schemas.py", "routes/ik.py", "served_robots.py"} <= files
    private = (
        "from ik_layer.reference import _Solve\nfrom ik_layer.core.solutions import _distance\n"
        "import ik_layer.model._nothing\nik_layer._EXPORTS\nfrom ik_layer.model.lie import so3_log"
    )
    public = (
        "from ik_layer import Robot, matrix_to_pose\nfrom ik_layer.engine import Request\nik_layer.solve(r, t)\n"
        "from ik_layer.core.solutions import SolutionSearch\nimport ik_layer.model.host"
    )
    assert [is_published(name) for _, name in library_uses(ast.parse(private))] == [False] * 5
    assert [is_published(name) for _, name in library_uses(ast.parse(public))] == [True] * 6


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(SERVER)))
def test_the_server_uses_only_published_names(path: Path) -> None:
    bad = [f"line {line}: {name}" for line, name in library_uses(ast.parse(path.read_text())) if not is_published(name)]
    assert not bad, f"{path.name} uses names the library does not publish: {bad}"


def test_the_face_leaves_the_server_only_names_to_their_modules() -> None:
    on_face = {name for names in SERVER_ONLY.values() for name in names} & set(ik_layer.__all__)
    assert not on_face, f"server-only names on ik_layer's face: {sorted(on_face)}"
    for module, names in SERVER_ONLY.items():
        assert names <= published(module), f"{module} does not publish {sorted(names - published(module))}"
