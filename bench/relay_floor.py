"""The physical floor of an HTTP front on this box: a raw asyncio relay, bytes in, bytes out.

It parses each request with httptools, writes the job hash and its stream entry to Redis as
one hand-packed MULTI/HSET/XADD/EXEC (no client library), and answers 202 once EXEC's
reply is in (a request without a body gets 200 at once): no routing, no validation, no
auth, no logs. Nothing a real producer can do is cheaper, so ``bench_enqueue`` reports
every front as a share of it. bench/ only.

    python -m bench.relay_floor --port 8002 --redis-port 6379
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time

import httptools
import uvloop

ACCEPTED = b"HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\ncontent-length: "
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "


def resp_command(*parts: bytes) -> list[bytes]:
    """One RESP array as a list of buffers (the payload is never copied into a bigger one)."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out += [b"$%d\r\n" % len(part), part, b"\r\n"]
    return out


def job_write(job_id: bytes, data: bytes) -> list[bytes]:
    """MULTI, the job hash (as the peer and ocrq write it), its stream entry, EXEC."""
    now = str(int(time.time() * 1000)).encode()
    fields = [b"id", job_id, b"status", b"queued", b"tenant", b"public"]
    fields += [b"media_type", b"application/pdf", b"size", str(len(data)).encode()]
    fields += [b"created_at", now, b"payload", data]
    return [
        *resp_command(b"MULTI"),
        *resp_command(b"HSET", b"floor:job:" + job_id, *fields),
        *resp_command(b"XADD", b"floor:stream", b"*", b"id", job_id),
        *resp_command(b"EXEC"),
    ]


class RedisLink:
    """One Redis connection: write a transaction, wait for its EXEC reply (the 4th reply)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def transact(self, buffers: list[bytes]) -> None:
        """Send the buffers, read +OK, +QUEUED, +QUEUED and EXEC's two-element array."""
        self.writer.writelines(buffers)
        for _ in range(3):
            line = await self.reader.readline()
            if not line.startswith(b"+"):
                raise RuntimeError(line.decode(errors="replace"))
        assert (await self.reader.readline()).startswith(b"*2")
        await self.reader.readline()  # HSET's count
        await self.reader.readline()  # $len of the entry id
        await self.reader.readline()  # the entry id


class Relay(asyncio.Protocol):
    """One HTTP/1.1 connection, keep-alive, one Redis connection of its own."""

    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.link: RedisLink | None = None
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the task that answers this connection's requests in order."""
        self.transport: asyncio.WriteTransport = transport  # type: ignore[assignment]
        self.task = asyncio.ensure_future(self.serve())

    def data_received(self, data: bytes) -> None:
        """Feed the parser; complete requests land on the queue."""
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        """A request starts."""
        self.body = []

    def on_body(self, body: bytes) -> None:
        """Part of the body."""
        self.body.append(body)

    def on_message_complete(self) -> None:
        """The whole request is in."""
        self.queue.put_nowait(b"".join(self.body))

    def connection_lost(self, exc: Exception | None) -> None:
        """The client went away."""
        self.task.cancel()

    async def serve(self) -> None:
        """Answer each request once Redis has its job."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.redis_port)
        link = RedisLink(reader, writer)
        try:
            while True:
                data = await self.queue.get()
                if not data:  # a GET (the bench's readiness probe and warm-up)
                    self.transport.write(OK + b"2\r\n\r\n{}")
                    continue
                job_id = secrets.token_urlsafe(16).encode()
                await link.transact(job_write(job_id, data))
                body = b'{"id":"%s","status":"queued"}' % job_id
                self.transport.write(ACCEPTED + b"%d\r\n\r\n" % len(body) + body)
        finally:
            writer.close()


async def serve(port: int, redis_port: int) -> None:
    """Listen until killed."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Relay(redis_port), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Parse flags and serve."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--redis-port", type=int, required=True)
    args = p.parse_args()
    uvloop.run(serve(args.port, args.redis_port))


if __name__ == "__main__":
    main()
