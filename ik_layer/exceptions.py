"""The one exception family of ik-layer: every input error is a ``ValueError``."""

from __future__ import annotations

from collections.abc import Iterable


class IKLayerError(ValueError):
    """Base class of every error ik-layer raises on bad input."""


class ShapeError(IKLayerError):
    """A tensor argument has the wrong shape."""


class NonFiniteError(IKLayerError):
    """A tensor argument holds NaN or infinite values."""


class UnsupportedModelError(IKLayerError):
    """A robot model uses a feature ik-layer does not support (e.g. a floating joint)."""


def _listing(kind: str, name: str, available: Iterable[str]) -> str:
    names = sorted(available)
    return f"unknown {kind} {name!r}; available: {', '.join(names) if names else '(none)'}"


class RobotNotFound(IKLayerError):
    """No built-in robot of that name and no URDF file at that path."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        super().__init__(_listing("robot", name, available) + " (or give a path to a URDF file)")
        self.name = name


class FrameNotFound(IKLayerError):
    """The robot model has no frame of that name."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        super().__init__(_listing("frame", name, available))
        self.name = name
