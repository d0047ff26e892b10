"""Hostile webhook receivers on loopback: real TCP servers, one thread per connection.

Each reads one HTTP request (head and Content-Length body), records it, then behaves as
told: answers, drips its reply a byte at a time, sends 400 MiB, never answers, redirects.
"""

from __future__ import annotations

import errno
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

Behaviour = Callable[[socket.socket], None]


@dataclass
class Request:
    """One request a receiver read."""

    address: str  # the local address it was received on (127.0.0.x)
    head: dict[str, str]  # header names in lower case
    body: bytes


@dataclass
class Receiver:
    """A listening loopback server and the requests it read."""

    host: str
    port: int
    requests: list[Request] = field(default_factory=list)

    def url(self, path: str = "/hook", host: str | None = None) -> str:
        """http://host:port/path (host: the listener's own address unless named)."""
        return f"http://{host or self.host}:{self.port}{path}"


def read_request(conn: socket.socket) -> tuple[dict[str, str], bytes]:
    """The head and body of one HTTP/1.1 request with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the head")
        data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    head = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    head[":request-line"] = lines[0]
    while len(body) < int(head.get("content-length", "0")):
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head, body


def answer(status: int, extra: str = "") -> Behaviour:
    """Reply with a status and an empty body."""

    def behave(conn: socket.socket) -> None:
        conn.sendall(f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\n{extra}\r\n".encode())

    return behave


def drip(every_s: float = 0.1, size: int = 10_000) -> Behaviour:
    """A 200 whose body comes one byte every ``every_s`` (each read is quick: no read timeout)."""

    def behave(conn: socket.socket) -> None:
        conn.sendall(f"HTTP/1.1 200 OK\r\ncontent-length: {size}\r\n\r\n".encode())
        for _ in range(size):
            time.sleep(every_s)
            conn.sendall(b"x")

    return behave


def huge(total: int = 400 * 1024 * 1024) -> Behaviour:
    """A 200 with a body of ``total`` bytes, sent as fast as the reader takes it."""
    chunk = bytes(1024 * 1024)

    def behave(conn: socket.socket) -> None:
        conn.sendall(f"HTTP/1.1 200 OK\r\ncontent-length: {total}\r\n\r\n".encode())
        for _ in range(total // len(chunk)):
            conn.sendall(chunk)

    return behave


def silent(conn: socket.socket) -> None:
    """Never answer: wait until the sender gives up and closes."""
    conn.settimeout(120)
    while conn.recv(65536):
        pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def receiving(
    behaviour: Behaviour, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
) -> Iterator[Receiver]:
    """A receiver listening on host:port (0: a free port), over TLS when given a context."""
    receiver = Receiver(host, port)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            try:
                if tls is not None:
                    conn = tls.wrap_socket(conn, server_side=True)
                head, body = read_request(conn)
                receiver.requests.append(Request(conn.getsockname()[0], head, body))
                behaviour(conn)
            except OSError:
                pass  # the sender hung up: what a bounded sender does

    server = _Server((host, port), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def twin_receivers(
    first: tuple[str, Behaviour], second: tuple[str, Behaviour]
) -> Iterator[tuple[Receiver, Receiver]]:
    """Two receivers on one port at two loopback addresses (e.g. 127.0.0.2 and 127.0.0.1)."""
    with ExitStack() as stack:
        for _ in range(20):
            a = stack.enter_context(receiving(first[1], first[0]))
            try:
                b = stack.enter_context(receiving(second[1], second[0], a.port))
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
        else:
            raise RuntimeError("no port free on both addresses")
        yield a, b
