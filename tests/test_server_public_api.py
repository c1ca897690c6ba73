"""The service is a client of the library: it uses only public names (``ik_layer.__all__``, and the engine's
``ik_layer.engine.__all__``), never the library's inner modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ik_layer
import ik_layer.engine

SERVER = Path(__file__).resolve().parents[1] / "server"
PUBLIC = {"ik_layer": set(ik_layer.__all__), "ik_layer.engine": set(ik_layer.engine.__all__)}


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


def is_public(name: str) -> bool:
    """Whether ``name`` (``module`` or ``module:attribute``) is the package itself or a public name of a public
    module."""
    module, _, attribute = name.partition(":")
    return module == "ik_layer" if not attribute else attribute in PUBLIC.get(module, set())


SOURCES = sorted(SERVER.rglob("*.py"))


def test_the_checks_see_the_server_and_tell_public_from_inner_names() -> None:
    files = {path.relative_to(SERVER).as_posix() for path in SOURCES}
    assert {"worker.py", "decode.py", "schemas.py", "routes/ik.py"} <= files
    inner = "from ik_layer.model.lie import matrix_to_pose\nimport ik_layer.model.host\nik_layer.model.lie.so3_log(x)"
    public = "from ik_layer import Robot, matrix_to_pose\nfrom ik_layer.engine import Request\nik_layer.solve(r, t)"
    assert [is_public(name) for _, name in library_uses(ast.parse(inner))] == [False, False, False]
    assert [is_public(name) for _, name in library_uses(ast.parse(public))] == [True, True, True, True]


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(SERVER)))
def test_the_server_uses_only_the_public_api(path: Path) -> None:
    inner = [f"line {line}: {name}" for line, name in library_uses(ast.parse(path.read_text())) if not is_public(name)]
    assert not inner, f"{path.name} reaches into the library: {inner}"
