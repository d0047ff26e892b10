"""Jobs finished the way a worker with an object store finishes them: the result and files
put under results/<tenant>/<job>/ first, then ``Outcome.stored`` (Redis keeps the pointer)."""

from __future__ import annotations

from typing import Literal

import msgspec

from ocrq.shared.blobs import BlobStore, document_key, result_prefix
from ocrq.shared.blobs.paths import RESULT_JSON, RESULT_MARKDOWN
from ocrq.shared.record import SEARCHABLE_PDF, Field, figure_file, new_job_fields
from ocrq.shared.schemas import DocumentRef, JobOptions
from ocrq.shared.store import JobStore, Outcome, now_ms
from support.jobflow import ME
from support.payloads import small_pdf
from support.structured_results import (
    FIGURE,
    read_one_page,
    second_page,
    structured_result,
)
from support.structured_results import SEARCHABLE_PDF as PDF_BYTES


async def put_result(
    store: JobStore, blobs: BlobStore, job_id: str, *, searchable_pdf: bool, markdown_file: bool
) -> str:
    """Write the job's structured result, figure (and PDF) to the store; its prefix."""
    tenant = (await store.read(job_id, (Field.TENANT,))).tenant
    prefix = result_prefix(tenant, job_id)
    result = structured_result(job_id, searchable_pdf=searchable_pdf)
    await blobs.put(prefix + RESULT_JSON, msgspec.json.encode(result), "application/json")
    if markdown_file:
        await blobs.put(prefix + RESULT_MARKDOWN, result.markdown.encode(), "text/markdown")
    await blobs.put(prefix + figure_file("p1-1.png"), FIGURE, "image/png")
    if searchable_pdf:
        await blobs.put(prefix + SEARCHABLE_PDF, PDF_BYTES, "application/pdf")
    return prefix


async def finish_into_store(
    store: JobStore,
    blobs: BlobStore,
    *,
    searchable_pdf: bool = False,
    markdown_file: bool = True,
    lane: str = "interactive",
) -> str:
    """Claim the next job, read both pages, put its result in the store, finish it; its id."""
    job_id, entry = await read_one_page(store, lane)
    assert await store.progress(job_id, ME, 2, 2, pages={2: msgspec.json.encode(second_page())})
    prefix = await put_result(
        store, blobs, job_id, searchable_pdf=searchable_pdf, markdown_file=markdown_file
    )
    assert await store.finish(job_id, lane, entry, ME, Outcome.stored(prefix, 2))
    return job_id


async def queue_by_reference(
    store: JobStore,
    job_id: str,
    document: DocumentRef,
    tenant: str = "",
    lane: Literal["interactive", "batch"] = "interactive",
) -> None:
    """Queue a job whose document is ``document`` (in the store), as ingest does."""
    fields = new_job_fields(
        job_id=job_id,
        tenant=tenant,
        filename="scan.pdf",
        media_type="application/pdf",
        data=b"",
        options=JobOptions(lane=lane),
        created_ms=now_ms(),
        document=document,
    )
    fresh, _ = await store.enqueue(job_id, lane, fields, None)
    assert fresh


async def owned_document(blobs: BlobStore, tenant: str, job_id: str) -> DocumentRef:
    """A document the producer wrote to the store for the job (the job owns it)."""
    data = small_pdf("by reference")
    key = document_key(tenant, job_id)
    await blobs.put(key, data, "application/pdf")
    return DocumentRef(kind="blob", key=key, size=len(data), owned=True)


async def keys_under(blobs: BlobStore, prefix: str = "") -> list[str]:
    """Every key the store lists under ``prefix``."""
    return [info.key async for info in blobs.list(prefix)]
