"""The file:///path backend: a folder on one machine, each key a file path under it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar
from urllib.parse import unquote, urlsplit

from ocrq.shared.blobs.base import BlobError, BlobInfo, BlobMissing, BlobUnavailable
from ocrq.shared.blobs.transfer import CHUNK_BYTES, file_chunks, spool_to_file

# A write goes to a file with this prefix beside its target, then is renamed over it:
# readers never see half an object, and listings skip these.
TEMP_PREFIX = ".ocrq-tmp-"
T = TypeVar("T")


def folder_of(url: str) -> Path:
    """The folder a file:///path URL names."""
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not parts.path:
        raise ValueError(f"{url!r} is not file:///absolute/path")
    return Path(unquote(parts.path))


class FolderBlobs:
    """A BlobStore on a local (or mounted) folder; keys are relative paths under it."""

    can_presign = False

    def __init__(self, url: str) -> None:
        self.url = url
        self.root = folder_of(url)

    def path_of(self, key: str) -> Path:
        """The file behind ``key``; BlobError for keys that could leave the folder."""
        parts = key.split("/")
        if not key or key.startswith("/") or "\0" in key or "\\" in key:
            raise BlobError(f"key {key!r} is not a relative path")
        if any(p in ("", ".", "..") or p.startswith(TEMP_PREFIX) for p in parts):
            raise BlobError(f"key {key!r} has an empty, '.', '..' or reserved segment")
        return self.root.joinpath(*parts)

    async def put(self, key: str, data: bytes, content_type: str = "") -> None:
        """Write ``data`` at ``key`` atomically (temp file, then rename)."""
        await self._write_atomic(key, lambda out: out.write(data))

    async def put_file(self, key: str, path: Path, content_type: str = "") -> None:
        """Copy a local file to ``key`` atomically."""
        await self.put_stream(key, file_chunks(path), content_type)

    async def put_stream(
        self, key: str, chunks: AsyncIterator[bytes], content_type: str = ""
    ) -> int:
        """Write the chunks at ``key`` as they arrive; the object appears whole at the end."""
        target = self.path_of(key)
        temp = target.with_name(f"{TEMP_PREFIX}{uuid.uuid4().hex}")
        size = 0
        try:
            await _off_loop(target.parent.mkdir, parents=True, exist_ok=True)
            out = await _off_loop(temp.open, "wb")
            try:
                async for chunk in chunks:
                    await _off_loop(out.write, chunk)
                    size += len(chunk)
            finally:
                await _off_loop(out.close)
            await _off_loop(os.replace, temp, target)
        finally:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(temp.unlink, missing_ok=True)
        return size

    async def _write_atomic(self, key: str, write: Callable[[BinaryIO], object]) -> None:
        target = self.path_of(key)

        def run() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.with_name(f"{TEMP_PREFIX}{uuid.uuid4().hex}")
            try:
                with temp.open("wb") as out:
                    write(out)
                os.replace(temp, target)
            finally:
                temp.unlink(missing_ok=True)

        await _off_loop(run)

    async def get(self, key: str) -> bytes:
        """The whole object."""
        return await _off_loop(self.path_of(key).read_bytes)

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end)."""
        path = self.path_of(key)

        def run() -> bytes:
            with path.open("rb") as source:
                source.seek(start)
                return source.read(length)

        return await _off_loop(run)

    async def stream(self, key: str) -> AsyncIterator[bytes]:
        """The object in chunks of CHUNK_BYTES; BlobMissing on the first ``anext``."""
        path = self.path_of(key)
        await _off_loop(path.stat)  # a missing file fails here, before any bytes
        try:
            async for chunk in file_chunks(path, CHUNK_BYTES):
                yield chunk
        except OSError as e:
            raise _blob_error(e) from e

    async def download(self, key: str, path: Path, max_bytes: int) -> int:
        """Spool the object to ``path``; BlobTooLarge past max_bytes (partial file removed)."""
        try:
            return await spool_to_file(key, self.stream(key), path, max_bytes)
        except OSError as e:
            raise _blob_error(e) from e

    async def head(self, key: str) -> BlobInfo | None:
        """Size and date, or None when there is no such object."""
        try:
            st = await _off_loop(self.path_of(key).stat)
        except BlobMissing:
            return None
        if not stat.S_ISREG(st.st_mode):  # a folder of other keys is no object
            return None
        return BlobInfo(key=key, size=st.st_size, modified_ms=st.st_mtime_ns // 1_000_000)

    async def delete(self, keys: Sequence[str]) -> None:
        """Remove the files (a missing one is fine) and any folders left empty."""
        paths = [self.path_of(key) for key in keys]

        def run() -> None:
            for path in paths:
                path.unlink(missing_ok=True)
                self._prune_empty(path.parent)

        await _off_loop(run)

    def _prune_empty(self, folder: Path) -> None:
        # Empty folders would pile up (one per job); stop at the first that is not empty.
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix``; how many there were."""
        keys = [info.key async for info in self.list(prefix)]
        for start in range(0, len(keys), 1000):
            await self.delete(keys[start : start + 1000])
        return len(keys)

    async def list(self, prefix: str) -> AsyncIterator[BlobInfo]:
        """Every object under ``prefix`` in key order, one folder read at a time."""
        folder_part, _, name_start = prefix.rpartition("/")
        start = self.path_of(folder_part) if folder_part else self.root
        async for info in _walk(start, f"{folder_part}/" if folder_part else "", name_start):
            yield info

    async def presign(
        self, method: Literal["GET", "PUT"], key: str, expires_s: int, content_type: str = ""
    ) -> str:
        """A folder cannot hand out URLs."""
        raise BlobError("a file:// store cannot presign URLs (use an s3:// store)")

    async def aclose(self) -> None:
        """Nothing to release."""


