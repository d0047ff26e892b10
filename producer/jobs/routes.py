"""The job API: submit (``Prefer: wait``), list, poll (long-poll), result in every format,
cancel, delete; a job's tables, figures and pages are in files.py."""

from __future__ import annotations

import time
from typing import Annotated, Any

import structlog
from litestar import Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter

from ocrq.producer.jobs.documents import discard, put_document
from ocrq.producer.jobs.ingest import (
    Query,
    SourceSubmission,
    Submission,
    body_ceiling,
    read_json,
    read_multipart,
    read_raw,
    within,
)
from ocrq.producer.jobs.options import check_options
from ocrq.producer.jobs.outputs import (
    CHUNK_TOKENS,
    ChunkTokens,
    Rendering,
    attachment,
    media_type_of,
    negotiate,
    rendered,
)
from ocrq.producer.jobs.owned import job_document, remove_objects
from ocrq.producer.jobs.prefer import preferred_wait
from ocrq.producer.jobs.sources import place_source, upload_idempotency
from ocrq.producer.jobs.stored import RESULT_READ_FIELDS, answer_from_store, result_json
from ocrq.producer.jobs.views import (
    SUMMARY_FIELDS,
    await_view,
    iso,
    job_summary,
    known_job,
    new_job_id,
    visible,
)
from ocrq.producer.runtime import Runtime, caller
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import SEARCHABLE_PDF, Field, JobRecord, new_job_fields
from ocrq.shared.schemas import ACTIVE, TERMINAL, Accepted, JobList, JobView, Status, keeps_pdf
from ocrq.shared.store import now_ms

log = structlog.get_logger("ocrq.producer")
WaitSeconds = Annotated[
    int, Parameter(ge=0, description="Long-poll up to N seconds (at most OCRQ_MAX_WAIT_S, 60)")
]


async def read_submission(
    request: Request[Any, Any, Any], rt: Runtime
) -> Submission | SourceSubmission:
    """Dispatch on Content-Type to the three accepted formats (JSON: or a source)."""
    limit = rt.settings.api.max_document_bytes
    content_type, params = request.content_type
    declared_length = request.headers.get("content-length")
    if declared_length and declared_length.isdigit():
        if int(declared_length) > body_ceiling(content_type, limit):
            raise OcrqError(ErrorCode.PAYLOAD_TOO_LARGE, f"document exceeds {limit} bytes")
    chunks = within(request.stream(), rt.settings.api.body_timeout_s)
    query = Query.of(dict(request.query_params.items()))
    if content_type == "application/json":
        return await read_json(chunks, limit, rt.decode_gate, query)
    if content_type == "multipart/form-data":
        boundary = params.get("boundary")
        if not boundary:
            raise OcrqError(ErrorCode.INVALID_REQUEST, "multipart boundary missing")
        return await read_multipart(chunks, boundary, limit, query)
    if is_raw_document(content_type):
        return await read_raw(chunks, content_type, query, limit)
    raise OcrqError(
        ErrorCode.UNSUPPORTED_MEDIA_TYPE,
        f"Content-Type {content_type} is not JSON, multipart/form-data, application/pdf, "
        "image/* or application/octet-stream",
    )


# Types a raw upload may declare; the bytes decide what it is. application/x-www-form-
# urlencoded is what `curl --data-binary @file` sends when no type is given.
RAW_TYPES = frozenset(
    {"application/pdf", "application/octet-stream", "application/x-www-form-urlencoded", ""}
)


def is_raw_document(content_type: str) -> bool:
    """True for a body that is the document itself (its bytes decide its type)."""
    return content_type in RAW_TYPES or content_type.startswith("image/")


@post("/v1/jobs", status_code=202, request_max_body_size=None, summary="Submit a document")
async def submit_job(request: Request[Any, Any, Any], state: State) -> Response[Accepted | JobView]:
    """Validate an upload and enqueue it in one atomic step; ``Prefer: wait=N`` waits for it.

    A JSON ``{"source": …}`` body queues a document by reference (producer/jobs/sources.py);
    with a store, an inline document over OCRQ_INLINE_MAX_BYTES is written to it first.
    """
    rt, tenant = caller(request, state)
    wait = preferred_wait(request.headers.getall("prefer", []), rt.settings.api.max_wait_s)
    sub = await read_submission(request, rt)
    by_reference = isinstance(sub, SourceSubmission)
    await check_options(sub.options, tenant, rt.settings, by_reference=by_reference)
    idem = request.headers.get("idempotency-key")
    if idem is not None and not (0 < len(idem) <= 200):
        raise OcrqError(ErrorCode.INVALID_REQUEST, "Idempotency-Key: 1 to 200 characters")
    if isinstance(sub, SourceSubmission):
        return await submit_source(rt, tenant, sub, idem, wait)
    job_id, created = new_job_id(rt.store.keys.pick_tag(tenant, idem)), now_ms()
    document = None
    if rt.blobs is not None and len(sub.data) > rt.settings.blobs.inline_max_bytes:
        document = await put_document(rt.blobs, tenant, job_id, sub.data, sub.media_type)
    fields = new_job_fields(
        job_id=job_id,
        tenant=tenant,
        filename=sub.filename,
        media_type=sub.media_type,
        data=b"" if document else sub.data,
        options=sub.options,
        created_ms=created,
        callback=sub.options.callback_url,
        document=document,
    )
    written = document.key if document else ""
    fresh, job_id = await queue_job(rt, job_id, sub.options.lane, fields, idem, written)
    if fresh:
        rt.metrics.accepted_bytes.inc(len(sub.data))
    return await submitted(rt, tenant, job_id, fresh, created, wait)


