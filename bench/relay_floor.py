"""The physical floor of an HTTP front on this box: a raw asyncio relay, bytes in, bytes out.

It parses each request with httptools, writes the job hash and its stream entry to Redis as
one hand-packed MULTI/HSET/XADD/EXEC (no client library), and answers 202 once EXEC's
reply is in (a request without a body gets 200 at once): no routing, no validation, no
auth, no logs. Nothing a real producer can do is cheaper, so ``bench_enqueue`` reports
every front as a share of it. For ``bench_ingest`` it also does the least a front can do for
its other two calls: a DELETE drops the job's hash, and a GET of ``…/events`` follows the
job as Server-Sent Events (each message on ``floor:events`` naming the job is answered with
the job's state, read from its hash; a terminal state ends the stream). A multipart body
is parsed as it arrives, with the push parser ocrq uses, and only its ``file`` part is
stored: the least any multipart front must do. bench/ only.

    python -m bench.relay_floor --port 8002 --redis-port 6379
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time
from typing import NamedTuple

import httptools
import uvloop
from multipart import MultipartSegment, PushMultipartParser

ACCEPTED = b"HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\ncontent-length: "
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
EVENTS = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
JOB_PREFIX = b"floor:job:"
CHANNEL = b"floor:events"
TERMINAL = {b"succeeded", b"failed", b"cancelled"}


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
        *resp_command(b"HSET", JOB_PREFIX + job_id, *fields),
        *resp_command(b"XADD", b"floor:stream", b"*", b"id", job_id),
        *resp_command(b"EXEC"),
    ]


RespReply = bytes | int | list["RespReply"] | None


async def read_reply(reader: asyncio.StreamReader) -> RespReply:
    """One RESP2 reply, nested arrays included; an error reply raises."""
    line = await reader.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"-":
        raise RuntimeError(rest.decode(errors="replace"))
    if kind == b"+":
        return rest
    if kind == b":":
        return int(rest)
    if kind == b"$":
        return None if rest == b"-1" else (await reader.readexactly(int(rest) + 2))[:-2]
    return [await read_reply(reader) for _ in range(int(rest))]


class Request(NamedTuple):
    """One parsed HTTP request: what the relay routes on, and the body."""

    method: bytes
    path: bytes
    body: bytes


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

    async def command(self, *parts: bytes) -> RespReply:
        """One command and its reply."""
        self.writer.writelines(resp_command(*parts))
        return await read_reply(self.reader)


class FilePart:
    """A multipart body's ``file`` part, parsed piece by piece as the body arrives."""

    def __init__(self, boundary: bytes) -> None:
        self.parser = PushMultipartParser(boundary)
        self.pieces: list[bytes] = []
        self.in_file = False

    def feed(self, data: bytes) -> None:
        """One piece of the body: keep what belongs to the file part."""
        for event in self.parser.parse(data):
            if isinstance(event, MultipartSegment):
                self.in_file = event.name == "file"
            elif event and self.in_file:
                self.pieces.append(event)

    def data(self) -> bytes:
        """The file part's bytes, joined once; a malformed body raises."""
        self.parser.close()
        return b"".join(self.pieces)


def form_boundary(content_type: bytes) -> bytes | None:
    """The boundary of a multipart/form-data Content-Type, else None."""
    if not content_type.lower().startswith(b"multipart/form-data"):
        return None
    _, _, boundary = content_type.partition(b"boundary=")
    return boundary.split(b";")[0].strip().strip(b'"') or None


class Relay(asyncio.Protocol):
    """One HTTP/1.1 connection, keep-alive, one Redis connection of its own."""

    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []
        self.form: FilePart | None = None
        self.url = b""
        self.queue: asyncio.Queue[Request] = asyncio.Queue()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the task that answers this connection's requests in order."""
        self.transport: asyncio.WriteTransport = transport  # type: ignore[assignment]
        self.task = asyncio.ensure_future(self.serve())

    def data_received(self, data: bytes) -> None:
        """Feed the parser; complete requests land on the queue."""
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        """A request starts."""
        self.body, self.url, self.form = [], b"", None

    def on_url(self, url: bytes) -> None:
        """Part of the request target."""
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        """A header: a multipart Content-Type makes the body parsed as it comes."""
        if name.lower() == b"content-type" and (boundary := form_boundary(value)):
            self.form = FilePart(boundary)

    def on_body(self, body: bytes) -> None:
        """Part of the body."""
        if self.form is not None:
            self.form.feed(body)
        else:
            self.body.append(body)

    def on_message_complete(self) -> None:
        """The whole request is in."""
        method = self.parser.get_method()
        body = self.form.data() if self.form is not None else b"".join(self.body)
        self.queue.put_nowait(Request(method, self.url, body))

    def connection_lost(self, exc: Exception | None) -> None:
        """The client went away."""
        self.task.cancel()

    async def serve(self) -> None:
        """Answer each request once Redis has done its part."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.redis_port)
        link = RedisLink(reader, writer)
        try:
            while True:
                request = await self.queue.get()
                if request.method == b"POST":
                    await self.enqueue(link, request.body)
                elif request.method == b"DELETE":
                    await link.command(b"DEL", JOB_PREFIX + job_in(request.path))
                    self.transport.write(OK + b"2\r\n\r\n{}")
                elif request.path.endswith(b"/events"):
                    await self.follow(link, job_in(request.path))
                    return
                else:  # /healthz, the bench's readiness probe and warm-up
                    self.transport.write(OK + b"2\r\n\r\n{}")
        finally:
            writer.close()

    async def enqueue(self, link: RedisLink, data: bytes) -> None:
        """The job hash and its stream entry in one transaction, then 202."""
        job_id = secrets.token_urlsafe(16).encode()
        await link.transact(job_write(job_id, data))
        body = b'{"id":"%s","status":"queued"}' % job_id
        self.transport.write(ACCEPTED + b"%d\r\n\r\n" % len(body) + body)

    async def follow(self, link: RedisLink, job_id: bytes) -> None:
        """Send the job's state now and after each message naming it, until it ends."""
        self.transport.write(EVENTS)
        reader, writer = await asyncio.open_connection("127.0.0.1", self.redis_port)
        try:
            writer.writelines(resp_command(b"SUBSCRIBE", CHANNEL))
            await read_reply(reader)
            status = await self.send_state(link, job_id)
            while status not in TERMINAL:
                message = await read_reply(reader)
                data = message[2] if isinstance(message, list) else None
                if isinstance(data, bytes) and job_id in data:
                    status = await self.send_state(link, job_id)
        finally:
            writer.close()
            self.transport.close()

    async def send_state(self, link: RedisLink, job_id: bytes) -> bytes:
        """One event with the job's status and pages done, read from its hash."""
        reply = await link.command(b"HMGET", JOB_PREFIX + job_id, b"status", b"pages_done")
        status, done = reply if isinstance(reply, list) else (None, None)
        status = status if isinstance(status, bytes) else b"queued"
        pages = int(done) if isinstance(done, bytes) else 0  # bytes or None: HMGET's fields
        event = b'{"id":"%s","status":"%s","progress":{"pages_done":%d}}' % (job_id, status, pages)
        self.transport.write(b"data: " + event + b"\n\n")
        return status


def where_job(job_id: str) -> tuple[str, str]:
    """The floor's hash of a job and the channel its changes are published on."""
    return (JOB_PREFIX + job_id.encode()).decode(), CHANNEL.decode()


def job_in(path: bytes) -> bytes:
    """The job id of /v1/jobs/{id} or /v1/jobs/{id}/events."""
    return path.split(b"/")[3]


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
