"""What every object store backend does, and the two ways a store call fails."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Literal, Protocol

import msgspec


class BlobError(Exception):
    """A store call failed; callers outside shared/blobs catch this, never a client's types."""


class BlobMissing(BlobError):
    """The object does not exist (or no longer does)."""


class BlobUnavailable(BlobError):
    """The store did not answer, or answered with an error that a retry may cure
    (connection refused, timeout, 5xx, throttling): at ingest a 503, for a worker an
    outage to wait out."""


class BlobInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One object as a listing or a HEAD sees it."""

    key: str  # relative to the store's prefix
    size: int
    modified_ms: int  # last modified, epoch ms
    etag: str = ""


class BlobStore(Protocol):
    """An object store under one prefix; every key is relative to that prefix.

    Every call has the store's timeout (OCRQ_BLOB_TIMEOUT_S) and raises BlobMissing or
    BlobUnavailable (both BlobError), never the client library's own exceptions.
    """

    url: str  # the configured OCRQ_BLOB_URL, for logs and capabilities
    can_presign: bool  # True: presign() gives URLs a client can use directly

    async def put(self, key: str, data: bytes, content_type: str = "") -> None:
        """Write ``data`` at ``key`` (replacing any object there)."""
        ...

    async def put_file(self, key: str, path: Path, content_type: str = "") -> None:
        """Write a local file at ``key`` without reading it whole into memory (multipart)."""
        ...

    async def put_stream(
        self, key: str, chunks: AsyncIterator[bytes], content_type: str = ""
    ) -> int:
        """Write the chunks at ``key`` as they arrive; returns the bytes written."""
        ...

    async def get(self, key: str) -> bytes:
        """The whole object (for small ones: results, figures)."""
        ...

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the object's end): sniffing a source."""
        ...

    def stream(self, key: str) -> AsyncIterator[bytes]:
        """The object's bytes in chunks, as they arrive (a result streamed to a client).

        BlobMissing is raised by the first ``anext``."""
        ...

    async def download(self, key: str, path: Path, max_bytes: int) -> int:
        """Spool the object to ``path`` chunk by chunk; BlobError past max_bytes (the
        partial file is removed). Returns the size."""
        ...

    async def head(self, key: str) -> BlobInfo | None:
        """The object's size and date; None when it does not exist."""
        ...

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete the objects; a key that does not exist is not an error."""
        ...

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix``; how many there were."""
        ...

    def list(self, prefix: str) -> AsyncIterator[BlobInfo]:
        """Every object under ``prefix``, page by page, in the store's own order (S3 lists
        in key order, SeaweedFS folder by folder): callers that need an order sort."""
        ...

    async def presign(
        self, method: Literal["GET", "PUT"], key: str, expires_s: int, content_type: str = ""
    ) -> str:
        """A URL that lets its holder GET or PUT ``key`` until it expires (S3 SigV4).

        BlobError when the backend cannot presign (``can_presign`` is False)."""
        ...

    async def aclose(self) -> None:
        """Release the client's connections."""
        ...