async def submit_source(
    rt: Runtime, tenant: str, sub: SourceSubmission, idem: str | None, wait: int
) -> Response[Accepted | JobView]:
    """Queue a job on a document by reference: an upload, a key of the store, a URL."""
    placed = await place_source(rt, tenant, sub)
    job_id = placed.job_id or new_job_id(rt.store.keys.pick_tag(tenant, idem))
    created = now_ms()
    fields = new_job_fields(
        job_id=job_id,
        tenant=tenant,
        filename=placed.filename,
        media_type=placed.media_type,
        data=b"",
        options=sub.options,
        created_ms=created,
        callback=sub.options.callback_url,
        document=placed.document,
    )
    # An upload queues one job: without a client key, its id is the key, so two requests
    # racing on one upload find each other in the enqueue's transaction.
    key = idem if idem or not placed.job_id else upload_idempotency(placed.job_id)
    given = bool(placed.job_id)
    fresh, job_id = await queue_job(rt, job_id, sub.options.lane, fields, key, given_id=given)
    if not fresh and key != idem:
        raise OcrqError(
            ErrorCode.CONFLICT,
            f"source.upload_id: upload {job_id} is already job {job_id}: an upload queues one job",
        )
    return await submitted(rt, tenant, job_id, fresh, created, wait)


async def queue_job(
    rt: Runtime,
    job_id: str,
    lane: str,
    fields: dict[str, bytes | str | int],
    idem: str | None,
    written: str = "",
    *,
    given_id: bool = False,
) -> tuple[bool, str]:
    """The atomic enqueue, timed; ``written`` (a document this request put in the store) is
    deleted again when no job took it (a failure, a replayed Idempotency-Key)."""
    started = time.perf_counter()
    try:
        fresh, job_id = await rt.store.enqueue(job_id, lane, fields, idem, given_id=given_id)
    except Exception:
        await discard(rt.blobs, written)
        raise
    rt.metrics.enqueue_seconds.observe(time.perf_counter() - started)
    structlog.contextvars.bind_contextvars(job_id=job_id)
    if not fresh:
        await discard(rt.blobs, written)
    return fresh, job_id


async def submitted(
    rt: Runtime, tenant: str, job_id: str, fresh: bool, created: int, wait: int
) -> Response[Accepted | JobView]:
    """202 (200 for a replay) with the job's id; 200 with its view when it ended within
    ``wait`` seconds (``Prefer: wait``), a replay as well as a new job."""
    headers = {"Location": f"/v1/jobs/{job_id}", "Idempotent-Replayed": str(not fresh).lower()}
    if fresh and not wait:
        body = Accepted(id=job_id, status=Status.QUEUED.value, created_at=iso(created) or "")
        return Response(body, status_code=202, headers=headers)
    view = await await_view(rt, job_id, tenant, wait, until_end=True)
    if wait and Status(view.status) in TERMINAL:
        headers["Preference-Applied"] = f"wait={wait}"
        return Response(view, status_code=200, headers=headers)
    body = Accepted(id=job_id, status=view.status, created_at=view.created_at or "")
    return Response(body, status_code=202 if fresh else 200, headers=headers)


ListLimit = Annotated[int, Parameter(ge=1, le=100, description="Jobs per page (1-100)")]
ListOffset = Annotated[int, Parameter(ge=0, le=1_000_000, description="Jobs to skip, newest first")]


@get("/v1/jobs", summary="The tenant's recent jobs, newest first")
async def list_jobs(
    request: Request[Any, Any, Any], state: State, limit: ListLimit = 20, offset: ListOffset = 0
) -> JobList:
    """A page of the caller's jobs (at most OCRQ_TENANT_INDEX_SIZE are remembered)."""
    rt, tenant = caller(request, state)
    # One more than asked: whether another page follows, without counting the set.
    rows = await rt.store.recent_jobs(tenant, limit + 1, offset, SUMMARY_FIELDS)
    more = len(rows) > limit
    jobs = [job_summary(job_id, record) for job_id, record in rows[:limit]]
    return JobList(jobs=jobs, next_offset=offset + limit if more else None)


