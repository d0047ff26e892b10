"""Back-office batches: many documents in one request, one handle to follow them by."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

import msgspec
import structlog
from litestar import Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter

from ocrq.producer.batches.formats import (
    ZIP_TYPES,
    Part,
    json_documents,
    multipart_documents,
    zip_documents,
)
from ocrq.producer.batches.views import batch_accepted, batch_view, visible_batch
from ocrq.producer.jobs.documents import discard, put_document
from ocrq.producer.jobs.ingest import parse_options, sniffed, within
from ocrq.producer.jobs.options import check_options
from ocrq.producer.jobs.owned import remove_batch_objects
from ocrq.producer.jobs.views import iso, new_job_id
from ocrq.producer.runtime import Runtime, caller
from ocrq.shared.batch_store import BODY_DEADLINE_FACTOR
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import tag_of
from ocrq.shared.record import Field, new_job_fields
from ocrq.shared.schemas import (
    BatchAccepted,
    BatchFile,
    BatchView,
    DocumentRef,
    ErrorBody,
    JobOptions,
)
from ocrq.shared.store import now_ms

log = structlog.get_logger("ocrq.producer")
PageLimit = Annotated[int, Parameter(ge=1, le=1000, description="Jobs listed per page")]
PageOffset = Annotated[int, Parameter(ge=0, le=1_000_000, description="Jobs to skip")]
DOCUMENTS_PER_READ = 500  # job hashes read per round trip before a batch is cancelled


def documents_of(request: Request[Any, Any, Any], rt: Runtime) -> AsyncIterator[Part]:
    """The request's documents, by its Content-Type."""
    content_type, params = request.content_type
    chunks = within(request.stream(), rt.settings.api.body_timeout_s * BODY_DEADLINE_FACTOR)
    if content_type == "multipart/form-data":
        if not params.get("boundary"):
            raise OcrqError(ErrorCode.INVALID_REQUEST, "multipart boundary missing")
        return multipart_documents(chunks, params["boundary"], rt.settings)
    if content_type in ZIP_TYPES:
        return zip_documents(chunks, rt.settings, rt.decode_gate)
    if content_type == "application/json":
        return json_documents(chunks, rt.settings, rt.decode_gate)
    raise OcrqError(
        ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        f"Content-Type {content_type}: a batch is multipart/form-data, application/zip "
        "or application/json",
    )


async def batch_options(request: Request[Any, Any, Any], tenant: str, rt: Runtime) -> JobOptions:
    """The query's options, for every job of the batch; the lane is always `batch`."""
    query = dict(request.query_params.items())
    if query.get("lane", "batch") != "batch":
        raise OcrqError(ErrorCode.INVALID_REQUEST, "lane: a batch's jobs run on the batch lane")
    options = msgspec.structs.replace(parse_options(query), lane="batch")
    await check_options(options, tenant, rt.settings)
    return options


async def enqueue_part(
    rt: Runtime, tenant: str, batch_id: str, options: JobOptions, part: Part, index: int
) -> BatchFile:
    """One document as a job of the batch, or the reason it was refused.

    With an object store, a document over OCRQ_INLINE_MAX_BYTES is written there first and
    the job holds its key; the store down refuses that document (unavailable), as a full
    queue does.
    """
    try:
        if part.error is not None:
            raise part.error
        assert part.data is not None
        media_type = sniffed(part.data, None, part.filename)
        job_id = new_job_id(tag_of(batch_id))  # the batch's jobs share its slot
        document = None
        if rt.blobs is not None and len(part.data) > rt.settings.blobs.inline_max_bytes:
            document = await put_document(rt.blobs, tenant, job_id, part.data, media_type)
        fields = new_job_fields(
            job_id=job_id,
            tenant=tenant,
            filename=part.filename,
            media_type=media_type,
            data=b"" if document else part.data,
            options=options,
            created_ms=now_ms(),
            batch=batch_id,
            document=document,
        )
        try:
            await rt.store.enqueue(job_id, "batch", fields, None, batch=batch_id)
        except OcrqError:
            await discard(rt.blobs, document.key if document else "")  # no orphan left
            raise
        rt.metrics.accepted_bytes.inc(len(part.data))
    except OcrqError as e:
        return BatchFile(index=index, filename=part.filename, code=e.code.value, message=e.message)
    return BatchFile(index=index, filename=part.filename, id=job_id)


@post("/v1/batches", status_code=202, request_max_body_size=None, summary="Submit a batch")
async def submit_batch(request: Request[Any, Any, Any], state: State) -> Response[BatchAccepted]:
    """Enqueue every document of the request as a job of one batch, each as soon as read."""
    rt, tenant = caller(request, state)
    options = await batch_options(request, tenant, rt)
    documents = documents_of(request, rt)
    idem = request.headers.get("idempotency-key")
    if idem is not None and not (0 < len(idem) <= 200):
        raise OcrqError(ErrorCode.INVALID_REQUEST, "Idempotency-Key: 1 to 200 characters")
    batch_id = new_job_id(rt.store.keys.pick_tag(tenant, idem))
    created, batch_id = await rt.batches.open(batch_id, tenant, options, idem)
    structlog.contextvars.bind_contextvars(tenant=tenant, batch_id=batch_id)
    if not created:  # the same Idempotency-Key: the first batch, untouched
        record = await visible_batch(rt, batch_id, tenant)
        return Response(await batch_accepted(rt, record), status_code=200)
    files, error = await read_batch(rt, tenant, batch_id, options, documents)
    accepted = [f for f in files if f.id]
    if not accepted:  # nothing to follow: no batch, and the reason as the answer
        await rt.batches.delete(batch_id)
        raise error or nothing_accepted(files)
    body = BatchAccepted(
        id=batch_id,
        status="accepted",
        created_at=iso(now_ms()) or "",
        accepted=accepted,
        rejected=[f for f in files if not f.id],
        error=ErrorBody(code=error.code.value, message=error.message) if error else None,
    )
    return Response(body, headers={"Location": f"/v1/batches/{batch_id}"})


