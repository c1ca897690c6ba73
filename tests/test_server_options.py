"""The server's solver options are OPTION_SPECS: request fields and settings checked spec by spec, so none drifts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ik_layer import OPTION_SPECS, SolveOptions
from ik_layer.core.options import OptionSpec
from ik_layer.server.schemas import IKRequest
from ik_layer.server.settings import Settings

SPECS = list(OPTION_SPECS.values())
TARGET = {"position": [0.5, 0.3, 0.0], "orientation": [0.0, 0.0, 0.0, 1.0]}


def bounds_of(schema: dict[str, Any]) -> dict[str, Any]:
    """The type and bounds of a property's JSON schema, its ``null`` branch left out."""
    (branch,) = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
    return {key: branch[key] for key in ("type", "minimum", "exclusiveMinimum", "maximum") if key in branch}


def expected_bounds(spec: OptionSpec) -> dict[str, Any]:
    low = "exclusiveMinimum" if spec.exclusive_minimum else "minimum"
    return {"type": "integer" if spec.kind is int else "number", low: spec.minimum, "maximum": spec.maximum}


def request(**options: object) -> IKRequest:
    return IKRequest.model_validate({"targets": [TARGET], **options})


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_request_field_schema_is_the_spec(spec: OptionSpec) -> None:
    schema = IKRequest.model_json_schema()["properties"][spec.name]
    assert bounds_of(schema) == expected_bounds(spec)
    assert schema["default"] is None
    assert spec.help in schema["description"]
    if spec.unit:
        assert f"[{spec.unit}]" in schema["description"]
    assert spec.name not in IKRequest.model_json_schema().get("required", [])


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_settings_field_is_the_spec(spec: OptionSpec) -> None:
    field = Settings.model_fields[spec.name]
    assert field.default == spec.default and type(field.default) is spec.kind
    assert bounds_of(Settings.model_json_schema()["properties"][spec.name]) == expected_bounds(spec)
    assert spec.help in (field.description or "")


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_request_and_settings_take_exactly_the_spec_range(spec: OptionSpec) -> None:
    step = 1 if spec.kind is int else spec.maximum * 1e-6
    inside = [spec.maximum] + ([spec.minimum + step] if spec.exclusive_minimum else [spec.minimum])
    outside = [spec.maximum + step] + ([spec.minimum] if spec.exclusive_minimum else [spec.minimum - step])
    for value in inside:
        assert getattr(request(**{spec.name: value}), spec.name) == value
        assert getattr(Settings(**{spec.name: value}), spec.name) == value
    for value in outside:
        with pytest.raises(ValidationError, match=spec.name):
            request(**{spec.name: value})
        with pytest.raises(ValidationError, match=spec.name):
            Settings(**{spec.name: value})


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_request_types_are_strict(spec: OptionSpec) -> None:
    refused: list[object] = [True, str(spec.default)] + ([float(spec.default)] if spec.kind is int else [])
    for value in refused:
        with pytest.raises(ValidationError, match=spec.name):
            request(**{spec.name: value})
    if spec.kind is float:  # a JSON integer is a number
        given = request(**{spec.name: 1})
        assert getattr(given, spec.name) == 1.0 and type(getattr(given, spec.name)) is float


def test_settings_take_text_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IK_LAYER_NUM_SEEDS", "8")
    monkeypatch.setenv("IK_LAYER_POSITION_TOLERANCE", "1e-3")
    assert Settings().solve_options() == SolveOptions(num_seeds=8, position_tolerance=1e-3)


def test_settings_defaults_are_the_library_defaults() -> None:
    assert Settings().solve_options() == SolveOptions()
    changed = Settings(max_iterations=7, orientation_tolerance=0.5).solve_options()
    assert changed == SolveOptions().replace(max_iterations=7, orientation_tolerance=0.5)


def test_every_option_is_a_request_field_and_a_setting() -> None:
    assert set(OPTION_SPECS) <= set(IKRequest.model_fields)
    assert set(OPTION_SPECS) <= set(Settings.model_fields)
    assert list(IKRequest.model_fields)[:3] == ["targets", "goals", "warm_start"]