@get("/v1/jobs/{job_id:str}", summary="Job status, progress and result")
async def get_job(
    request: Request[Any, Any, Any], state: State, job_id: FromPath[str], wait: WaitSeconds = 0
) -> Response[JobView]:
    """Poll a job; ``?wait=N`` returns as soon as it changes (one pub/sub per process)."""
    rt, tenant = caller(request, state, job_id=job_id)
    if wait > rt.settings.api.max_wait_s:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"wait: at most {rt.settings.api.max_wait_s} seconds"
        )
    view = await await_view(rt, job_id, tenant, wait)
    headers = {"Retry-After": "1"} if Status(view.status) in ACTIVE else {}
    return Response(view, headers=headers)


ResultFormat = Annotated[
    str | None,
    Parameter(description="json (default), markdown, html, text, chunks or pdf; wins over Accept"),
]
KeepFurniture = Annotated[
    bool | None,
    Parameter(description="keep page headers, footers and numbers (default: the job's option)"),
]
RedirectWanted = Annotated[
    bool,
    Parameter(
        description="with an object store that presigns: 307 to a short-lived URL of the "
        "stored object (json, pdf, default markdown) instead of the bytes"
    ),
]
RESULT_FIELDS = (Field.STATUS, Field.TENANT, Field.RESULT, Field.ERROR, Field.OPTIONS)


async def ended_record(
    rt: Runtime, job_id: str, tenant: str, names: tuple[Field, ...] = RESULT_FIELDS
) -> JobRecord:
    """The tenant's job record (404 otherwise), read with ``names``."""
    return visible(job_id, await rt.store.read(known_job(job_id), names), tenant)


@get("/v1/jobs/{job_id:str}/result", summary="The result: JSON, Markdown, HTML, text, chunks, PDF")
async def get_result(
    request: Request[Any, Any, Any],
    state: State,
    job_id: FromPath[str],
    format: ResultFormat = None,
    chunk_tokens: ChunkTokens = CHUNK_TOKENS,
    keep_headers_footers: KeepFurniture = None,
    redirect: RedirectWanted = False,
) -> Response[Any]:
    """The result in the format ``format=`` or ``Accept`` names (docs/results.md); from
    the object store it is streamed, or with ``redirect=true`` a 307 to a presigned GET."""
    rt, tenant = caller(request, state, job_id=job_id)
    record = await ended_record(rt, job_id, tenant, (*RESULT_READ_FIELDS, Field.FILENAME))
    accept = request.headers.get("accept", "")
    fmt = negotiate(job_id, format, accept, keeps_pdf(record.options))
    how = Rendering(fmt, keep_headers_footers, chunk_tokens)
    headers = {"Vary": "Accept"}
    if fmt == "pdf":
        headers["Content-Disposition"] = attachment(record.filename, job_id, ".pdf")
    if record.result_ref:
        return await answer_from_store(rt, job_id, record, how, redirect, headers)
    stored = await result_json(rt, job_id, record)
    if fmt == "pdf":
        pdf = await rt.store.read_file(job_id, SEARCHABLE_PDF)
        if pdf is None:
            raise OcrqError(ErrorCode.NOT_ACCEPTABLE, f"job {job_id} kept no searchable PDF")
        return Response(pdf, media_type=media_type_of(fmt), headers=headers)
    body = await rendered(stored, how, record.options.keep_headers_footers)
    return Response(body, media_type=media_type_of(fmt), headers=headers)


@post("/v1/jobs/{job_id:str}/cancel", status_code=200, summary="Cancel an active job")
async def cancel_job(
    request: Request[Any, Any, Any], state: State, job_id: FromPath[str]
) -> dict[str, str]:
    """Queued or processing → cancelled (its worker stops it); the job and its error stay."""
    rt, tenant = caller(request, state, job_id=job_id)
    document = await job_document(rt, known_job(job_id))
    outcome = await rt.store.cancel(job_id, tenant)
    if outcome == "missing":
        raise OcrqError(ErrorCode.NOT_FOUND, f"no job {job_id}")
    if outcome != Status.CANCELLED:
        raise OcrqError(ErrorCode.CONFLICT, f"job {job_id} is {outcome}: nothing to cancel")
    await remove_objects(rt, tenant, job_id, document, results=False)
    return {"id": job_id, "status": outcome}


@delete("/v1/jobs/{job_id:str}", status_code=200, summary="Delete a job (cancelling it)")
async def delete_job(
    request: Request[Any, Any, Any], state: State, job_id: FromPath[str]
) -> dict[str, str]:
    """Delete the job and its result (and its objects in the store); an active job is
    cancelled first. Then 404."""
    rt, tenant = caller(request, state, job_id=job_id)
    document = await job_document(rt, known_job(job_id))
    if await rt.store.cancel(job_id, tenant, delete=True) == "missing":
        raise OcrqError(ErrorCode.NOT_FOUND, f"no job {job_id}")
    await remove_objects(rt, tenant, job_id, document, results=True)
    return {"id": job_id, "status": "deleted"}


JOB_HANDLERS = [submit_job, list_jobs, get_job, get_result, cancel_job, delete_job]
