"""The documents of a batch request, one at a time, as soon as each has been read.

Three formats: multipart with several ``file`` parts (each part a document, or a ZIP),
a ZIP archive as the body, or JSON ``{"documents": [{"document": "<base64>", "filename":
…}, …]}``. Multipart and JSON are cut as they stream in, holding one document at a time; a
ZIP keeps its directory at its end, so it is spooled to disk (producer/batches/spool.py: the spool
folder, bounded by the request limit) and then read member by member. A problem with one
document is that document's, reported with its code; the rest go on: a member whose
compressed data is corrupt is refused as ``corrupt_document``.
"""

from __future__ import annotations

import asyncio
import lzma
import zipfile
import zlib
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import Annotated

import msgspec
from multipart import MultipartError, MultipartSegment, PushMultipartParser

from ocrq.producer.batches.json_stream import MAX_NAME_BYTES, DocumentArrayScanner
from ocrq.producer.batches.spool import Spool
from ocrq.producer.jobs.decoding import decode_document, plain_document, too_large
from ocrq.producer.jobs.ingest import json_body_limit
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Inbound
from ocrq.shared.settings import Settings

ZIP_TYPES = frozenset({"application/zip", "application/x-zip-compressed"})
ZIP_MAGIC = b"PK\x03\x04"
SPOOL_WRITE = 1024 * 1024  # bytes gathered per write to the spool
# What reading a damaged member raises: a bad CRC or header (BadZipFile), corrupt DEFLATE
# (zlib.error) or LZMA (LZMAError) data, a truncated stream (EOFError), an unsupported or
# encrypted method (NotImplementedError, RuntimeError), a name flagged UTF-8 that is not
# (UnicodeDecodeError, a ValueError).
UNREADABLE_MEMBER = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    OSError,
    ValueError,
)
# What opening a damaged archive raises besides BadZipFile: a central directory naming an
# unknown ZIP version (NotImplementedError), bad offsets or sizes (ValueError, EOFError).
UNREADABLE_ARCHIVE = (zipfile.BadZipFile, OSError, NotImplementedError, ValueError, EOFError)


class Part(msgspec.Struct):
    """One document of a batch: its bytes, or why it could not be read."""

    filename: str | None
    data: bytes | None = None
    error: OcrqError | None = None


class BatchDocument(Inbound):
    """One document of a JSON batch."""

    document: str
    filename: Annotated[str, msgspec.Meta(max_length=MAX_NAME_BYTES)] | None = None


class PlainBatchDocument(Inbound):
    """BatchDocument with the document left as JSON text (plain_document: the usual spelling)."""

    document: msgspec.Raw
    filename: Annotated[str, msgspec.Meta(max_length=MAX_NAME_BYTES)] | None = None


def refused(filename: str | None, code: ErrorCode, message: str) -> Part:
    """A document that is refused, with its code."""
    return Part(filename, error=OcrqError(code, message))


def label(name: str | None) -> str | None:
    """A file name as a label only: its last path segment, never a path used on disk."""
    if not name:
        return None
    return PurePosixPath(name.replace("\\", "/")).name[:255] or None


class PartSink:
    """The bytes of one multipart file part: in memory, or on disk once they turn out a ZIP."""

    def __init__(self, name: str | None, spool: Spool, limit: int) -> None:
        self.name, self.spool_of_request, self.limit = name, spool, limit
        self.data = bytearray()
        self.spool: Path | None = None
        self.size = 0

    def add(self, chunk: bytes) -> None:
        """Append; past the document limit a non-ZIP part stops keeping its bytes."""
        self.size += len(chunk)
        if self.spool is not None:
            with self.spool.open("ab") as f:
                f.write(chunk)
            return
        self.data += chunk
        if len(self.data) >= len(ZIP_MAGIC) and self.data.startswith(ZIP_MAGIC):
            self.spool = self.spool_of_request.folder() / f"part-{id(self)}.zip"
            self.spool.write_bytes(self.data)
            self.data = bytearray()
        elif self.size > self.limit:
            self.data = bytearray()  # refused anyway: keep nothing

    async def documents(self, settings: Settings) -> AsyncIterator[Part]:
        """The part as documents: itself, or the members of the ZIP it is."""
        name = label(self.name)
        if self.spool is not None:
            async for doc in zip_members(self.spool, settings, name):
                yield doc
            await asyncio.to_thread(self.spool.unlink, missing_ok=True)  # 1 GiB: not on the loop
        elif self.size > self.limit:
            yield Part(name, error=too_large(self.limit))
        else:
            yield Part(name, bytes(self.data))


