"""SolveOptions: one declaration of every solver option, checked once, and everything built from it agrees."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from ik_layer import OPTION_SPECS, IKLayerError, SolveOptions
from ik_layer.cli.main import build_parser
from ik_layer.core.options import OptionSpec

ROOT = Path(__file__).resolve().parents[1]
SPECS = list(OPTION_SPECS.values())


def test_specs_are_the_dataclass_fields_with_their_defaults():
    fields = dataclasses.fields(SolveOptions)
    assert [f.name for f in fields] == list(OPTION_SPECS)
    defaults = SolveOptions()
    for spec in SPECS:
        assert getattr(defaults, spec.name) == spec.default
        assert spec.minimum <= spec.default <= spec.maximum
        assert spec.help and spec.help[0].islower() and not spec.help.endswith(".")


def _below(spec: OptionSpec) -> int | float:
    return spec.minimum if spec.exclusive_minimum else spec.minimum - (1 if spec.kind is int else 1e-9)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_bounds_are_enforced_naming_the_option(spec: OptionSpec):
    assert getattr(SolveOptions(**{spec.name: spec.maximum}), spec.name) == spec.maximum
    if not spec.exclusive_minimum:
        assert getattr(SolveOptions(**{spec.name: spec.minimum}), spec.name) == spec.minimum
    above = spec.maximum + (1 if spec.kind is int else 1e-9 * max(1.0, spec.maximum))
    bad = [_below(spec), above, True, "3", None, math.nan, math.inf]
    if spec.kind is int:
        bad.append(float(spec.default))
    for value in bad:
        with pytest.raises(IKLayerError, match=spec.name):
            SolveOptions(**{spec.name: value})


def test_float_options_accept_integers_and_store_floats():
    options = SolveOptions(position_tolerance=1, orientation_tolerance=1)
    assert options.position_tolerance == 1.0 and isinstance(options.position_tolerance, float)


def test_replace_and_build():
    base = SolveOptions(num_seeds=2)
    assert base.replace(max_iterations=7) == SolveOptions(num_seeds=2, max_iterations=7)
    assert SolveOptions.build(base, max_iterations=None, num_seeds=3) == SolveOptions(num_seeds=3)
    assert SolveOptions.build(None) == SolveOptions()
    assert SolveOptions.build(base) is base
    with pytest.raises(IKLayerError, match="unknown solver option"):
        base.replace(seed=1)
    with pytest.raises(IKLayerError, match="options"):
        SolveOptions.build({"num_seeds": 2})  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.num_seeds = 5  # type: ignore[misc]
    assert hash(base) == hash(SolveOptions(num_seeds=2))  # usable as a batching key
    assert base.as_dict()["num_seeds"] == 2


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_build_refuses_bad_values_after_equal_good_ones(spec: OptionSpec):
    """build caches checked keyword changes; a value equal to a cached good one but of another type (True for 1,
    200.0 for 200) or an unhashable one is still checked and refused, naming the option."""
    good = 1 if spec.kind is int else spec.default
    assert getattr(SolveOptions.build(None, **{spec.name: good}), spec.name) == good
    assert SolveOptions.build(None, **{spec.name: good}) == SolveOptions(**{spec.name: good})
    bad = [True, [good]] + ([float(good)] if spec.kind is int else [])
    for value in bad:
        with pytest.raises(IKLayerError, match=spec.name):
            SolveOptions.build(None, **{spec.name: value})


def _solve_parser_actions() -> dict[str, object]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # the subcommands' action
    return {a.dest: a for a in sub.choices["solve"]._actions}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_cli_flags_are_built_from_the_specs(spec: OptionSpec, capsys):
    action = _solve_parser_actions()[spec.name]
    assert action.option_strings == ["--" + spec.name.replace("_", "-")]
    assert action.default == spec.default
    assert spec.help in action.help
    parser = build_parser()
    args = parser.parse_args(["solve", "panda", "t.csv", "-o", "o.csv", action.option_strings[0], str(spec.maximum)])
    assert getattr(args, spec.name) == spec.maximum
    with pytest.raises(SystemExit):
        below = f"{action.option_strings[0]}={_below(spec)}"  # joined: argparse reads "-1e-06" alone as a flag
        parser.parse_args(["solve", "panda", "t.csv", "-o", "o.csv", below])
    assert spec.describe_range() in capsys.readouterr().err


def test_readme_table_matches_the_specs():
    text = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, flags=re.MULTILINE))
    for spec in SPECS:
        assert spec.name in rows, f"README's options table lacks {spec.name}"
        assert float(rows[spec.name].replace(",", "")) == spec.default, spec.name
