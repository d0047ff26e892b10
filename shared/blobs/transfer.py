"""Moving an object's bytes between a stream and a local file, chunk by chunk."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from ocrq.shared.blobs.base import BlobError

CHUNK_BYTES = 1024 * 1024  # one read or write of a stream: big enough to be cheap, small for RAM


class BlobTooLarge(BlobError):
    """The object is larger than the caller allows (download's max_bytes)."""

    def __init__(self, key: str, max_bytes: int) -> None:
        super().__init__(f"object {key!r} is larger than {max_bytes} bytes")
        self.key = key
        self.max_bytes = max_bytes


async def spool_to_file(key: str, chunks: AsyncIterator[bytes], path: Path, max_bytes: int) -> int:
    """Write the chunks to ``path``; BlobTooLarge past max_bytes (the partial file is removed)."""
    out: BinaryIO = await asyncio.to_thread(path.open, "wb")
    size = 0
    done = False
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > max_bytes:
                raise BlobTooLarge(key, max_bytes)
            await asyncio.to_thread(out.write, chunk)
        done = True
    finally:
        await asyncio.to_thread(out.close)
        if not done:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(path.unlink)
    return size


async def file_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> AsyncIterator[bytes]:
    """A local file's bytes, read off the event loop one chunk at a time."""
    source: BinaryIO = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(source.read, chunk_bytes):
            yield chunk
    finally:
        await asyncio.to_thread(source.close)
