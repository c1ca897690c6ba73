"""A robot's collision model as the solver sees it: spheres fixed to its links.

:func:`load_spheres` reads the shape cuRobo's sphere files use, in YAML or JSON::

    collision_spheres:            # optional: the mapping may also be the whole file
      panda_link1:
        - {center: [0.0, -0.08, 0.0], radius: 0.055}
        - {center: [0.0, -0.03, 0.0], radius: 0.06}

each centre in its link's frame [m], each radius > 0 [m]. Every link must be one of the model's; a file holds at
most :data:`MAX_SPHERES` spheres, and each entry is checked (an :class:`~ik_layer.IKLayerError` naming the link
and the entry).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ik_layer.exceptions import IKLayerError, InputFileError

__all__ = ["MAX_SPHERES", "LinkSpheres", "load_spheres", "spheres_from_mapping"]

MAX_SPHERES = 4096
"""The most spheres one collision model may hold (every solve iteration measures them)."""


@dataclass(frozen=True)
class LinkSpheres:
    """Spheres fixed to links: sphere ``k`` is centred at ``centers[k]`` (3,) in the frame of link ``links[k]``, of
    radius ``radii[k]`` (float64 tensors on the CPU)."""

    links: tuple[str, ...]
    centers: Tensor
    radii: Tensor

    def __len__(self) -> int:
        return len(self.links)

    def of_link(self, link: str) -> tuple[Tensor, Tensor]:
        """The centres (k, 3) and radii (k,) of ``link``'s spheres."""
        mine = torch.tensor([name == link for name in self.links], dtype=torch.bool)
        return self.centers[mine], self.radii[mine]


def spheres_from_mapping(mapping: object, links: Collection[str], source: str = "collision spheres") -> LinkSpheres:
    """The spheres of ``mapping`` (link name -> list of ``{center, radius}``), checked against the model's
    ``links``; ``source`` names where they came from in error messages."""
    if isinstance(mapping, Mapping) and "collision_spheres" in mapping:
        mapping = mapping["collision_spheres"]
    if not isinstance(mapping, Mapping):
        raise IKLayerError(f"{source}: expected a mapping of link names to lists of spheres")
    names, centers, radii = [], [], []
    for link, entries in mapping.items():
        if link not in links:
            raise IKLayerError(f"{source}: {link!r} is not a link of the model; links: {', '.join(sorted(links))}")
        if not isinstance(entries, list):
            raise IKLayerError(f"{source}: {link}: expected a list of spheres, got {type(entries).__name__}")
        for k, entry in enumerate(entries):
            center, radius = _sphere(entry, f"{source}: {link}[{k}]")
            names.append(str(link))
            centers.append(center)
            radii.append(radius)
            if len(names) > MAX_SPHERES:
                raise IKLayerError(f"{source}: more than {MAX_SPHERES} spheres")
    return LinkSpheres(
        tuple(names),
        torch.tensor(centers, dtype=torch.float64).reshape(-1, 3),
        torch.tensor(radii, dtype=torch.float64),
    )


def load_spheres(path: str | Path, links: Collection[str]) -> LinkSpheres:
    """The spheres in the YAML (``.yml``, ``.yaml``) or JSON file ``path``, checked against the model's ``links``."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as err:
        raise InputFileError(f"cannot read collision spheres {file}: {err.strerror or err}") from err
    if file.suffix.lower() in (".yml", ".yaml"):
        import yaml  # only for YAML files

        try:
            mapping = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise InputFileError(f"{file}: not valid YAML: {err}") from err
    else:
        try:
            mapping = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputFileError(f"{file}: not valid JSON: {err}") from err
    return spheres_from_mapping(mapping, links, str(file))


def _sphere(entry: object, where: str) -> tuple[list[float], float]:
    """``entry``'s centre and radius, checked."""
    if not isinstance(entry, Mapping) or set(entry) != {"center", "radius"}:
        raise IKLayerError(f"{where}: expected {{center: [x, y, z], radius: r}}, got {entry!r}")
    center, radius = entry["center"], entry["radius"]
    if not (isinstance(center, list) and len(center) == 3 and all(_is_number(c) for c in center)):
        raise IKLayerError(f"{where}: center must be 3 numbers, got {center!r}")
    if not all(math.isfinite(c) for c in center):
        raise IKLayerError(f"{where}: center must be finite, got {center!r}")
    if not (_is_number(radius) and math.isfinite(radius) and radius > 0):
        raise IKLayerError(f"{where}: radius must be a positive number, got {radius!r}")
    return [float(c) for c in center], float(radius)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
