"""uvicorn's HTTP protocol with a time limit on request headers, so that slow or silent clients are dropped.

uvicorn bounds idle keep-alive connections but not a request whose headers trickle in (or never come):
each such connection would be held for as long as its client likes. :func:`header_timeout_protocol` closes
a connection whose request line and headers are not complete ``seconds`` after the connection opened or the
request began. Bodies are bounded by :class:`ik_layer.server.middleware.BodyLimitMiddleware`.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["header_timeout_protocol"]


def header_timeout_protocol(seconds: float) -> type[HttpToolsProtocol]:
    """A uvicorn ``http`` protocol class that closes connections whose request headers take over ``seconds``."""

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._start_header_timer()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._start_header_timer()

        def on_headers_complete(self) -> None:
            self._stop_header_timer()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_header_timer()
            super().connection_lost(exc)

        def _start_header_timer(self) -> None:
            self._stop_header_timer()
            self._header_timer = self.loop.call_later(seconds, self._headers_too_slow)

        def _stop_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol
