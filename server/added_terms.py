"""The secondary cost terms a deployment adds (``--terms`` / ``IK_LAYER_TERMS``): imported and registered before the
engines are built, so that IK requests may name them in ``terms``."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from ik_layer import IKLayerError
from ik_layer.terms import SecondaryTerm, register_term, registered_terms

__all__ = ["register_terms"]


def register_terms(specs: Sequence[str]) -> None:
    """Import each ``module:NAME`` of ``specs`` (a :class:`~ik_layer.terms.SecondaryTerm`) and register it; one
    registered already (the same object) is left as it is.

    Raises:
        IKLayerError: a spec that is not ``module:NAME``, a module or name that does not import, or not a term.
    """
    for spec in specs:
        module_name, _, attribute = spec.partition(":")
        if not module_name or not attribute:
            raise IKLayerError(f"a term is given as module:NAME (say my_terms:ELBOW_UP), got {spec!r}")
        try:
            term = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as err:
            raise IKLayerError(f"term {spec!r} does not import: {err}") from None
        if not isinstance(term, SecondaryTerm):
            raise IKLayerError(f"term {spec!r} is a {type(term).__name__}, not an ik_layer.terms.SecondaryTerm")
        if term not in registered_terms():
            register_term(term)
