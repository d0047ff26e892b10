"""Batches and live events for both clients: request bodies, calls, and the SSE line parser."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ocrq.client.calls import Call
from ocrq.client.upload import CHUNK_BYTES, Source

ZIP_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class BatchBody:
    """A batch request's body: one ZIP file as it is, or the files as multipart parts."""

    sources: list[Source]
    boundary: str = field(default_factory=lambda: "ocrq-" + secrets.token_hex(12))

    @property
    def is_zip(self) -> bool:
        """True for one ZIP archive, sent as the body."""
        return len(self.sources) == 1 and _head(self.sources[0]) == ZIP_MAGIC

    @property
    def content_type(self) -> str:
        """application/zip or multipart/form-data with the boundary."""
        return (
            "application/zip" if self.is_zip else f"multipart/form-data; boundary={self.boundary}"
        )

    def chunks(self) -> Iterator[bytes]:
        """The body, one file open at a time (a folder of thousands never opens them all)."""
        if self.is_zip:
            yield from _read(self.sources[0])
            return
        for i, source in enumerate(self.sources):
            yield self._part_head(source, i)
            yield from _read(source)
            yield b"\r\n"
        yield f"--{self.boundary}--\r\n".encode()

    async def achunks(self) -> AsyncIterator[bytes]:
        """The same body for the async client; file reads off the event loop."""
        iterator = self.chunks()
        while (chunk := await asyncio.to_thread(next, iterator, None)) is not None:
            yield chunk

    def _part_head(self, source: Source, index: int) -> bytes:
        name = f"document-{index + 1}" if isinstance(source, bytes) else Path(source).name
        quoted = name.replace("\\", "\\\\").replace('"', '\\"')
        return (
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{quoted}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()


def _head(source: Source) -> bytes:
    if isinstance(source, bytes):
        return source[:4]
    with Path(source).open("rb") as f:
        return f.read(4)


def _read(source: Source) -> Iterator[bytes]:
    if isinstance(source, bytes):
        yield source
        return
    with Path(source).open("rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            yield chunk


def submit_call(body: BatchBody, options: dict[str, Any], idempotency_key: str | None) -> Call:
    """POST /v1/batches with the options as query parameters."""
    params = {k: str(v) for k, v in options.items() if v is not None}
    headers = {"Content-Type": body.content_type}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    return Call("POST", "/v1/batches", params=params, headers=headers, extra_s=600)


def status_call(batch_id: str, limit: int, offset: int) -> Call:
    """GET /v1/batches/{id}."""
    params = {"limit": str(limit), "offset": str(offset)}
    return Call("GET", f"/v1/batches/{batch_id}", params=params)


def sources_of(sources: Source | Iterable[Source]) -> list[Source]:
    """One source or many, as a list."""
    if isinstance(sources, bytes | str | os.PathLike):
        return [sources]
    return list(sources)


class Event(msgspec.Struct):
    """One Server-Sent Event."""

    event: str
    data: Any
    id: str | None = None


class EventParser:
    """Turns SSE lines into events (comments and heartbeats are skipped)."""

    def __init__(self) -> None:
        self.kind = "message"
        self.data: list[str] = []
        self.id: str | None = None

    def line(self, line: str) -> Event | None:
        """Feed one line; an Event when it ended one."""
        if not line:
            if not self.data:
                return None
            event = Event(self.kind, msgspec.json.decode("\n".join(self.data)), self.id)
            self.kind, self.data = "message", []
            return event
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self.data.append(value)
        elif name == "event":
            self.kind = value
        elif name == "id":
            self.id = value
        return None
