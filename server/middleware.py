"""Pure ASGI middleware: request metrics, and refusing oversized or slow bodies before anything parses them."""

from __future__ import annotations

import asyncio
import json
import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ik_layer.server.metrics import Metrics

__all__ = ["BodyLimitMiddleware", "MetricsMiddleware"]

_UNINSTRUMENTED = ("/health", "/metrics")


class MetricsMiddleware:
    """Counts requests, errors and latency by route template; ``/health`` and ``/metrics`` are not traffic."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        # (endpoint, method, status) -> its labelled metrics: a label lookup takes a lock (as many keys as the
        # registry's own series)
        self._labelled: dict[tuple[str, str, int], tuple[Counter, Histogram, Counter | None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _UNINSTRUMENTED:
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or "unmatched"
            requests, seconds, errors = self._metrics_of(endpoint, scope["method"], status)
            requests.inc()
            seconds.observe(time.perf_counter() - start)
            if errors is not None:
                errors.inc()

    def _metrics_of(self, endpoint: str, method: str, status: int) -> tuple[Counter, Histogram, Counter | None]:
        """The request counter, latency histogram and (4xx/5xx) error counter of one kind of request."""
        key = (endpoint, method, status)
        labelled = self._labelled.get(key)
        if labelled is None:
            metrics = self.metrics
            errors = metrics.errors.labels(endpoint, str(status)) if status >= 400 else None
            labelled = (
                metrics.requests.labels(endpoint, method, str(status)),
                metrics.request_seconds.labels(endpoint),
                errors,
            )
            self._labelled[key] = labelled
        return labelled


class BodyLimitMiddleware:
    """Reads each request body up to ``max_bytes`` within ``read_timeout`` seconds, before the app sees a byte.

    A ``Content-Length`` over the limit is refused (413) without reading; chunked
    bodies are counted as they arrive. A body still incomplete after
    ``read_timeout`` is refused with 408 and the connection closed. The body
    read is replayed to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, read_timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                await _refuse(send, 400, "invalid Content-Length header")
                return
            if int(declared) > self.max_bytes:
                await _refuse(send, 413, self._too_large(int(declared)))
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        deadline = time.monotonic() + self.read_timeout
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0))
            except asyncio.TimeoutError:  # the builtin TimeoutError only from Python 3.11
                await _refuse(send, 408, f"the request body did not arrive within {self.read_timeout:g} s")
                return
            if message["type"] != "http.request":  # client gone: let the app see the disconnect
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _refuse(send, 413, self._too_large(size, at_least=True))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    def _too_large(self, size: int, *, at_least: bool = False) -> str:
        return (
            f"request body of {'at least ' if at_least else ''}{size} bytes is over the limit of {self.max_bytes} bytes"
        )


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that first returns ``messages``, then defers to the real one."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status in (408, 413):
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
