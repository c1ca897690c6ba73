"""The public API: explicit, sorted ``__all__`` whose every name imports and is documented."""

from __future__ import annotations

import importlib
import importlib.resources
import inspect

import pytest

import ik_layer

PUBLIC_MODULES = [
    "ik_layer",
    "ik_layer.exceptions",
    "ik_layer.model.robot",
    "ik_layer.model.lie",
    "ik_layer.core.options",
    "ik_layer.robots",
    "ik_layer.testing",
    "ik_layer.client",  # its names are documented where they are defined:
    "ik_layer.client.wire",
    "ik_layer.client.sync",
    "ik_layer.client.aio",
    "ik_layer.client._core",  # RetryPolicy
    "ik_layer.viewer",
]


def test_all_is_sorted_and_unique():
    assert list(ik_layer.__all__) == sorted(set(ik_layer.__all__))


@pytest.mark.parametrize("name", ik_layer.__all__)
def test_every_name_imports(name):
    namespace: dict = {}
    exec(f"from ik_layer import {name}", namespace)  # the way users write it
    assert namespace[name] is getattr(ik_layer, name)


def test_no_public_name_left_out_of_all():
    public = {
        n
        for n, v in vars(ik_layer).items()
        if not n.startswith("_")
        and not inspect.ismodule(v)
        and getattr(v, "__module__", "").split(".")[0] == "ik_layer"
    }
    assert public <= set(ik_layer.__all__), f"exported but not in __all__: {sorted(public - set(ik_layer.__all__))}"


def _public_callables():
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name)
            if getattr(obj, "__module__", None) != module.__name__ and module_name != "ik_layer":
                continue  # re-exported from elsewhere (numpy, torch, ...): documented at its home
            if callable(obj):
                yield f"{module_name}.{name}", obj
                if inspect.isclass(obj):
                    for attr, member in vars(obj).items():
                        if not attr.startswith("_") and (callable(member) or isinstance(member, property)):
                            yield f"{module_name}.{name}.{attr}", member


@pytest.mark.parametrize(("qualname", "obj"), list(_public_callables()), ids=lambda x: x if isinstance(x, str) else "")
def test_public_callables_have_docstrings(qualname, obj):
    doc = inspect.getdoc(obj.fget if isinstance(obj, property) else obj)
    assert doc and doc.strip(), f"{qualname} has no docstring"


def test_module_docstrings():
    for module_name in PUBLIC_MODULES:
        assert inspect.getdoc(importlib.import_module(module_name)), f"{module_name} has no module docstring"


def test_py_typed_is_shipped():
    assert (importlib.resources.files("ik_layer") / "py.typed").is_file()
