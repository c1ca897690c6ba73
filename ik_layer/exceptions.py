"""The one exception family of ik-layer: every input error is a ``ValueError``."""

from __future__ import annotations

from collections.abc import Iterable


class IKLayerError(ValueError):
    """Base class of every error ik-layer raises on bad input."""


class ShapeError(IKLayerError):
    """A tensor argument has the wrong shape."""


class NonFiniteError(IKLayerError):
    """A tensor argument holds NaN or infinite values."""


class DTypeError(IKLayerError):
    """A dtype is not supported (ik-layer computes in float32 or float64) or differs from the robot's."""


class DeviceError(IKLayerError):
    """A device is malformed or unavailable, a tensor has no values (meta) or sits on another device than the robot."""


class InputFileError(IKLayerError):
    """A row file of the command line is missing, unreadable, has the wrong columns or holds invalid rows."""


class CLIError(IKLayerError):
    """A command-line problem reported as one line with exit code 2 (e.g. CUDA asked for but absent)."""


class NoCollisionModel(IKLayerError):
    """Obstacles or self-collision asked of a robot loaded without collision spheres."""


class UnsupportedModelError(IKLayerError):
    """A robot model uses a feature ik-layer does not support (e.g. a floating joint)."""


def _listing(kind: str, name: str, available: Iterable[str]) -> str:
    names = sorted(available)
    return f"unknown {kind} {name!r}; available: {', '.join(names) if names else '(none)'}"


class RobotNotFound(IKLayerError):
    """No built-in robot of that name and no model file at that path.

    ``reason`` says what is wrong with a path (``"no such file"``); without it the message lists ``available``.
    """

    def __init__(self, name: str, available: Iterable[str], reason: str | None = None) -> None:
        listing = _listing("robot", name, available) + " (or give a path to a URDF file)"
        super().__init__(f"{name!r}: {reason}" if reason else listing)
        self.name = name


class FrameNotFound(IKLayerError):
    """The robot model has no frame of that name."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        super().__init__(_listing("frame", name, available))
        self.name = name


class JointNotFound(IKLayerError):
    """The robot model has no joint of that name."""

    def __init__(self, name: str, available: Iterable[str], argument: str = "joint") -> None:
        super().__init__(f"{argument}: " + _listing("joint", name, available))
        self.name = name
