"""Robot sources into Pinocchio models: built-in names, URDF files or text, MJCF files or text, xacro files.

Only kinematics is read: meshes (``package://`` or any other path) are never opened. The parser's
own reason for refusing a model (Pinocchio prints some of them to stderr) is part of the error.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import numpy as np
import pinocchio as pin

from ik_layer.exceptions import IKLayerError, RobotNotFound, UnsupportedModelError
from ik_layer.model.joints import Mimic
from ik_layer.robots import REGISTRY

__all__ = ["MODEL_SUFFIXES", "ModelSource", "read_model"]

_T = TypeVar("_T")
_COMMENT = re.compile(r"<!--.*?-->|<\?.*?\?>|<!DOCTYPE[^>]*>", re.S)
_JOINT = re.compile(r"<joint\b([^>]*?)(?<!/)>(.*?)</joint>", re.S)
MODEL_SUFFIXES = (".urdf", ".xml", ".xacro")  # model files by name: URDF, MJCF, xacro
_ATTRIBUTE = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


@dataclass(frozen=True)
class ModelSource:
    """A parsed robot model and what the file says beyond Pinocchio's model.

    Attributes:
        model: the kinematic model, every joint of the file included.
        name: the built-in name, else the model's name.
        ee_frame: the built-in robot's end-effector frame; None for files and text.
        mimic_joints: the URDF's ``<mimic>`` elements by joint name (Pinocchio loads those joints as free ones).
        urdf: the URDF text (its collision geometry), None for MJCF.
        spheres: the built-in robot's collision sphere file, if it ships one.
        path: the file it was read from (its meshes' paths start there), None for text.
    """

    model: pin.Model
    name: str
    ee_frame: str | None = None
    mimic_joints: Mapping[str, Mimic] = field(default_factory=dict)
    urdf: str | None = None
    spheres: Path | None = None
    path: Path | None = None


def read_model(source: str | os.PathLike[str]) -> ModelSource:
    """Parse ``source``: a built-in name, URDF or MJCF text (a string holding ``<``), or a file.

    Files: ``.xacro`` ones are expanded with the ``xacro`` package (the ``xacro`` extra, or ``pip install xacro``);
    others are MJCF when their root element is ``<mujoco>``, URDF otherwise.

    Raises:
        RobotNotFound: neither a built-in name, XML text nor an existing file (a path, or a name with a model
            file's suffix, says "no such file"; another name lists the built-in robots).
        UnsupportedModelError: the parser refused the model (its reason included).
        IKLayerError: ``source`` of the wrong type, or xacro needed but not installed.
    """
    if not isinstance(source, (str, os.PathLike)):
        raise IKLayerError(
            "name_or_path must be a built-in robot name, a path to a URDF, MJCF or xacro file, or URDF/MJCF text "
            f"(str or Path), got {type(source).__name__}"
        )
    spec = REGISTRY.get(source) if isinstance(source, str) else None
    if spec is not None:
        builtin = _from_xml(spec.urdf.read_text(), repr(str(spec.urdf)), spec.name, spec.ee_frame)
        return replace(builtin, spheres=spec.spheres)
    if isinstance(source, str) and "<" in source:
        return _from_xml(source, "text")
    path = Path(source)
    if not _is_file(path):
        raise RobotNotFound(str(source), REGISTRY, _not_a_file(source))
    text = _expand_xacro(path) if path.suffix == ".xacro" else _read_text(path)
    return replace(_from_xml(text, repr(str(path))), path=path.resolve())


def _from_xml(text: str, origin: str, name: str | None = None, ee_frame: str | None = None) -> ModelSource:
    """Parse URDF or MJCF ``text`` (``origin``, its path or "text", names it in errors)."""
    if _root_tag(text) == "mujoco":
        model = _parse(_mjcf_model, text, f"MJCF {origin}")
        _restore_slide_ranges(model, text)
        return ModelSource(model, name or model.name, ee_frame)
    model = _parse(pin.buildModelFromXML, text, f"URDF {origin}")
    return ModelSource(model, name or model.name, ee_frame, _urdf_extras(model, text), text)


def _urdf_extras(model: pin.Model, text: str) -> dict[str, Mimic]:
    """What Pinocchio's URDF parser drops: a ``<limit>``'s missing bounds become infinite in ``model``; returns
    the mimic joints. A plain scan of the joint elements, as tolerant as the parser (stray text before the
    XML declaration, undeclared namespace prefixes)."""
    mimic = {}
    for attributes, body in _JOINT.findall(_COMMENT.sub("", text)):
        attrs = _attributes(attributes)
        element = re.search(r"<mimic\b([^>]*)>", body)
        if element:
            mimic[attrs.get("name", "")] = _mimic(attrs.get("name", ""), _attributes(element.group(1)))
        limit = re.search(r"<limit\b([^>]*)>", body)
        if limit and attrs.get("type") in ("revolute", "prismatic") and model.existJointName(attrs.get("name", "")):
            _unbound_missing(model, attrs["name"], _attributes(limit.group(1)))
    return mimic


def _mimic(joint: str, attrs: dict[str, str]) -> Mimic:
    """The ``<mimic>`` of ``joint`` from its attributes (URDF defaults: multiplier 1, offset 0)."""
    try:
        return Mimic(attrs["joint"], float(attrs.get("multiplier", 1.0)), float(attrs.get("offset", 0.0)))
    except (KeyError, ValueError) as err:
        raise UnsupportedModelError(f"joint {joint!r}: malformed <mimic {attrs}>: {err!r}") from err


def _unbound_missing(model: pin.Model, joint: str, limit: dict[str, str]) -> None:
    """Make the bounds a URDF ``<limit>`` omits infinite (the URDF parser reads them as 0)."""
    idx = model.joints[model.getJointId(joint)].idx_q
    if "lower" not in limit:
        model.lowerPositionLimit[idx] = -np.inf
    if "upper" not in limit:
        model.upperPositionLimit[idx] = np.inf


def _attributes(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTRIBUTE.finditer(text)}


def _root_tag(text: str) -> str:
    """Name of the first element of XML ``text`` (declarations and comments skipped), "" if none."""
    match = re.search(r"<\s*([\w:.-]+)", _COMMENT.sub("", text))
    return match.group(1) if match else ""


def _mjcf_model(text: str) -> pin.Model:
    """Pinocchio's MJCF parser reads files only: parse ``text`` from a temporary one."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "model.xml")
        path.write_text(text)
        return pin.buildModelFromMJCF(str(path))


def _restore_slide_ranges(model: pin.Model, text: str) -> None:
    """Undo the degree conversion that Pinocchio's MJCF parser (4.1) applies to slide joints' ranges under MuJoCo's
    ``angle="degree"`` (the default): a range of metres divided by 180 / pi. Checked once against a probe model, so
    a parser without the bug is left alone."""
    angle = re.search(r"<compiler\b[^>]*?\bangle\s*=\s*[\"'](\w+)", _COMMENT.sub("", text))
    if (angle is not None and angle.group(1).lower() == "radian") or not _slide_ranges_read_as_degrees():
        return
    for j in range(1, model.njoints):
        joint = model.joints[j]
        if joint.nq == 1 and joint.shortname().startswith(("JointModelP", "JointModelPrismatic")):
            for limits in (model.lowerPositionLimit, model.upperPositionLimit):
                limits[joint.idx_q] *= 180 / np.pi


@functools.cache
def _slide_ranges_read_as_degrees() -> bool:
    """Whether this Pinocchio's MJCF parser converts a slide joint's range as an angle under ``angle="degree"``."""
    probe = '<mujoco><worldbody><body name="b"><joint name="s" type="slide" range="-1 1"/></body></worldbody></mujoco>'
    return abs(float(_mjcf_model(probe).upperPositionLimit[0]) - 1.0) > 1e-9


def _parse(parser: Callable[[str], _T], text: str, label: str) -> _T:
    """``parser(text)``; a refusal raises UnsupportedModelError with the parser's message and what it printed."""
    with _captured_stderr() as printed:
        try:
            return parser(text)
        except (RuntimeError, ValueError) as err:
            reason = " ".join(line.strip() for line in printed().splitlines() if line.strip())
            detail = f"{err}; parser output: {reason}" if reason else str(err)
            raise UnsupportedModelError(f"could not parse {label}: {detail}") from err


@contextmanager
def _captured_stderr() -> Iterator[Callable[[], str]]:
    """Send file descriptor 2 to a temporary file; yields a reader of what was written, replayed on success."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)

        def read() -> str:
            sink.flush()
            sink.seek(0)
            return sink.read().decode(errors="replace")

        try:
            yield read
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            printed = read()
        sys.stderr.write(printed)  # after a success only (parser warnings): a failure's output is in its error


def _expand_xacro(path: Path) -> str:
    """URDF text of the xacro file ``path``."""
    try:
        import xacro
    except ImportError as err:
        raise IKLayerError(f"{str(path)!r} is a xacro file: install the xacro package (pip install xacro)") from err
    try:
        return xacro.process_file(str(path)).toxml()
    except Exception as err:  # xacro raises its own XacroException, OSError, ExpatError...
        raise UnsupportedModelError(f"could not expand xacro {str(path)!r}: {err}") from err


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise UnsupportedModelError(f"could not read {str(path)!r}: {err}") from err


def _not_a_file(source: str | os.PathLike[str]) -> str | None:
    """Why ``source``, not an existing file, names none: None when it reads as a robot's name rather than a path."""
    text = os.fspath(source)
    if isinstance(source, str) and not ("/" in text or os.sep in text or text.lower().endswith(MODEL_SUFFIXES)):
        return None
    with contextlib.suppress(OSError, ValueError):  # names the OS refuses (too long, NUL) are no folder
        if Path(text).is_dir():
            return "is a folder, not a model file"
    return "no such file"


def _is_file(path: Path) -> bool:
    """Whether ``path`` is an existing file; False for names the OS refuses (too long, ...)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False
