"""Inline uploads over OCRQ_INLINE_MAX_BYTES: written to the object store before the job.

The object is written first and the job (hash holding its DocumentRef, stream entry) is
queued after, in the same atomic step as an inline job: a crash between the two leaves an
orphan object (the sweeper removes it), never a job without its document.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib

import structlog

from ocrq.shared.blobs import BlobError, BlobStore, document_key
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import DocumentRef

log = structlog.get_logger("ocrq.producer")
STORE_RETRY_S = 5  # Retry-After when the store does not answer at ingest
# Below this, hashing takes well under a millisecond: a thread hop would cost more.
THREAD_HASH_BYTES = 1024 * 1024
DISCARD_TIMEOUT_S = 5.0  # a best-effort delete does not hold the answer up longer


def store_unavailable(e: BlobError) -> OcrqError:
    """The 503 for an ingest the object store could not take (nothing was queued)."""
    return OcrqError(
        ErrorCode.UNAVAILABLE,
        f"the object store is unreachable, nothing was queued: {e}",
        retry_after=STORE_RETRY_S,
    )


async def sha256_of(data: bytes) -> str:
    """``sha256:<hex>`` of the bytes; big ones hashed off the event loop (hashlib frees the GIL)."""
    if len(data) < THREAD_HASH_BYTES:
        return "sha256:" + hashlib.sha256(data).hexdigest()
    digest = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
    return "sha256:" + digest


async def put_document(
    blobs: BlobStore, tenant: str, job_id: str, data: bytes, media_type: str
) -> DocumentRef:
    """Write the job's document to the store; 503 (nothing written) when it does not answer."""
    key = document_key(tenant, job_id)
    checksum = await sha256_of(data)
    try:
        await blobs.put(key, data, media_type)
    except BlobError as e:
        log.warning("document_put_failed", key=key, error=str(e))
        raise store_unavailable(e) from e
    return DocumentRef(kind="blob", key=key, size=len(data), checksum=checksum, owned=True)


async def discard(blobs: BlobStore | None, key: str) -> None:
    """Delete an object no job took, best-effort: an orphan is otherwise swept later."""
    if blobs is None or not key:
        return
    with contextlib.suppress(BlobError, TimeoutError):
        async with asyncio.timeout(DISCARD_TIMEOUT_S):
            await blobs.delete([key])