def nothing_accepted(files: list[BatchFile]) -> OcrqError:
    """The error of a batch request of which no document was accepted."""
    if not files:
        return OcrqError(ErrorCode.INVALID_REQUEST, "a batch needs at least one document")
    first = files[0]
    more = f" (and {len(files) - 1} more refused)" if len(files) > 1 else ""
    return OcrqError(
        ErrorCode(first.code or ErrorCode.INVALID_REQUEST),
        f"no document accepted: {first.filename or 'document 1'}: {first.message}{more}",
    )


async def read_batch(
    rt: Runtime,
    tenant: str,
    batch_id: str,
    options: JobOptions,
    documents: AsyncIterator[Part],
) -> tuple[list[BatchFile], OcrqError | None]:
    """Enqueue documents until the request ends; seal the batch whatever happens."""
    files: list[BatchFile] = []
    error: OcrqError | None = None
    try:
        async for part in documents:
            if len(files) >= rt.settings.uploads.max_batch_files:
                raise OcrqError(
                    ErrorCode.PAYLOAD_TOO_LARGE,
                    f"a batch holds at most {rt.settings.uploads.max_batch_files} files "
                    "(OCRQ_MAX_BATCH_FILES)",
                )
            files.append(await enqueue_part(rt, tenant, batch_id, options, part, len(files)))
    except OcrqError as e:  # the request itself went wrong: what was accepted stays
        error = e
    finally:
        rejected = [f for f in files if not f.id]
        await asyncio.shield(rt.batches.seal(batch_id, rejected))
    return files, error


@get("/v1/batches/{batch_id:str}", summary="A batch's counts, pages and jobs")
async def get_batch(
    request: Request[Any, Any, Any],
    state: State,
    batch_id: FromPath[str],
    limit: PageLimit = 100,
    offset: PageOffset = 0,
) -> BatchView:
    """Counts by status, pages done/total, timestamps, and a page of its jobs in order."""
    rt, tenant = caller(request, state)
    record = await visible_batch(rt, batch_id, tenant)
    return await batch_view(rt, record, limit, offset)


@post("/v1/batches/{batch_id:str}/cancel", status_code=200, summary="Cancel a batch's jobs")
async def cancel_batch(
    request: Request[Any, Any, Any], state: State, batch_id: FromPath[str]
) -> dict[str, Any]:
    """Cancel every job of the batch that has not ended; the batch and finished results stay."""
    rt, tenant = caller(request, state)
    await visible_batch(rt, batch_id, tenant)
    job_ids = await rt.batches.job_ids(batch_id)
    documents = await batch_documents(rt, job_ids)
    cancelled, dropped = 0, []
    for job_id, document in zip(job_ids, documents, strict=True):
        if await rt.store.cancel(job_id, tenant) == "cancelled":
            cancelled += 1
            dropped.append(document)
    await remove_batch_objects(rt, tenant, dropped)  # their documents; no results
    return {"id": batch_id, "cancelled": cancelled}


@delete("/v1/batches/{batch_id:str}", status_code=200, summary="Delete a batch")
async def delete_batch(
    request: Request[Any, Any, Any], state: State, batch_id: FromPath[str]
) -> dict[str, Any]:
    """Cancel what has not finished, then delete the batch, its jobs and results (then 404)."""
    rt, tenant = caller(request, state)
    await visible_batch(rt, batch_id, tenant)
    job_ids = await rt.batches.job_ids(batch_id)
    documents = await batch_documents(rt, job_ids)
    for job_id in job_ids:
        await rt.store.cancel(job_id, tenant, delete=True)
    await rt.batches.delete(batch_id)
    await remove_batch_objects(rt, tenant, documents, results_of=job_ids)
    return {"id": batch_id, "status": "deleted"}


async def batch_documents(rt: Runtime, job_ids: list[str]) -> list[DocumentRef | None]:
    """Where each job's document is (read before the jobs are cancelled or deleted)."""
    if rt.blobs is None or not job_ids:
        return [None] * len(job_ids)
    documents: list[DocumentRef | None] = []
    for at in range(0, len(job_ids), DOCUMENTS_PER_READ):
        rows = await rt.batches.job_rows(job_ids[at : at + DOCUMENTS_PER_READ], (Field.DOCUMENT,))
        documents += [row.document for row in rows]
    return documents


STATUS_FIELDS = (Field.STATUS, Field.FILENAME, Field.ERROR, Field.RESULT)
BATCH_HANDLERS = [submit_batch, get_batch, cancel_batch, delete_batch]
