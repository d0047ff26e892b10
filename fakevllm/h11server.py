"""A small HTTP/1.1 server on asyncio streams and h11.

Why not uvicorn + ASGI: an ASGI app cannot close its connection without answering (uvicorn
sends a 500 when an app fails before starting a response), and the fake must be able to drop
a connection mid-request exactly as a crashed vLLM would. Owning the transport makes that
honest: ``DropConnection`` aborts the socket with no response bytes. Owning the read side also
lets a handler be cancelled when its client disconnects, as vLLM aborts such a request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus

import h11
import msgspec

READ_CHUNK = 65536
KEEP_ALIVE_IDLE_S = 30.0  # an idle keep-alive connection is closed after this
WRITE_TIMEOUT_S = 30.0
MAX_BODY_BYTES = 512 * 1024 * 1024  # many full-page PNGs in one request stay under this


@dataclass(frozen=True)
class HttpRequest:
    """One complete request."""

    method: str
    path: str
    body: bytes


@dataclass(frozen=True)
class HttpResponse:
    """One complete response."""

    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "application/json"


class DropConnection(Exception):
    """Raised by a handler to close the connection without sending any response."""


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class ClientGone(Exception):
    """The peer closed its side while the request was being handled."""


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler
) -> None:
    """Serve requests on one connection until either side closes it."""
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            request = await read_request(conn, reader, writer)
            if request is None:
                return
            try:
                response = await handle_watching_peer(conn, reader, handler, request)
            except DropConnection:
                writer.transport.abort()
                return
            await write_response(conn, writer, response)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    except h11.RemoteProtocolError as e:
        await refuse_malformed(conn, writer, e)
    except (ClientGone, ConnectionError, TimeoutError, h11.ProtocolError):
        return
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), timeout=1.0)


async def refuse_malformed(
    conn: h11.Connection, writer: asyncio.StreamWriter, error: h11.RemoteProtocolError
) -> None:
    """Answer a request h11 could not parse with its suggested status, when still possible."""
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    status = error.error_status_hint
    message = f"malformed HTTP request: {error}"
    error_body = {"message": message, "type": "BadRequestError", "param": None, "code": status}
    body = msgspec.json.encode({"error": error_body})
    response = HttpResponse(status, body, [("connection", "close")])
    with contextlib.suppress(Exception):
        await write_response(conn, writer, response)


async def read_request(
    conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> HttpRequest | None:
    """Read one whole request; None when the peer closed or idled out between requests."""
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            if conn.they_are_waiting_for_100_continue:
                writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
            timeout = KEEP_ALIVE_IDLE_S if head is None else WRITE_TIMEOUT_S
            try:
                data = await asyncio.wait_for(reader.read(READ_CHUNK), timeout=timeout)
            except TimeoutError:
                return None
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                raise h11.RemoteProtocolError("request body too large")
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            target = head.target.decode("latin-1")
            return HttpRequest(head.method.decode("ascii"), target.split("?", 1)[0], bytes(body))
        elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None


async def handle_watching_peer(
    conn: h11.Connection, reader: asyncio.StreamReader, handler: Handler, request: HttpRequest
) -> HttpResponse:
    """Run the handler; cancel it (raise ClientGone) if the peer closes the connection first."""
    handling = asyncio.ensure_future(handler(request))
    try:
        while True:
            reading = asyncio.ensure_future(reader.read(READ_CHUNK))
            done, _ = await asyncio.wait({handling, reading}, return_when=asyncio.FIRST_COMPLETED)
            if reading in done:
                data = reading.result()
                if not data:
                    raise ClientGone()
                conn.receive_data(data)  # a pipelined next request: h11 keeps it for later
            else:
                reading.cancel()
            if handling in done:
                return handling.result()
    finally:
        if not handling.done():
            handling.cancel()
            await asyncio.wait({handling}, timeout=5.0)


async def write_response(
    conn: h11.Connection, writer: asyncio.StreamWriter, response: HttpResponse
) -> None:
    """Send the response with a Content-Length, then flush with a timeout."""
    headers = [
        ("content-type", response.content_type),
        ("content-length", str(len(response.body))),
        ("server", "fakevllm"),
        *response.headers,
    ]
    reason = HTTPStatus(response.status).phrase.encode("ascii")
    head = h11.Response(status_code=response.status, headers=headers, reason=reason)
    writer.write(conn.send(head))
    writer.write(conn.send(h11.Data(data=response.body)))
    writer.write(conn.send(h11.EndOfMessage()))
    await asyncio.wait_for(writer.drain(), timeout=WRITE_TIMEOUT_S)


async def start_server(handler: Handler, host: str, port: int) -> asyncio.Server:
    """Listen on host:port and serve every connection with ``handler``."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, handler)

    return await asyncio.start_server(on_connection, host, port, limit=READ_CHUNK * 4)
