"""Secondary cost terms of the solve, one per file (see :mod:`ik_layer.terms.base`): pursued in the null space of
the pose error, ranking the successful seeds, and part of the implicit layer's optimality condition.

The registry holds every term a solve may use, in the order of the engine's per-slot gains and data columns: the
built-in ``posture`` (applied where a posture is given, at the gain
:attr:`ik_layer.core.lm.LMParameters.posture_gain`), ``centring`` and ``manipulability`` (solver options whose value
is the gain; 0: off), then the terms :func:`register_term` adds, which a solve names in its ``terms`` argument with
their gain and per-target data. An engine holds the terms registered when it was built: register a term before the
engines that are to use it (the server builds its engines at start-up).
"""

from collections.abc import Mapping
from typing import TypeVar

from torch import Tensor

from ik_layer.core.lm import LM
from ik_layer.core.options import SolveOptions
from ik_layer.exceptions import IKLayerError
from ik_layer.terms.base import SecondaryTerm, TermInput, data_vector, joint_gradient, joints_of
from ik_layer.terms.centring import CENTRING
from ik_layer.terms.manipulability import MANIPULABILITY
from ik_layer.terms.posture import POSTURE

__all__ = [
    "BUILT_IN",
    "CENTRING",
    "MANIPULABILITY",
    "POSTURE",
    "SecondaryTerm",
    "TermInput",
    "active_terms",
    "added_terms",
    "data_vector",
    "gains_of",
    "joint_gradient",
    "joints_of",
    "rank_of_cost",
    "register_term",
    "registered_terms",
    "term_data",
    "term_named",
    "unregister_term",
    "used_terms",
]

BUILT_IN: tuple[SecondaryTerm, ...] = (POSTURE, CENTRING, MANIPULABILITY)
"""The terms every engine holds, first, with arguments of their own."""

_registered: list[SecondaryTerm] = list(BUILT_IN)

Posture = TypeVar("Posture")  # a posture: a tensor, or an engine store's array


def registered_terms() -> tuple[SecondaryTerm, ...]:
    """Every registered term, in the order of an engine built now's per-slot gains."""
    return tuple(_registered)


def added_terms() -> tuple[SecondaryTerm, ...]:
    """The terms :func:`register_term` added, in order."""
    return tuple(_registered[len(BUILT_IN) :])


def register_term(term: SecondaryTerm) -> None:
    """Add ``term`` to the terms a solve may name in its ``terms`` argument (and HTTP in ``"terms"``), for the
    engines built from now on.

    Raises:
        IKLayerError: ``term`` is not a :class:`SecondaryTerm`, its name is not an identifier or is taken.
    """
    if not isinstance(term, SecondaryTerm):
        raise IKLayerError(f"term must be an ik_layer.terms.SecondaryTerm, got {type(term).__name__}")
    name = getattr(term, "name", None)
    if not (isinstance(name, str) and name.isidentifier()):
        raise IKLayerError(f"a term's name must be an identifier, got {name!r}")
    if any(known.name == name for known in _registered):
        raise IKLayerError(f"a term named {name!r} is registered already")
    _registered.append(term)


def unregister_term(name: str) -> None:
    """Remove the term ``name`` that :func:`register_term` added (engines built since keep it).

    Raises:
        IKLayerError: no such added term (the built-in ones stay).
    """
    term = term_named(name)
    if term in BUILT_IN:
        raise IKLayerError(f"{name!r} is a built-in term: it stays")
    _registered.remove(term)


def term_named(name: object) -> SecondaryTerm:
    """The registered term ``name``.

    Raises:
        IKLayerError: no term of that name is registered.
    """
    for term in _registered:
        if term.name == name:
            return term
    known = ", ".join(term.name for term in _registered)
    raise IKLayerError(f"unknown term {name!r}; registered terms: {known}")


def gains_of(
    options: SolveOptions,
    posture: bool,
    given: Mapping[str, TermInput] | None = None,
    terms: tuple[SecondaryTerm, ...] | None = None,
) -> tuple[float, ...]:
    """Each of ``terms``' gain (0: off; default: the registered terms), for a solve with ``options``, a posture if
    ``posture`` and the added terms ``given``.

    Raises:
        IKLayerError: a term of ``given`` is not among ``terms`` (registered after the engine was built).
    """
    terms = registered_terms() if terms is None else terms
    given = given or {}
    missing = set(given) - {term.name for term in terms}
    if missing:
        raise IKLayerError(
            f"term {sorted(missing)[0]!r} was registered after this engine was built: register terms before "
            "building the engines that use them"
        )
    own = {"posture": LM.posture_gain if posture else 0.0, "centring": options.centring}
    own["manipulability"] = options.manipulability
    return tuple(own[term.name] if term in BUILT_IN else given[term.name].gain if term.name in given else 0.0
                 for term in terms)  # fmt: skip


def term_data(posture: Posture | None, given: Mapping[str, TermInput] | None) -> dict[str, Tensor | Posture]:
    """The per-row data of a solve's terms by name: the posture's (where given) and the added terms'."""
    data: dict[str, Tensor | Posture] = {
        name: term.data for name, term in (given or {}).items() if term.data is not None
    }
    return data if posture is None else data | {"posture": posture}


def used_terms(gains: tuple[float, ...]) -> frozenset[int]:
    """The indices of the terms of non-zero gain among ``gains``."""
    return frozenset(k for k, gain in enumerate(gains) if gain != 0)


def active_terms(terms: tuple[SecondaryTerm, ...], gains: tuple[float, ...]) -> list[tuple[SecondaryTerm, float]]:
    """The ``terms`` of non-zero gain among ``gains``, with their gains."""
    return [(term, gain) for term, gain in zip(terms, gains, strict=True) if gain != 0]


def rank_of_cost(cost: Tensor) -> Tensor:
    """The rank of a success of secondary cost ``cost``: in (0.25, 0.75), increasing with it, so below every
    failure's score (above 1) and below 1 even rounded to float32. The engine's kernel ranks as this."""
    return 0.5 + 0.25 * cost / (1 + cost.abs())
