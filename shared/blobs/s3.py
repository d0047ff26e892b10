"""The s3://bucket/prefix backend on obstore (any S3-compatible store, SigV4 presigning)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import obstore
from obstore.exceptions import (
    BaseError,
    InvalidPathError,
    NotFoundError,
    NotSupportedError,
)
from obstore.store import S3Store

from ocrq.shared.blobs.base import BlobError, BlobInfo, BlobMissing, BlobUnavailable
from ocrq.shared.blobs.transfer import CHUNK_BYTES, BlobTooLarge, spool_to_file

if TYPE_CHECKING:
    from obstore import GetResult, ObjectMeta

    from ocrq.shared.settings import BlobSettings

PART_BYTES = 8 * 1024 * 1024  # multipart part size for put_file / put_stream
PART_CONCURRENCY = 4  # parts in flight per upload
LIST_PAGE = 1000  # keys per LIST request (S3's maximum)


def bucket_and_prefix(url: str) -> tuple[str, str]:
    """("bucket", "prefix") of s3://bucket/prefix (the prefix without slashes at its ends)."""
    if not url.startswith("s3://"):
        raise ValueError(f"{url!r} is not s3://bucket/prefix")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"{url!r} names no bucket")
    return bucket, prefix.strip("/")


class S3Blobs:
    """A BlobStore on an S3 bucket under a prefix; credentials from AWS_* or the usual chain."""

    can_presign = True

    def __init__(self, url: str, store: S3Store) -> None:
        self.url = url
        self.store = store

    @classmethod
    def from_settings(cls, blobs: BlobSettings) -> S3Blobs:
        """The store OCRQ_BLOB_URL, OCRQ_S3_ENDPOINT and OCRQ_S3_REGION name."""
        bucket, prefix = bucket_and_prefix(blobs.blob_url)
        config: dict[str, Any] = {"region": blobs.s3_region}
        if blobs.s3_endpoint:
            config["endpoint"] = blobs.s3_endpoint
        store = S3Store(
            bucket,
            prefix=prefix or None,
            client_options={
                "allow_http": blobs.s3_endpoint.startswith("http://"),
                "connect_timeout": timedelta(seconds=min(blobs.blob_timeout_s, 10.0)),
                # A big object's GET streams for longer than one call's timeout; the
                # metered wrapper bounds each chunk instead (obstore's default is 30 s).
                "timeout": timedelta(hours=6),
            },
            retry_config={
                "max_retries": 3,
                "retry_timeout": timedelta(seconds=blobs.blob_timeout_s),
                "backoff": {
                    "init_backoff": timedelta(milliseconds=100),
                    "max_backoff": timedelta(seconds=2),
                    "base": 2,
                },
            },
            **config,
        )
        return cls(blobs.blob_url, store)

    async def put(self, key: str, data: bytes, content_type: str = "") -> None:
        """Write ``data`` at ``key`` (one PUT; multipart above PART_BYTES)."""
        with _mapped(key):
            await obstore.put_async(
                self.store, key, data, attributes=_attributes(content_type), chunk_size=PART_BYTES
            )

    async def put_file(self, key: str, path: Path, content_type: str = "") -> None:
        """Upload a local file, in parts when it is large (obstore reads it, not Python)."""
        with _mapped(key):
            await obstore.put_async(
                self.store,
                key,
                path,
                attributes=_attributes(content_type),
                chunk_size=PART_BYTES,
                max_concurrency=PART_CONCURRENCY,
            )

    async def put_stream(
        self, key: str, chunks: AsyncIterator[bytes], content_type: str = ""
    ) -> int:
        """Upload the chunks as they arrive (a multipart upload); returns the bytes written."""
        counted = _CountedChunks(chunks)
        with _mapped(key):
            await obstore.put_async(
                self.store,
                key,
                counted.chunks(),
                attributes=_attributes(content_type),
                chunk_size=PART_BYTES,
                max_concurrency=PART_CONCURRENCY,
            )
        return counted.size

    async def get(self, key: str) -> bytes:
        """The whole object."""
        with _mapped(key):
            result = await obstore.get_async(self.store, key)
            return bytes(await result.bytes_async())

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end; b"" past it)."""
        if length <= 0:
            return b""
        try:
            with _mapped(key):
                result = await obstore.get_async(
                    self.store, key, options={"range": {"offset": start}} if start else None
                )
                return await _first_bytes(result, length)
        except BlobUnavailable as e:
            # 416: the object exists and ends before ``start`` (obstore has no status field)
            if "416 Range Not Satisfiable" in str(e.__cause__):
                return b""
            raise

    async def _open(self, key: str) -> GetResult:
        with _mapped(key):
            return await obstore.get_async(self.store, key)

    async def stream(self, key: str) -> AsyncIterator[bytes]:
        """The object in chunks of about CHUNK_BYTES, as they arrive."""
        result = await self._open(key)
        with _mapped(key):
            async for chunk in result.stream(min_chunk_size=CHUNK_BYTES):
                yield chunk

    async def download(self, key: str, path: Path, max_bytes: int) -> int:
        """Spool the object to ``path``; BlobTooLarge past max_bytes, before any byte when
        the store gives the size up front."""
        result = await self._open(key)
        if result.meta["size"] > max_bytes:
            raise BlobTooLarge(key, max_bytes)

        async def chunks() -> AsyncIterator[bytes]:
            with _mapped(key):
                async for chunk in result.stream(min_chunk_size=CHUNK_BYTES):
                    yield chunk

        return await spool_to_file(key, chunks(), path, max_bytes)

    async def head(self, key: str) -> BlobInfo | None:
        """Size and date, or None when there is no such object."""
        try:
            with _mapped(key):
                meta = await obstore.head_async(self.store, key)
        except BlobMissing:
            return None
        return _info(meta)

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete the objects (DeleteObjects, up to 1000 a request)."""
        if not keys:
            return
        with _mapped(keys[0]):
            await obstore.delete_async(self.store, list(keys))

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix``; how many there were."""
        keys = [info.key async for info in self.list(prefix)]
        for at in range(0, len(keys), LIST_PAGE):
            await self.delete(keys[at : at + LIST_PAGE])
        return len(keys)

    async def list(self, prefix: str) -> AsyncIterator[BlobInfo]:
        """Every object whose key starts with ``prefix``, page by page, in the store's order.

        AWS S3 lists in key (UTF-8 byte) order; SeaweedFS folder by folder ("a/b/c" before
        "a-b"): callers needing one order sort what they collect.
        """
        # obstore lists folders ("a/b" means "a/b/…"): a key prefix is its folder, filtered.
        folder = prefix.rpartition("/")[0]
        pages = obstore.list(self.store, folder or None, chunk_size=LIST_PAGE)
        with _mapped(prefix):
            async for page in pages:
                for meta in page:
                    if meta["path"].startswith(prefix):
                        yield _info(meta)

    async def presign(
        self, method: Literal["GET", "PUT"], key: str, expires_s: int, content_type: str = ""
    ) -> str:
        """A SigV4 presigned URL for ``method`` on ``key``, valid ``expires_s`` seconds."""
        with _mapped(key):
            return await obstore.sign_async(self.store, method, key, timedelta(seconds=expires_s))

    async def aclose(self) -> None:
        """obstore's client closes its connections when dropped."""


