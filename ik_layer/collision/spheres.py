"""A robot's collision model as the solver sees it: spheres fixed to its links.

:func:`load_spheres` reads the shape cuRobo's sphere files use, in YAML or JSON::

    collision_spheres:            # optional: the mapping may also be the whole file
      panda_link1:
        - {center: [0.0, -0.08, 0.0], radius: 0.055}
        - {center: [0.0, -0.03, 0.0], radius: 0.06}
    self_collision_ignore:        # optional: link pairs never checked against each other
      panda_link1: [panda_link3]

each centre in its link's frame [m], each radius > 0 [m]. Every link must be one of the model's; a file holds at
most :data:`MAX_SPHERES` spheres, and each entry is checked (an :class:`~ik_layer.IKLayerError` naming the link
and the entry).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ik_layer.exceptions import IKLayerError, InputFileError

__all__ = ["MAX_SPHERES", "LinkSpheres", "link_pair", "load_disabled_pairs", "load_spheres", "spheres_from_mapping"]

MAX_SPHERES = 4096
"""The most spheres one collision model may hold (every solve iteration measures them)."""


@dataclass(frozen=True)
class LinkSpheres:
    """Spheres fixed to links: sphere ``k`` is centred at ``centers[k]`` (3,) in the frame of link ``links[k]``, of
    radius ``radii[k]`` (float64 tensors on the CPU); ``ignore``: link pairs (sorted names) never checked against
    each other for self-collision."""

    links: tuple[str, ...]
    centers: Tensor
    radii: Tensor
    ignore: frozenset[tuple[str, str]] = frozenset()

    def __len__(self) -> int:
        return len(self.links)

    def of_link(self, link: str) -> tuple[Tensor, Tensor]:
        """The centres (k, 3) and radii (k,) of ``link``'s spheres."""
        mine = torch.tensor([name == link for name in self.links], dtype=torch.bool)
        return self.centers[mine], self.radii[mine]


def spheres_from_mapping(mapping: object, links: Collection[str], source: str = "collision spheres") -> LinkSpheres:
    """The spheres of ``mapping`` (link name -> list of ``{center, radius}``), checked against the model's
    ``links``; ``source`` names where they came from in error messages."""
    ignore: frozenset[tuple[str, str]] = frozenset()
    if isinstance(mapping, Mapping) and "collision_spheres" in mapping:
        unknown = sorted(set(mapping) - {"collision_spheres", "self_collision_ignore"})
        if unknown:
            raise IKLayerError(f"{source}: unknown keys {unknown}; expected collision_spheres, self_collision_ignore")
        ignore = _ignored_pairs(mapping.get("self_collision_ignore") or {}, links, source)
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
        ignore,
    )


def _ignored_pairs(mapping: object, links: Collection[str], source: str) -> frozenset[tuple[str, str]]:
    """The link pairs of a ``self_collision_ignore`` mapping (link -> list of links), each sorted."""
    where = f"{source}: self_collision_ignore"
    if not isinstance(mapping, Mapping):
        raise IKLayerError(f"{where}: expected a mapping of link names to lists of link names")
    pairs: set[tuple[str, str]] = set()
    for link, others in mapping.items():
        if not isinstance(others, list):
            raise IKLayerError(f"{where}: {link}: expected a list of link names, got {type(others).__name__}")
        for other in (link, *others):
            if other not in links:
                raise IKLayerError(f"{where}: {other!r} is not a link of the model")
        pairs.update(link_pair(link, other) for other in others)
    return frozenset(pairs)


def link_pair(a: str, b: str) -> tuple[str, str]:
    """The pair of links ``a`` and ``b``, sorted: how ignored pairs are named."""
    return (a, b) if a <= b else (b, a)


def load_spheres(path: str | os.PathLike[str], links: Collection[str]) -> LinkSpheres:
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


def load_disabled_pairs(path: str | os.PathLike[str], links: Collection[str]) -> frozenset[tuple[str, str]]:
    """The link pairs an SRDF file's ``<disable_collisions link1 link2>`` elements name (sorted names), those
    between ``links`` of the model (an SRDF may name links the model leaves out)."""
    import xml.etree.ElementTree as ET  # only for SRDF files

    file = Path(path)
    try:
        root = ET.fromstring(file.read_text())
    except OSError as err:
        raise InputFileError(f"cannot read SRDF {file}: {err.strerror or err}") from err
    except ET.ParseError as err:
        raise InputFileError(f"{file}: not valid XML: {err}") from err
    pairs = ((e.get("link1", ""), e.get("link2", "")) for e in root.iter("disable_collisions"))
    return frozenset(link_pair(a, b) for a, b in pairs if a in links and b in links)


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