async def _walk(folder: Path, key_base: str, must_start: str) -> AsyncIterator[BlobInfo]:
    """The objects under ``folder`` whose names start with ``must_start``, in key order."""
    for sort_name, path, size, mtime_ns in await _off_loop(_sorted_entries, folder):
        if not sort_name.startswith(must_start):
            continue
        if size < 0:
            async for info in _walk(path, key_base + sort_name, ""):
                yield info
        else:
            yield BlobInfo(key=key_base + sort_name, size=size, modified_ms=mtime_ns // 1_000_000)


def _sorted_entries(folder: Path) -> list[tuple[str, Path, int, int]]:
    """(sort name, path, size or -1 for a folder, mtime ns) of a folder, in key order.

    A folder sorts as "name/", so that the walk follows the keys' string order
    ("a-b" < "a/c" because "-" < "/")."""
    found: list[tuple[str, Path, int, int]] = []
    try:
        scan: Iterator[os.DirEntry[str]] = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return found
    with scan as entries:  # type: ignore[attr-defined]
        for entry in entries:
            if entry.name.startswith(TEMP_PREFIX):
                continue
            if entry.is_dir(follow_symlinks=False):
                found.append((entry.name + "/", Path(entry.path), -1, 0))
            elif entry.is_file(follow_symlinks=False):
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # deleted while the folder was read: gone, as on S3
                    continue
                found.append((entry.name, Path(entry.path), st.st_size, st.st_mtime_ns))
    found.sort(key=lambda row: row[0])
    return found


async def _off_loop(call: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Run blocking file I/O in a thread, its OSErrors as BlobMissing or BlobUnavailable."""
    try:
        return await asyncio.to_thread(call, *args, **kwargs)
    except OSError as e:
        raise _blob_error(e) from e


def _blob_error(e: OSError) -> BlobError:
    if isinstance(e, FileNotFoundError | NotADirectoryError | IsADirectoryError):
        return BlobMissing(str(e))
    if isinstance(e, FileExistsError):  # "a/b" is a file, so "a/b/c" cannot be written
        return BlobError(f"file store: a key is both an object and a folder: {e}")
    return BlobUnavailable(f"file store: {e}")
