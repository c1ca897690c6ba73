"""Collision sphere files (ik_layer.collision.spheres): cuRobo's shape in YAML and JSON, checked against the model's
links, every bad entry refused with its place named, and the count bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from ik_layer import IKLayerError
from ik_layer.collision.spheres import MAX_SPHERES, load_spheres, spheres_from_mapping
from ik_layer.exceptions import InputFileError

LINKS = {"base", "upper_arm", "forearm"}
SPHERES = {
    "upper_arm": [{"center": [0.0, 0.0, 0.1], "radius": 0.05}, {"center": [0.0, 0.0, 0.2], "radius": 0.04}],
    "forearm": [{"center": [0.1, 0.0, 0.0], "radius": 0.03}],
}


@pytest.mark.parametrize("suffix", [".yml", ".yaml", ".json"])
@pytest.mark.parametrize("nested", [False, True], ids=["bare", "under collision_spheres"])
def test_files_load_as_written(tmp_path: Path, suffix: str, nested: bool) -> None:
    content = {"collision_spheres": SPHERES} if nested else SPHERES
    path = tmp_path / f"spheres{suffix}"
    path.write_text(json.dumps(content) if suffix == ".json" else yaml.safe_dump(content, sort_keys=False))
    spheres = load_spheres(path, LINKS)
    assert spheres.links == ("upper_arm", "upper_arm", "forearm") and len(spheres) == 3
    expected = torch.tensor([[0, 0, 0.1], [0, 0, 0.2], [0.1, 0, 0]], dtype=torch.float64)
    torch.testing.assert_close(spheres.centers, expected)
    torch.testing.assert_close(spheres.radii, torch.tensor([0.05, 0.04, 0.03], dtype=torch.float64))
    centers, radii = spheres.of_link("forearm")
    assert centers.tolist() == [[0.1, 0.0, 0.0]] and radii.tolist() == [0.03]


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"wrist": [{"center": [0, 0, 0], "radius": 0.1}]}, "'wrist' is not a link of the model; links: base, forearm"),
        ({"forearm": [{"center": [0, 0, 0], "radius": -0.1}]}, r"forearm\[0\]: radius must be a positive number"),
        ({"forearm": [{"center": [0, 0, 0], "radius": 0}]}, "radius must be a positive number"),
        ({"forearm": [{"center": [0, float("nan"), 0], "radius": 0.1}]}, r"forearm\[0\]: center must be finite"),
        ({"forearm": [{"center": [0, 0], "radius": 0.1}]}, "center must be 3 numbers"),
        ({"forearm": [{"center": [0, 0, True], "radius": 0.1}]}, "center must be 3 numbers"),
        ({"forearm": [{"centre": [0, 0, 0], "radius": 0.1}]}, r"expected \{center: \[x, y, z\], radius: r\}"),
        ({"forearm": {"center": [0, 0, 0], "radius": 0.1}}, "forearm: expected a list of spheres"),
        ([1, 2], "expected a mapping of link names"),
    ],
)
def test_bad_entries_are_refused_naming_their_place(mapping: object, message: str) -> None:
    with pytest.raises(IKLayerError, match=message):
        spheres_from_mapping(mapping, LINKS)


def test_the_sphere_count_is_bounded() -> None:
    many = {"forearm": [{"center": [0, 0, 0], "radius": 0.01}] * (MAX_SPHERES + 1)}
    with pytest.raises(IKLayerError, match=f"more than {MAX_SPHERES} spheres"):
        spheres_from_mapping(many, LINKS)


def test_unreadable_and_malformed_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="cannot read collision spheres"):
        load_spheres(tmp_path / "missing.yml", LINKS)
    broken = tmp_path / "broken.yml"
    broken.write_text("forearm: [{center: [0, 0")
    with pytest.raises(InputFileError, match="not valid YAML"):
        load_spheres(broken, LINKS)
    broken_json = tmp_path / "broken.json"
    broken_json.write_text("{")
    with pytest.raises(InputFileError, match="not valid JSON"):
        load_spheres(broken_json, LINKS)