async def multipart_documents(
    chunks: AsyncIterator[bytes], boundary: str, settings: Settings
) -> AsyncIterator[Part]:
    """Each ``file`` part as soon as it is complete (a ZIP part opened into its members)."""
    sink: PartSink | None = None
    received = 0
    async with Spool(settings) as spool:
        try:
            with PushMultipartParser(
                boundary.encode(), max_segment_count=settings.uploads.max_batch_files + 1
            ) as parser:
                async for chunk in chunks:
                    received += len(chunk)
                    if received > settings.uploads.max_batch_bytes:
                        raise batch_too_large(settings)
                    for event in parser.parse(chunk):
                        if isinstance(event, MultipartSegment):
                            sink = PartSink(
                                _file_part_name(event), spool, settings.api.max_document_bytes
                            )
                        elif event and sink is not None:
                            await asyncio.to_thread(sink.add, bytes(event))
                        elif event is None and sink is not None:
                            async for doc in sink.documents(settings):
                                yield doc
                            sink = None
                parser.close()
        except MultipartError as e:
            raise OcrqError(
                ErrorCode.INVALID_REQUEST, f"body: invalid multipart/form-data ({e})"
            ) from e


def _file_part_name(part: MultipartSegment) -> str | None:
    if part.name != "file":
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"{part.name}: a batch takes `file` parts only; options go in the query string",
        )
    name: str | None = part.filename
    return name


def batch_too_large(settings: Settings) -> OcrqError:
    """The 413 of a batch request over its byte limit."""
    return OcrqError(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"the batch exceeds {settings.uploads.max_batch_bytes} bytes (OCRQ_MAX_BATCH_BYTES)",
    )


async def zip_documents(
    chunks: AsyncIterator[bytes], settings: Settings, gate: asyncio.Semaphore | None = None
) -> AsyncIterator[Part]:
    """The members of a ZIP body: spooled to disk first (its directory is at its end)."""
    async with Spool(settings) as spool:
        path = await asyncio.to_thread(spool.folder)  # 503 here, before the body is read
        path /= "body.zip"
        written, pending = 0, bytearray()
        with path.open("wb") as body:
            async for chunk in chunks:
                written += len(chunk)
                if written > settings.uploads.max_batch_bytes:
                    raise batch_too_large(settings)
                pending += chunk
                if len(pending) >= SPOOL_WRITE:  # a thread hop per MiB, not per chunk
                    await asyncio.to_thread(body.write, bytes(pending))
                    pending.clear()
            await asyncio.to_thread(body.write, bytes(pending))
        async for doc in zip_members(path, settings, None, whole_request=True, gate=gate):
            yield doc


def check_zip(
    archive: zipfile.ZipFile, settings: Settings, name: str | None
) -> list[zipfile.ZipInfo]:
    """The members to read, after the archive-wide checks; a bomb raises (nothing is read)."""
    members = [m for m in archive.infolist() if not m.is_dir()]
    where = f"{name}: " if name else ""
    if len(members) > settings.uploads.max_zip_members:
        raise OcrqError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"{where}the ZIP holds {len(members)} files, over {settings.uploads.max_zip_members}",
        )
    declared = sum(m.file_size for m in members)
    if declared > settings.uploads.max_zip_uncompressed_bytes:
        raise OcrqError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"{where}the ZIP unpacks to {declared} bytes, "
            f"over {settings.uploads.max_zip_uncompressed_bytes}",
        )
    for m in members:
        if m.file_size > settings.uploads.max_zip_ratio * max(m.compress_size, 1):
            raise OcrqError(
                ErrorCode.INVALID_REQUEST,
                f"{where}{m.filename} is compressed {m.file_size // max(m.compress_size, 1)}:1, "
                f"over {settings.uploads.max_zip_ratio}:1 (a ZIP bomb?)",
            )
    return members


