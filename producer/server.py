"""The producer's HTTP server: uvicorn with httptools, plus a deadline on request headers.

uvicorn times out an idle keep-alive connection, but not a client that sends its headers a
byte at a time (slowloris): such a client would hold a connection for ever. Here the
headers of every request must be complete within HEADER_TIMEOUT_S of its first byte (or of
the connection); the body has its own deadline, OCRQ_BODY_TIMEOUT_S, in the app.
"""

from __future__ import annotations

import asyncio

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ocrq.shared.errors import ErrorCode
from ocrq.shared.schemas import ErrorBody

HEADER_TIMEOUT_S = 10.0
_BODY = msgspec.json.encode(
    ErrorBody(
        code=ErrorCode.REQUEST_TIMEOUT.value,
        message=f"the request headers took longer than {HEADER_TIMEOUT_S:g} s",
    )
)
TOO_SLOW = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    + f"content-length: {len(_BODY)}\r\n\r\n".encode()
    + _BODY
)


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol; a request whose headers take too long is cut off."""

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the clock for the first request's headers."""
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        """A request starts: its headers are due within the deadline."""
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        """Headers are in: no deadline until the next request begins."""
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Nothing left to time."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.write(TOO_SLOW)
            self.transport.close()
