"""JSON bodies that routes read themselves, so that large ones are parsed off the event loop.

FastAPI parses and validates a declared body model on the event loop; a few megabytes of JSON (or hundreds
of thousands of invalid fields) would stall every other request for seconds. Routes that take a body call
:func:`read_json` instead: 415 unless the body is declared as JSON, small bodies decoded in place, larger
ones in a worker thread. A body without a ``Content-Type`` is refused too: a web page may send one to a local
server cross-origin without a preflight (a CORS "simple request"), as it may ``text/plain`` or form bodies, but
never ``application/json``. :func:`openapi_body` and :func:`document_bodies` keep the OpenAPI document showing
the body models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from ik_layer.server.exceptions import UnsupportedMediaType

__all__ = ["INLINE_BYTES", "disconnected", "document_bodies", "openapi_body", "read_json"]

INLINE_BYTES = 16 * 1024
"""Bodies up to this size are decoded on the event loop (well under a millisecond); larger ones off it."""

T = TypeVar("T")
_COMPONENTS = "#/components/schemas/{model}"


async def read_json(request: Request, decode: Callable[[bytes], T]) -> T:
    """``decode(body)`` of a JSON request body, off the event loop when it is larger than :data:`INLINE_BYTES`.

    Raises:
        UnsupportedMediaType: no ``Content-Type``, or one other than ``application/json`` (or
            ``application/*+json``).
    """
    content_type = request.headers.get("content-type")
    if content_type is None or not _is_json(content_type):
        got = "no Content-Type" if content_type is None else repr(content_type)
        raise UnsupportedMediaType(f"the body must be JSON (Content-Type: application/json), got {got}")
    body = await request.body()
    if len(body) <= INLINE_BYTES:
        return decode(body)
    return await run_in_threadpool(decode, body)


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route reading ``model`` with :func:`read_json` (see :func:`document_bodies`)."""
    schema = {"$ref": _COMPONENTS.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def document_bodies(app: FastAPI, models: Sequence[type[BaseModel]]) -> None:
    """Add the JSON schemas of ``models`` (and the models they use) to ``app``'s OpenAPI components."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        document = generate()  # FastAPI caches it: adding twice is harmless
        components = document.setdefault("components", {}).setdefault("schemas", {})
        for model in models:
            schema = model.model_json_schema(ref_template=_COMPONENTS)
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


async def disconnected(request: Request) -> None:
    """Return when the client disconnects (once the body has been read: the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