async def zip_members(
    path: Path,
    settings: Settings,
    name: str | None,
    *,
    whole_request: bool = False,
    gate: asyncio.Semaphore | None = None,
) -> AsyncIterator[Part]:
    """Each member of a ZIP file, read no further than the document limit.

    Members are unpacked one at a time per process (``gate``, the producer's decode gate):
    threads unpacking side by side would take turns on the GIL ahead of the event loop.

    A ZIP that fails the archive-wide checks (a bomb, too many members) yields nothing of
    itself: as the whole request it raises (413/400), as one part it is one refused file.
    """
    try:
        archive = await asyncio.to_thread(zipfile.ZipFile, path)
        members = check_zip(archive, settings, name)
    except UNREADABLE_ARCHIVE as e:
        error = OcrqError(ErrorCode.INVALID_REQUEST, f"{name or 'body'}: not a readable ZIP ({e})")
        if whole_request:
            raise error from e
        yield Part(name, error=error)
        return
    except OcrqError as e:
        archive.close()
        if whole_request:
            raise
        yield Part(name, error=e)
        return
    gate = gate or asyncio.Semaphore(1)
    with archive:
        for member in members:
            async with gate:
                part = await asyncio.to_thread(
                    read_member, archive, member, settings.api.max_document_bytes
                )
            yield part


def read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> Part:
    """One member's bytes; a member that unpacks past the limit (whatever it declares) is 413."""
    name = label(member.filename)
    try:
        with archive.open(member) as f:
            data = f.read(limit + 1)
    except UNREADABLE_MEMBER as e:
        return refused(name, ErrorCode.CORRUPT_DOCUMENT, f"cannot be unpacked ({e})")
    if len(data) > limit:
        return Part(name, error=too_large(limit))
    return Part(name, data)


async def json_documents(
    chunks: AsyncIterator[bytes], settings: Settings, gate: asyncio.Semaphore | None = None
) -> AsyncIterator[Part]:
    """Each element of the documents array, decoded as soon as its closing brace arrives.

    Decoding runs in a thread, one at a time per process (``gate``, the producer's decode
    gate, shared with single-job uploads), so the event loop keeps its turn on the GIL.
    """
    scanner = DocumentArrayScanner(json_body_limit(settings.api.max_document_bytes))
    gate = gate or asyncio.Semaphore(1)
    async for chunk in chunks:
        for raw in scanner.feed(chunk):
            async with gate:
                part = await asyncio.to_thread(json_document, raw, settings.api.max_document_bytes)
            yield part
    scanner.close()


def json_document(raw: bytes, limit: int) -> Part:
    """One JSON document element: base64 decoded, or its error."""
    fast = plain_document(raw, PlainBatchDocument)  # the fast path, as for one job
    if fast is not None:
        plain, data = fast
        if len(data) > limit:
            return Part(label(plain.filename), error=too_large(limit))
        if data:
            return Part(label(plain.filename), data)
    # Data URIs, line breaks, the URL-safe alphabet, … or a real error: the slow path.
    try:
        item = msgspec.json.decode(raw, type=BatchDocument)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        return refused(None, ErrorCode.INVALID_REQUEST, f"document: {e}")
    try:
        _, data = decode_document(item.document, limit)
    except OcrqError as e:
        return Part(label(item.filename), error=e)
    return Part(label(item.filename), data)
