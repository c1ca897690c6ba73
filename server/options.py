"""Pydantic fields of the solver options, derived from :data:`ik_layer.OPTION_SPECS` (never retyped here).

The IK request and the server settings both take their option fields from :func:`option_model`, so a default,
a bound or a help line changes in the library (:data:`ik_layer.OPTION_SPECS`) only.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, create_model
from pydantic.fields import FieldInfo

from ik_layer import OPTION_SPECS
from ik_layer.core.options import OptionSpec

__all__ = ["option_field", "option_model"]

M = TypeVar("M", bound=BaseModel)


def option_field(spec: OptionSpec, *, optional: bool) -> tuple[Any, FieldInfo]:
    """The pydantic ``(annotation, Field)`` of one solver option: its type, bounds, and help with unit.

    Args:
        spec: the option.
        optional: a request field: strict type (no ``true`` or ``"3"`` for an int; floats take ints but no text),
            default None, meaning the server's default. Otherwise a setting: lax type (environment variables and
            flags are text), default ``spec.default``.
    """
    # Any: mypy would check these keywords' values against every keyword of Field
    low: dict[str, Any] = {"gt" if spec.exclusive_minimum else "ge": spec.minimum}
    finite: dict[str, Any] = {"allow_inf_nan": False} if spec.kind is float else {}
    # Any: a type made at run time, which mypy cannot read as a type expression
    value: Any = Annotated[spec.kind, Field(strict=optional, le=spec.maximum, **low, **finite)]
    description = f"{spec.help} [{spec.unit}]" if spec.unit else spec.help
    # pydantic types Field(default) as the default's type (for class bodies); it returns a FieldInfo
    if optional:
        return value | None, Field(None, description=description)  # type: ignore[return-value]
    return value, Field(spec.default, description=description)  # type: ignore[return-value]


def option_model(name: str, base: type[M], *, optional: bool) -> type[M]:
    """A subclass ``name`` of ``base`` with one field per solver option (see :func:`option_field`)."""
    # Any: mypy would check the fields against create_model's other keywords (__config__, __doc__...) too
    fields: dict[str, Any] = {spec.name: option_field(spec, optional=optional) for spec in OPTION_SPECS.values()}
    return create_model(name, __base__=base, __module__=__name__, **fields)
