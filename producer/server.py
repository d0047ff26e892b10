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
MAX_HEADER_BYTES = 64 * 1024  # a request line and headers longer than this get 431


def _answer(status: str, code: ErrorCode, message: str) -> bytes:
    body = msgspec.json.encode(ErrorBody(code=code.value, message=message))
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n"
    return head.encode() + f"content-length: {len(body)}\r\n\r\n".encode() + body


TOO_BIG = _answer(
    "431 Request Header Fields Too Large",
    ErrorCode.INVALID_REQUEST,
    f"the request headers are over {MAX_HEADER_BYTES // 1024} KiB",
)
TOO_SLOW = _answer(
    "408 Request Timeout",
    ErrorCode.REQUEST_TIMEOUT,
    f"the request headers took longer than {HEADER_TIMEOUT_S:g} s",
)


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol; a request whose headers take too long is cut off."""

    _header_timer: asyncio.TimerHandle | None = None
    _header_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the clock for the first request's headers."""
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        """A request starts: its headers are due within the deadline."""
        super().on_message_begin()
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Count what arrives while the headers are still incomplete: endless ones are cut off."""
        super().data_received(data)
        if self._header_timer is not None:  # parsed, and still no end of the headers
            self._header_bytes += len(data)
            if self._header_bytes > MAX_HEADER_BYTES:
                self._refuse(TOO_BIG)

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
        self._header_bytes = 0
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._refuse, TOO_SLOW)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _refuse(self, answer: bytes) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(answer)
            self.transport.close()