class _CountedChunks:
    def __init__(self, source: AsyncIterator[bytes]) -> None:
        self.source = source
        self.size = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self.source:
            self.size += len(chunk)
            yield chunk


async def _first_bytes(result: GetResult, length: int) -> bytes:
    """Up to ``length`` bytes of a GET's body, leaving the rest unread."""
    parts: list[bytes] = []
    have = 0
    stream = result.stream(min_chunk_size=min(length, CHUNK_BYTES))
    async for chunk in stream:
        parts.append(chunk)
        have += len(chunk)
        if have >= length:
            break
    return b"".join(parts)[:length]


def _attributes(content_type: str) -> dict[str, str] | None:
    return {"Content-Type": content_type} if content_type else None


def _info(meta: ObjectMeta) -> BlobInfo:
    return BlobInfo(
        key=meta["path"],
        size=meta["size"],
        modified_ms=int(meta["last_modified"].timestamp() * 1000),
        etag=(meta["e_tag"] or "").strip('"'),
    )


@contextlib.contextmanager
def _mapped(key: str) -> Iterator[None]:
    """obstore's errors as BlobMissing / BlobUnavailable / BlobError (with the cause kept)."""
    try:
        yield
    except BlobError:
        raise
    except (NotFoundError, FileNotFoundError) as e:  # obstore raises the builtin for a 404
        raise BlobMissing(f"no object {key!r}") from e
    except (InvalidPathError, NotSupportedError) as e:
        raise BlobError(f"store refused {key!r}: {_first_line(e)}") from e
    except (BaseError, OSError, TimeoutError) as e:
        raise BlobUnavailable(f"store error on {key!r}: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
