"""What a job owns in the object store (its own document, its result folder), removed by the
producer when the job is cancelled or deleted (documents.py writes the document at ingest).

A removal that fails (the store unreachable) never fails the API call: it is logged, and
the store sweeper (consumer side) removes what a job left once its job hash is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog

from ocrq.producer.runtime import Runtime
from ocrq.shared.blobs import BlobError, result_prefix
from ocrq.shared.record import Field
from ocrq.shared.schemas import DocumentRef

log = structlog.get_logger("ocrq.producer")
# A hanging store delays a cancel or delete this long at most: what is left is swept later.
REMOVAL_TIMEOUT_S = 10.0
REMOVALS_AT_ONCE = 8  # result folders removed concurrently when a batch is deleted


def owned_key(document: DocumentRef | None) -> str | None:
    """The key of the job's own document object; None for inline, a URL or a tenant's key."""
    if document is None or document.kind != "blob" or not document.owned:
        return None
    return document.key


async def job_document(rt: Runtime, job_id: str) -> DocumentRef | None:
    """Where the job's document is (read before a cancel: the hash may be gone after)."""
    if rt.blobs is None:
        return None
    return (await rt.store.read(job_id, (Field.DOCUMENT,))).document


async def remove_objects(
    rt: Runtime, tenant: str, job_id: str, document: DocumentRef | None, *, results: bool
) -> None:
    """Delete the job's own document and (``results``) its result folder; a failure is
    logged, never raised (the sweeper removes leftovers)."""
    if rt.blobs is None:
        return
    blobs, key = rt.blobs, owned_key(document)
    try:
        async with asyncio.timeout(REMOVAL_TIMEOUT_S):
            if key is not None:
                await blobs.delete([key])
            if results:
                await blobs.delete_prefix(result_prefix(tenant, job_id))
    except (BlobError, TimeoutError) as e:
        log.warning("job_objects_left", job_id=job_id, error=repr(e), left_for="the sweeper")


async def remove_batch_objects(
    rt: Runtime,
    tenant: str,
    documents: Sequence[DocumentRef | None],
    *,
    results_of: Sequence[str] = (),
) -> None:
    """``remove_objects`` for a batch's jobs: their own documents in one call, and the
    result folders of the jobs ``results_of`` names a few at a time; failures logged."""
    if rt.blobs is None:
        return
    blobs = rt.blobs
    keys = [key for key in map(owned_key, documents) if key is not None]
    try:
        async with asyncio.timeout(REMOVAL_TIMEOUT_S):
            if keys:
                await blobs.delete(keys)
    except (BlobError, TimeoutError) as e:
        log.warning("batch_documents_left", count=len(keys), error=repr(e), left_for="the sweeper")
    gate = asyncio.Semaphore(REMOVALS_AT_ONCE)

    async def remove(job_id: str) -> None:
        async with gate:
            await remove_objects(rt, tenant, job_id, None, results=True)

    await asyncio.gather(*(remove(job_id) for job_id in results_of))
