"""A document to upload: sniffed once, read (again) per attempt, from bytes or from disk."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ocrq.shared.sniff import sniff_media_type

CHUNK_BYTES = 256 * 1024
SNIFF_BYTES = 2048  # what the server sniffs too

Source = str | os.PathLike[str] | bytes
# Called as the body goes out: (bytes handed to the connection so far, the document's size).
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class Upload:
    """A document ready to send: its sniffed type, size, and a way to read it (again)."""

    media_type: str
    size: int
    filename: str | None
    data: bytes | None = None
    path: Path | None = None

    def chunks(self, progress: ProgressCallback | None = None) -> Iterator[bytes]:
        """The body for a sync request; a fresh reader per attempt, never the whole file."""
        sent = 0
        for chunk in self._pieces():
            yield chunk
            sent += len(chunk)
            if progress is not None:
                progress(sent, self.size)

    async def achunks(self, progress: ProgressCallback | None = None) -> AsyncIterator[bytes]:
        """The body for an async request; file reads happen off the event loop."""
        sent = 0
        async for chunk in self._apieces():
            yield chunk
            sent += len(chunk)
            if progress is not None:
                progress(sent, self.size)

    def _pieces(self) -> Iterator[bytes]:
        if self.data is not None:
            # Slices of CHUNK_BYTES, so that a progress bar moves for bytes too.
            for start in range(0, len(self.data), CHUNK_BYTES):
                yield self.data[start : start + CHUNK_BYTES]
            return
        assert self.path is not None
        with self.path.open("rb") as f:
            while chunk := f.read(CHUNK_BYTES):
                yield chunk

    async def _apieces(self) -> AsyncIterator[bytes]:
        if self.data is not None:
            for chunk in self._pieces():
                yield chunk
            return
        assert self.path is not None
        f = await asyncio.to_thread(self.path.open, "rb")
        try:
            while chunk := await asyncio.to_thread(f.read, CHUNK_BYTES):
                yield chunk
        finally:
            f.close()

    def headers(self, idempotency_key: str | None) -> dict[str, str]:
        """Content-Type and an explicit Content-Length (the server refuses 413 early)."""
        headers = {"Content-Type": self.media_type, "Content-Length": str(self.size)}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return headers


def prepare_upload(source: Source, filename: str | None = None) -> Upload:
    """Sniff a path or bytes; an unknown type goes as octet-stream and the server says 415."""
    if isinstance(source, bytes):
        media = sniff_media_type(source[:SNIFF_BYTES]) or "application/octet-stream"
        return Upload(media, len(source), filename, data=source)
    path = Path(source)
    with path.open("rb") as f:
        head = f.read(SNIFF_BYTES)
        size = os.fstat(f.fileno()).st_size
    media = sniff_media_type(head) or "application/octet-stream"
    return Upload(media, size, filename or path.name, path=path)


def option_text(value: Any) -> str:
    """An option as the query string carries it (booleans as true/false, a schema as JSON)."""
    if isinstance(value, dict | list):
        return msgspec.json.encode(value).decode()
    return str(value).lower() if isinstance(value, bool) else str(value)


def query_params(upload: Upload, options: dict[str, Any]) -> dict[str, str]:
    """Job options (and the filename) as query parameters; None means the server decides."""
    params = {name: option_text(value) for name, value in options.items() if value is not None}
    if upload.filename:
        params["filename"] = upload.filename
    return params
