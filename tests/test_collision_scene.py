"""Scenes from plain data (ik_layer.collision.scene): every shape built as its constructor builds it, every bad entry
refused with its place named, files read in YAML and JSON within a size bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ik_layer import Box, Capsule, IKLayerError, Sphere
from ik_layer.collision.scene import MAX_SCENE_BYTES, load_scene, obstacles_from

ENTRIES = [
    {"type": "sphere", "center": [0.4, 0.0, 0.3], "radius": 0.05},
    {"type": "box", "pose": [0.6, 0.0, -0.1, 0, 0, 0, 1], "size": [0.8, 1.0, 0.1]},
    {"type": "capsule", "a": [0.5, -0.4, 0.1], "b": [0.5, -0.4, 0.7], "radius": 0.03},
]


def test_each_entry_becomes_its_shape() -> None:
    sphere, box, capsule = obstacles_from(ENTRIES)
    assert isinstance(sphere, Sphere) and torch.equal(sphere.center, torch.tensor([0.4, 0.0, 0.3], dtype=torch.float64))
    assert isinstance(box, Box) and torch.equal(box.pose, Box(ENTRIES[1]["pose"], ENTRIES[1]["size"]).pose)
    assert isinstance(capsule, Capsule) and float(capsule.radius) == 0.03


@pytest.mark.parametrize("suffix", [".yml", ".json"])
def test_scene_files_are_read(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"scene{suffix}"
    path.write_text(json.dumps({"obstacles": ENTRIES}))  # JSON is YAML too
    assert len(load_scene(path)) == 3
    path.write_text(json.dumps(ENTRIES))  # a bare list
    assert len(load_scene(path)) == 3


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("box", r"obstacles must be a list"),
        ([{"type": "cone"}], r"obstacles\[0\]\.type must be one of"),
        ([ENTRIES[0], {"type": "sphere", "center": [0, 0, 0]}], r"obstacles\[1\] \(sphere\) misses \['radius'\]"),
        ([{**ENTRIES[0], "colour": "red"}], r"unknown fields \['colour'\]"),
        ([{**ENTRIES[0], "radius": -1.0}], r"obstacles\[0\]: radius must be positive"),
        ([{**ENTRIES[0], "radius": True}], r"obstacles\[0\]\.radius must be a number"),
        ([{**ENTRIES[1], "size": [1, 2]}], r"obstacles\[0\]: size must have shape"),
        ([ENTRIES[0]] * 1025, r"more than 1024"),
        (["sphere"], r"obstacles\[0\] must be a mapping"),
    ],
)
def test_bad_entries_are_refused_by_place(entries: object, message: str) -> None:
    with pytest.raises(IKLayerError, match=message):
        obstacles_from(entries)


def test_bad_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(IKLayerError, match="cannot read scene file"):
        load_scene(tmp_path / "missing.yml")
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(IKLayerError, match="is not valid JSON"):
        load_scene(broken)
    large = tmp_path / "large.yml"
    large.write_text("#" * (MAX_SCENE_BYTES + 1))
    with pytest.raises(IKLayerError, match="larger than"):
        load_scene(large)
    keyed = tmp_path / "keyed.yml"
    keyed.write_text("shapes: []\n")
    with pytest.raises(IKLayerError, match="unknown keys"):
        load_scene(keyed)
