"""Every store call timed, counted and bounded: the wrapper open_blob_store hands out."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from ocrq.shared.blobs.base import BlobError, BlobInfo, BlobMissing, BlobStore, BlobUnavailable
from ocrq.shared.blobs.transfer import spool_to_file

# observe(op, seconds, nbytes, ok): after every call; ok is False when the store failed
# (BlobUnavailable, a timeout, any other error). A missing object is an answer: ok.
Observe = Callable[[str, float, int, bool], None]
T = TypeVar("T")
# A big transfer (put_file) may take OCRQ_BLOB_TIMEOUT_S plus its size at this rate.
SLOWEST_TRANSFER_BYTES_S = 1024 * 1024
DELETE_BATCH = 1000  # S3's DeleteObjects takes at most 1000 keys


def _ignore(op: str, seconds: float, nbytes: int, ok: bool) -> None:
    """No metrics."""


class MeteredBlobs:
    """A BlobStore that bounds each call by ``timeout_s`` and reports it to ``observe``.

    A one-shot call must end within the timeout; a stream or a listing must give its next
    chunk (page) within it; put_stream must take its next chunk within it (time spent
    waiting for the caller's own chunks does not count); put_file gets the timeout plus its
    size at SLOWEST_TRANSFER_BYTES_S. Past that: BlobUnavailable.
    """

    def __init__(self, inner: BlobStore, timeout_s: float, observe: Observe | None = None) -> None:
        self.inner = inner
        self.url = inner.url
        self.can_presign = inner.can_presign
        self.timeout_s = timeout_s
        self.observe = observe or _ignore

    async def _timed(
        self, op: str, call: Awaitable[T], nbytes: Callable[[T], int], timeout_s: float
    ) -> T:
        start = time.perf_counter()
        ok, size = False, 0
        try:
            async with asyncio.timeout(timeout_s):
                result = await call
            ok, size = True, nbytes(result)
            return result
        except TimeoutError as e:
            raise BlobUnavailable(f"store {op} took over {timeout_s:g}s ({self.url})") from e
        except BlobMissing:
            ok = True
            raise
        finally:
            self.observe(op, time.perf_counter() - start, size, ok)

    async def put(self, key: str, data: bytes, content_type: str = "") -> None:
        """Write ``data`` at ``key``."""
        await self._timed(
            "put", self.inner.put(key, data, content_type), lambda _: len(data), self.timeout_s
        )

    async def put_file(self, key: str, path: Path, content_type: str = "") -> None:
        """Write a local file at ``key``, given time for its size."""
        try:
            size = (await asyncio.to_thread(path.stat)).st_size
        except OSError as e:
            raise BlobError(f"cannot read {path}: {e}") from e
        timeout_s = self.timeout_s + size / SLOWEST_TRANSFER_BYTES_S
        await self._timed(
            "put_file", self.inner.put_file(key, path, content_type), lambda _: size, timeout_s
        )

    async def put_stream(
        self, key: str, chunks: AsyncIterator[bytes], content_type: str = ""
    ) -> int:
        """Write the chunks at ``key``; the store must keep taking them within the timeout."""
        watch = _SourceWatch(chunks)
        start = time.perf_counter()
        ok = False
        task = asyncio.ensure_future(self.inner.put_stream(key, watch.chunks(), content_type))
        try:
            while True:
                await asyncio.wait({task}, timeout=min(1.0, self.timeout_s))
                if task.done():
                    size = task.result()
                    ok = True
                    return size
                if watch.stalled_for() > self.timeout_s:
                    raise BlobUnavailable(
                        f"store put_stream stalled over {self.timeout_s:g}s ({self.url})"
                    )
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, BlobError):
                    await task
            self.observe("put_stream", time.perf_counter() - start, watch.size, ok)

    async def get(self, key: str) -> bytes:
        """The whole object."""
        return await self._timed("get", self.inner.get(key), len, self.timeout_s)

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start``."""
        return await self._timed(
            "get_range", self.inner.get_range(key, start, length), len, self.timeout_s
        )

    async def stream(self, key: str) -> AsyncIterator[bytes]:
        """The object in chunks, each within the timeout."""
        counted = _Counted()
        start = time.perf_counter()
        ok = False
        try:
            async with contextlib.aclosing(self._paced("stream", self.inner.stream(key))) as chunks:
                async for chunk in chunks:
                    counted.size += len(chunk)
                    yield chunk
            ok = True
        except BlobMissing:
            ok = True
            raise
        except GeneratorExit:  # the reader stopped early: not the store's failure
            ok = True
            raise
        finally:
            self.observe("stream", time.perf_counter() - start, counted.size, ok)

    async def download(self, key: str, path: Path, max_bytes: int) -> int:
        """Spool the object to ``path``, each chunk within the timeout."""
        start = time.perf_counter()
        ok, size = False, 0
        try:
            async with contextlib.aclosing(
                self._paced("download", self.inner.stream(key))
            ) as chunks:
                size = await spool_to_file(key, chunks, path, max_bytes)
            ok = True
            return size
        except BlobMissing:
            ok = True
            raise
        finally:
            self.observe("download", time.perf_counter() - start, size, ok)

    async def head(self, key: str) -> BlobInfo | None:
        """Size and date, or None."""
        return await self._timed("head", self.inner.head(key), lambda _: 0, self.timeout_s)

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete the objects, a thousand per call."""
        for at in range(0, len(keys), DELETE_BATCH):
            batch = keys[at : at + DELETE_BATCH]
            await self._timed("delete", self.inner.delete(batch), lambda _: 0, self.timeout_s)

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix`` (listed page by page); how many there were."""
        batch: list[str] = []
        count = 0
        async for info in self.list(prefix):
            batch.append(info.key)
            if len(batch) == DELETE_BATCH:
                await self.delete(batch)
                count, batch = count + len(batch), []
        if batch:
            await self.delete(batch)
        return count + len(batch)

    async def list(self, prefix: str) -> AsyncIterator[BlobInfo]:
        """Every object under ``prefix`` in key order, each page within the timeout."""
        start = time.perf_counter()
        ok = False
        try:
            async with contextlib.aclosing(self._paced("list", self.inner.list(prefix))) as infos:
                async for info in infos:
                    yield info
            ok = True
        except GeneratorExit:
            ok = True
            raise
        finally:
            self.observe("list", time.perf_counter() - start, 0, ok)

    async def presign(
        self, method: Literal["GET", "PUT"], key: str, expires_s: int, content_type: str = ""
    ) -> str:
        """A presigned URL (BlobError when the backend cannot presign)."""
        return await self._timed(
            "presign",
            self.inner.presign(method, key, expires_s, content_type),
            lambda _: 0,
            self.timeout_s,
        )

    async def aclose(self) -> None:
        """Release the backend's connections."""
        await self.inner.aclose()

    async def _paced(self, op: str, items: AsyncIterator[T]) -> AsyncGenerator[T, None]:
        """The items of a stream or listing, each of which must come within the timeout."""
        try:
            while True:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        item = await anext(items)
                except StopAsyncIteration:
                    return
                except TimeoutError as e:
                    raise BlobUnavailable(
                        f"store {op} gave nothing for {self.timeout_s:g}s ({self.url})"
                    ) from e
                yield item
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):  # closing must not hide the real error
                    await aclose()


class _Counted:
    size = 0


class _SourceWatch:
    """The caller's chunks on their way to the store: how long the store has held one."""

    def __init__(self, source: AsyncIterator[bytes]) -> None:
        self.source = source
        self.size = 0
        self.waiting_for_source = False
        self.since = time.monotonic()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The source's chunks, noting when the store asks for the next one."""
        while True:
            self.waiting_for_source = True
            try:
                chunk = await anext(self.source)
            except StopAsyncIteration:
                return
            finally:
                self.waiting_for_source = False
                self.since = time.monotonic()
            self.size += len(chunk)
            yield chunk

    def stalled_for(self) -> float:
        """Seconds the store has held a chunk (or the end) without asking for more."""
        return 0.0 if self.waiting_for_source else time.monotonic() - self.since
