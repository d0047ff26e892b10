"""CPU per upload of the producer app itself, driven in process as ASGI: no HTTP server, no
client on the same cores, so the figure moves only when the app's own work does.

    .venv/bin/python -m bench.bench_request_cpu --sizes 100k,1m --kinds raw,multipart,json

Starts a private Redis, builds the app as shipped (auth with one key, metrics, JSON access log
and audit trail at info), runs its lifespan, then sends each upload one at a time as uvicorn
would: the body in 64 KiB ``http.request`` messages. Prints the process's user + system µs
per upload (Redis's own CPU is not in it), median of the repeats. To compare two trees, run
it in each (``PYTHONPATH=/tmp/before`` from that folder) and interleave the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import arguments
from bench.bench_enqueue import API_KEY, SHIPPED, SIZES, document
from ocrq.shared.embedded import start_server

Message = dict[str, Any]
CHUNK = 64 * 1024  # what uvicorn hands the app per http.request message (httptools reads)
BOUNDARY = "benchboundary0123456789"
KINDS = ("raw", "multipart", "json")


def upload_body(kind: str, data: bytes) -> tuple[bytes, bytes]:
    """(content type, body) of one upload of data in the given format."""
    if kind == "multipart":
        head = (
            f'--{BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="d.pdf"'
            "\r\ncontent-type: application/pdf\r\n\r\n"
        )
        body = head.encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()
        return f"multipart/form-data; boundary={BOUNDARY}".encode(), body
    if kind == "json":
        return b"application/json", b'{"document": "' + base64.b64encode(data) + b'"}'
    return b"application/pdf", data


def http_scope(content_type: bytes, length: int) -> Message:
    """The scope uvicorn builds for POST /v1/jobs."""
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"authorization", f"Bearer {API_KEY}".encode()),
        (b"content-type", content_type),
        (b"content-length", str(length).encode()),
    ]
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/jobs", "raw_path": b"/v1/jobs", "query_string": b"",
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000), "state": {},
    }  # fmt: skip


async def post(app: Any, content_type: bytes, body: bytes) -> int:
    """One upload through the app; its status."""
    pieces = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]
    sent, statuses = iter(range(len(pieces))), []

    async def receive() -> Message:
        i = next(sent, None)
        if i is None:  # the body is all in: a disconnect only if the app waits past it
            await asyncio.sleep(60)
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": pieces[i], "more_body": i < len(pieces) - 1}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(http_scope(content_type, len(body)), receive, send)
    return statuses[0]


async def with_lifespan(app: Any, run: Callable[[], Awaitable[None]]) -> None:
    """Run the app's lifespan around run()."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    started, stopped = asyncio.Event(), asyncio.Event()

    async def send(message: Message) -> None:
        (started if "startup" in message["type"] else stopped).set()

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    task = asyncio.create_task(app(scope, inbox.get, send))
    await inbox.put({"type": "lifespan.startup"})
    await asyncio.wait_for(started.wait(), 30)
    try:
        await run()
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(stopped.wait(), 30)
        await asyncio.wait_for(task, 30)


async def cpu_per_upload(app: Any, kind: str, size: int, count: int) -> float:
    """µs of this process's CPU per upload, after a warm-up."""
    content_type, body = upload_body(kind, document(size))
    for _ in range(max(20, count // 10)):
        status = await post(app, content_type, body)
        if status != 202:
            raise RuntimeError(f"{kind} {size}: {status}")
    started = time.process_time()
    statuses = [await post(app, content_type, body) for _ in range(count)]
    spent = time.process_time() - started
    if set(statuses) != {202}:  # a refusal costs less than an upload: the figure would lie
        raise RuntimeError(f"{kind} {size}: {sorted(set(statuses))}")
    return spent / count * 1e6


async def measure(args: argparse.Namespace) -> dict[tuple[str, str], list[float]]:
    """Every (size, kind) the arguments name, repeats interleaved."""
    from ocrq.producer.app import create_app  # after the OCRQ_* settings are in place

    app = create_app()
    figures: dict[tuple[str, str], list[float]] = {}

    async def run() -> None:
        for _ in range(args.repeats):
            for size in args.sizes:
                count = max(50, args.uploads * 100 * 1024 // SIZES[size])
                for kind in args.kinds:
                    cpu = await cpu_per_upload(app, kind, SIZES[size], count)
                    figures.setdefault((size, kind), []).append(cpu)

    await with_lifespan(app, run)
    return figures


def main() -> None:
    """Parse arguments, start Redis, measure, print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=arguments.names_of(SIZES), default="100k,1m")
    p.add_argument("--kinds", type=arguments.names_of(KINDS), default="raw,multipart,json")
    p.add_argument("--uploads", type=int, default=1000, help="uploads per 100 KB measured")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as discard:
        server = start_server(Path(tmp), aof=False)
        try:
            shipped = {**SHIPPED, "redis_url": f"redis://127.0.0.1:{server.port}/0"}
            os.environ.update({f"OCRQ_{k.upper()}": v for k, v in shipped.items()})
            os.environ["OCRQ_LOG_FORMAT"] = "json"
            with contextlib.redirect_stderr(discard):  # the log lines: written, not kept
                figures = asyncio.run(measure(args))
        finally:
            server.stop()
    print("| size | format | CPU µs per upload, median (min..max) |\n|---|---|--:|")
    for (size, kind), values in figures.items():
        low, high = min(values), max(values)
        print(f"| {size} | {kind} | {statistics.median(values):,.0f} ({low:,.0f}..{high:,.0f}) |")


if __name__ == "__main__":
    main()
