"""The solver's options, declared once: name, default, bounds, unit and help.

:class:`SolveOptions` is what :func:`ik_layer.solve` and the layer take; the
command line's flags and the server's request fields and settings are built
from :data:`OPTION_SPECS`, so a default or a bound is written in one place.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ik_layer.exceptions import IKLayerError

__all__ = ["OPTION_SPECS", "POSTURE_HELP", "OptionSpec", "SolveOptions"]

POSTURE_HELP = (
    "preferred configuration: pulled towards in the Jacobian's null space (a success then polished towards it), used "
    "as a seed, and preferred among "
    "successful seeds (the joints only: with a floating base the base goes where the frames take it)"
)
"""What ``posture`` (an argument of :func:`ik_layer.solve`, a field of the server's IK request) does, in one place."""


@dataclass(frozen=True)
class OptionSpec:
    """One solver option: its type, default, bounds and one line of help.

    Attributes:
        name: the option's name, the same in the library, the CLI (``--num-seeds``) and HTTP.
        kind: ``int`` or ``float``.
        default: the value used when the option is not given.
        minimum: smallest allowed value (excluded when ``exclusive_minimum``).
        maximum: largest allowed value (included).
        help: one line for ``--help``, docstrings and the OpenAPI schema.
        unit: ``"m"``, ``"rad"`` or ``""``.
        exclusive_minimum: whether ``minimum`` itself is refused (tolerances must be > 0).
    """

    name: str
    kind: type
    default: int | float
    minimum: int | float
    maximum: int | float
    help: str
    unit: str = ""
    exclusive_minimum: bool = False

    def check(self, value: object) -> int | float:
        """``value`` if it has the right type and lies in the bounds; else an :class:`IKLayerError` naming it."""
        if isinstance(value, (int, float)) and not isinstance(value, bool) and self._admits(value):
            return float(value) if self.kind is float else value
        raise IKLayerError(f"{self.name} must be {self.describe_range()}, got {value!r}")

    def _admits(self, value: int | float) -> bool:
        """Whether a number ``value`` is of this option's kind (an int; else finite) and lies in the bounds."""
        if not (isinstance(value, int) if self.kind is int else math.isfinite(value)):
            return False
        low_ok = value > self.minimum if self.exclusive_minimum else value >= self.minimum
        return low_ok and value <= self.maximum

    def describe_range(self) -> str:
        """The allowed values in words, e.g. ``an integer in [1, 64]``."""
        noun = "an integer" if self.kind is int else "a number"
        bracket = "(" if self.exclusive_minimum else "["
        unit = f" [{self.unit}]" if self.unit else ""
        return f"{noun} in {bracket}{self.minimum:g}, {self.maximum:g}]{unit}"


def _option(kind: type, default: float, minimum: float, maximum: float, help: str, **extra: Any) -> Any:
    spec = {"kind": kind, "default": default, "minimum": minimum, "maximum": maximum, "help": help, **extra}
    return field(default=default, metadata={"spec": spec})


@dataclass(frozen=True)
class SolveOptions:
    """Options of one IK solve; every field is checked when the object is built.

    Build one with keyword arguments (``SolveOptions(num_seeds=8)``) and derive
    variants with :meth:`replace`. :data:`OPTION_SPECS` holds each field's bounds and help.
    """

    num_seeds: int = _option(
        int,
        4,
        1,
        64,
        "seeds per target at most (a target stalled past restart_after gets another; solved alone, in turn)",
    )
    max_iterations: int = _option(
        int,
        200,
        0,
        10_000,
        "iteration budget per target (its seeds side by side share it; solved alone, they run in turn, up to the sum"
        " over seeds k of max_iterations - k * restart_after)",
    )
    position_tolerance: float = _option(
        float, 1e-4, 0.0, 1.0, "success threshold on the position error", unit="m", exclusive_minimum=True
    )
    orientation_tolerance: float = _option(
        float, 1e-3, 0.0, math.pi, "success threshold on the orientation error", unit="rad", exclusive_minimum=True
    )
    restart_after: int = _option(int, 40, 1, 10_000, "iterations after which an unsolved seed restarts at random")
    check_every: int = _option(int, 4, 1, 1_000, "iterations between progress checks (stalled seeds restart)")
    centring: float = _option(
        float,
        0.0,
        0.0,
        1.0,
        "fraction of the joints' offsets from the middle of their limits pulled per step, in "
        "the pose's null space (0: off); the most centred success ranks first",
    )
    manipulability: float = _option(
        float,
        0.0,
        0.0,
        1.0,
        "gain of the pull away from singularities (down -log of Yoshikawa's measure) per step, "
        "in the pose's null space (0: off; serial arms); the most manipulable success ranks first",
    )

    self_collision: int = _option(
        int,
        0,
        0,
        1,
        "keep the robot's collision spheres apart too (1: on): a success is then free of self-collision (the "
        "pairs of load_robot's collision model)",
    )
    collision_margin: float = _option(
        float,
        0.0,
        0.0,
        1.0,
        "least distance between the robot's spheres and obstacles (or each other) for a success",
        unit="m",
    )
    collision_activation: float = _option(
        float,
        0.05,
        0.0,
        1.0,
        "distance beyond the margin within which a pair of spheres starts to push apart",
        unit="m",
        exclusive_minimum=True,
    )

    def __post_init__(self) -> None:
        key: type = type(self)  # typed `type`: mypy takes a class with its own __hash__ for unhashable
        for spec in _specs(key).values():
            object.__setattr__(self, spec.name, spec.check(getattr(self, spec.name)))

    def replace(self, **changes: Any) -> SolveOptions:
        """A copy with ``changes`` applied (checked); unknown names raise an :class:`IKLayerError`."""
        unknown = sorted(set(changes) - set(OPTION_SPECS))
        if unknown:
            raise IKLayerError(f"unknown solver option(s) {unknown}; valid: {', '.join(OPTION_SPECS)}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def build(cls, options: SolveOptions | None = None, **changes: Any) -> SolveOptions:
        """``options`` (default: the defaults) with the ``changes`` whose value is not None."""
        if options is not None and not isinstance(options, SolveOptions):
            raise IKLayerError(f"options must be a SolveOptions, got {type(options).__name__}")
        key: type = cls  # a cache key: see __post_init__
        base = options if options is not None else _defaults(key)
        given = tuple((name, type(value), value) for name, value in changes.items() if value is not None)
        if not given:
            return base
        try:
            return _replaced(base, given)
        except TypeError:  # an unhashable value: checked (and refused) without the cache
            return base.replace(**{name: value for name, _, value in given})

    def as_dict(self) -> dict[str, int | float]:
        """The options as a plain mapping (for JSON, logs and keyword arguments)."""
        return dataclasses.asdict(self)


@functools.cache
def _defaults(cls: type[SolveOptions]) -> SolveOptions:
    """The default options, built once (they are frozen)."""
    return cls()


@functools.lru_cache(maxsize=256)
def _replaced(base: SolveOptions, given: tuple[tuple[str, type, Any], ...]) -> SolveOptions:
    """``base`` with the changes ``given`` as (name, type, value), cached: a solve called with the same keyword
    options again skips their checks (the type in the key keeps ``True`` or ``200.0`` from passing as 1 or 200)."""
    return base.replace(**{name: value for name, _, value in given})


@functools.cache
def _specs(cls: type) -> Mapping[str, OptionSpec]:
    return {f.name: OptionSpec(name=f.name, **f.metadata["spec"]) for f in dataclasses.fields(cls)}


OPTION_SPECS: Mapping[str, OptionSpec] = _specs(SolveOptions)
"""Every solver option by name, in declaration order."""
