"""A job's document as a local file: inline bytes from Redis, or spooled from a reference.

A document by reference (Field.DOCUMENT, a DocumentRef) is never held in memory: it is
streamed from the object store (kind "blob") or from its origin (kind "url",
consumer/source_fetch.py) to a file, which the rasteriser reopens page by page.

Where the file goes: a blob of at most OCRQ_SPOOL_SHM_MAX_MB goes to the job's /dev/shm
folder, beside its rendered pages; a larger one, and every URL source (its size is known
only once it has arrived), to a folder of its own under the worker's disk spool
(OCRQ_DOCUMENT_SPOOL_DIR, default the system temp folder), removed when the job ends.

A blob whose checksum is known is verified once spooled (sha256, off the event loop);
a mismatch is ``corrupt_document``. A document whose media type is not known yet (a URL
source) is sniffed from its first bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from pathlib import Path

from ocrq.consumer.retry import through_blob_outages
from ocrq.consumer.source_fetch import SourceFetcher, too_large
from ocrq.consumer.workspace import job_workspace
from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.paths import DOCUMENTS
from ocrq.shared.blobs.transfer import BlobTooLarge
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import JobRecord
from ocrq.shared.schemas import DocumentRef
from ocrq.shared.settings import Settings
from ocrq.shared.sniff import sniff_media_type

DOCUMENT_FILE = "document"
SNIFF_BYTES = 2048
MIB = 1024 * 1024


class DocumentSpool:
    """Puts one job's document into a file; what it opened is closed with ``exits``."""

    def __init__(
        self,
        settings: Settings,
        blobs: BlobStore | None,
        sources: SourceFetcher | None,
        disk: Path | None,
    ) -> None:
        self.settings, self.blobs, self.sources = settings, blobs, sources
        self.disk = disk  # this worker's folder on the disk spool; None: the shm folder only

    async def local_copy(
        self, job_id: str, record: JobRecord, job_folder: Path, exits: contextlib.ExitStack
    ) -> tuple[Path, str]:
        """The job's document as a file, and its media type (sniffed when not known)."""
        ref = record.document
        if ref is None:
            if record.payload is None:
                raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the job has no document")
            path = job_folder / DOCUMENT_FILE
            await asyncio.to_thread(path.write_bytes, record.payload)
            return path, record.media_type
        path = self._place(job_id, ref, job_folder, exits) / DOCUMENT_FILE
        if ref.kind == "blob":
            await self._download(ref, path)
        else:
            await self._fetch(ref.url, path)
        return path, record.media_type or await sniffed_type(path)

    def _place(
        self, job_id: str, ref: DocumentRef, job_folder: Path, exits: contextlib.ExitStack
    ) -> Path:
        """The folder the document goes to: the job's shm folder when small enough."""
        small = ref.kind == "blob" and ref.size <= self.settings.blobs.spool_shm_max_mb * MIB
        if small or self.disk is None:
            return job_folder
        return exits.enter_context(job_workspace(self.disk, job_id))

    async def _download(self, ref: DocumentRef, path: Path) -> None:
        blobs = self.blobs
        if blobs is None:
            message = "the document is in an object store and this worker has none (OCRQ_BLOB_URL)"
            raise OcrqError(ErrorCode.UNAVAILABLE, message)
        limit = self.settings.blobs.max_source_bytes
        try:
            await through_blob_outages(
                lambda: blobs.download(ref.key, path, limit),
                "reading the document",
                self.settings.blobs.blob_outage_s,
            )
        except BlobTooLarge as e:
            raise too_large(limit) from e
        if ref.checksum:
            await verify_checksum(path, ref.checksum)

    async def _fetch(self, url: str, path: Path) -> None:
        sources = self.sources
        if sources is None:  # a worker always has one (consumer/main.py): tests may not
            raise OcrqError(ErrorCode.UNAVAILABLE, "this worker cannot fetch source URLs")
        limit = self.settings.blobs.max_source_bytes
        await through_blob_outages(
            lambda: sources.fetch(url, path, limit),
            "fetching the source URL",
            self.settings.blobs.blob_outage_s,
        )


def page_limit(settings: Settings, ref: DocumentRef | None) -> int:
    """The most pages a job may read: documents by reference have OCRQ_MAX_SOURCE_PAGES.

    A document the producer itself carried and then wrote to the store (under documents/)
    keeps the inline limit, OCRQ_DEFAULT_MAX_PAGES: where its bytes wait changes nothing.
    """
    if ref is None or (ref.kind == "blob" and ref.key.startswith(DOCUMENTS)):
        return settings.worker.default_max_pages
    return settings.blobs.max_source_pages


async def sniffed_type(path: Path) -> str:
    """The media type the file's first bytes announce; unsupported_media_type otherwise."""
    head = await asyncio.to_thread(_head, path)
    found = sniff_media_type(head)
    if found is None:
        raise OcrqError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            "the document is not a PDF, PNG, JPEG, WebP, TIFF or BMP (from its first bytes)",
        )
    return found


def _head(path: Path) -> bytes:
    with path.open("rb") as source:
        return source.read(SNIFF_BYTES)


async def verify_checksum(path: Path, checksum: str) -> None:
    """corrupt_document when the spooled file's digest is not the one the job names."""
    algorithm, _, expected = checksum.partition(":")
    if algorithm != "sha256" or not expected:
        return  # a form this worker does not know: the store's own checks stand
    actual = await asyncio.to_thread(_sha256, path)
    if actual != expected.lower():
        message = "the document in the store does not match its checksum"
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, message)


def _sha256(path: Path) -> str:
    with path.open("rb") as source:
        return hashlib.file_digest(source, "sha256").hexdigest()
