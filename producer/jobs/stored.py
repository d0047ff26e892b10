"""A done job's result and files wherever its worker left them: in Redis, or in the store.

A job finished with an object store holds ``result_ref`` (its folder, results/<tenant>/<job>/)
instead of ``result``: result.json, result.md, searchable.pdf and images/… are objects there.
A job finished without one (or before one was configured) keeps everything in Redis, read as
before. The store unreachable is 503 with Retry-After; an object gone (swept, or a bucket
lifecycle rule shorter than the job's TTL) is 404, never a 500.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import structlog
from litestar import Response
from litestar.response import Redirect, Stream

from ocrq.producer.jobs.outputs import (
    Rendering,
    as_stored_markdown,
    media_type_of,
    pdf_not_kept,
    rendered,
)
from ocrq.producer.runtime import Runtime
from ocrq.shared.blobs import BlobError, BlobMissing, BlobStore
from ocrq.shared.blobs.paths import RESULT_JSON, RESULT_MARKDOWN
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import SEARCHABLE_PDF, Field, JobRecord
from ocrq.shared.schemas import ACTIVE

log = structlog.get_logger("ocrq.producer")
# What reading a job's result needs: where it is (either field) and how to render it.
RESULT_READ_FIELDS = (
    Field.STATUS,
    Field.TENANT,
    Field.RESULT,
    Field.RESULT_REF,
    Field.ERROR,
    Field.OPTIONS,
)
RETRY_AFTER_S = 5  # the store unreachable: about when to ask again
REDIRECT_EXPIRES_S = 300  # a presigned GET of ?redirect=true: enough to start the download


def store_error(job_id: str, what: str, error: BlobError) -> OcrqError:
    """A store failure in the API's words: gone is 404, unreachable is 503."""
    if isinstance(error, BlobMissing):
        return OcrqError(
            ErrorCode.NOT_FOUND,
            f"job {job_id}: its {what} is no longer in the object store (expired or deleted)",
        )
    return OcrqError(
        ErrorCode.UNAVAILABLE,
        f"job {job_id}: the object store is unreachable: {error}",
        retry_after=RETRY_AFTER_S,
    )


def store_of(rt: Runtime, job_id: str) -> BlobStore:
    """The store a job's result is in; 503 when this producer was started without one."""
    if rt.blobs is None:
        raise OcrqError(
            ErrorCode.UNAVAILABLE,
            f"job {job_id}: its result is in the object store, and this producer has none "
            "configured (OCRQ_BLOB_URL)",
            retry_after=RETRY_AFTER_S,
        )
    return rt.blobs


def no_result(job_id: str, record: JobRecord) -> OcrqError:
    """409 with the cause for a job that has no result (yet)."""
    detail = f": {record.error.code}: {record.error.message}" if record.error else ""
    return OcrqError(
        ErrorCode.CONFLICT,
        f"job {job_id} is {record.status}, no result{detail}",
        retry_after=1 if record.status in ACTIVE else None,
    )


async def result_json(rt: Runtime, job_id: str, record: JobRecord) -> bytes:
    """The Result JSON exactly as the worker wrote it, from Redis or the store; 409 without."""
    if record.result is not None:
        return record.result
    if not record.result_ref:
        raise no_result(job_id, record)
    try:
        return await store_of(rt, job_id).get(record.result_ref + RESULT_JSON)
    except BlobError as e:
        raise store_error(job_id, "result", e) from e


async def job_file(rt: Runtime, job_id: str, record: JobRecord, name: str) -> bytes | None:
    """One of the job's files ("images/p1-1.png", "searchable.pdf"); None when it has none."""
    if not record.result_ref:
        return await rt.store.read_file(job_id, name)
    try:
        return await store_of(rt, job_id).get(record.result_ref + name)
    except BlobMissing:
        return None
    except BlobError as e:
        raise store_error(job_id, name, e) from e


async def started(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The same chunks, the first already read: what fails at once (the store or Redis
    unreachable, an object gone) is an error answer rather than a body cut short."""
    try:
        first = await anext(chunks)
    except StopAsyncIteration:
        first = b""
    return _chained(first, chunks)


async def _chained(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        yield first
        async for chunk in rest:
            yield chunk
    finally:
        if isinstance(rest, AsyncGenerator):
            await rest.aclose()


def stored_name(how: Rendering, job_keeps: bool) -> str | None:
    """The object that already holds the answer, when one does: None means render the JSON."""
    if how.fmt == "json":
        return RESULT_JSON
    if how.fmt == "pdf":
        return SEARCHABLE_PDF
    if as_stored_markdown(how, job_keeps):
        return RESULT_MARKDOWN  # the worker's result.md: Markdown with the job's own options
    return None


async def answer_from_store(
    rt: Runtime,
    job_id: str,
    record: JobRecord,
    how: Rendering,
    redirect: bool,
    headers: dict[str, str],
) -> Response[Any]:
    """GET …/result for a job whose result is in the store: streamed (or a 307 to a
    presigned GET with ``redirect``) when an object holds the answer, else rendered."""
    blobs = store_of(rt, job_id)
    keeps = record.options.keep_headers_footers
    name = stored_name(how, keeps)
    if name is not None:
        try:
            answer = await object_answer(blobs, record.result_ref + name, how, redirect, headers)
        except BlobError as e:
            raise store_error(job_id, name, e) from e
        if answer is not None:
            return answer
        if name == SEARCHABLE_PDF:
            raise pdf_not_kept(job_id)
        if name == RESULT_JSON:
            raise store_error(job_id, "result", BlobMissing(name))
        # A job finished by a worker that wrote no result.md: render it from the JSON.
    stored = await result_json(rt, job_id, record)
    body = await rendered(stored, how, keeps)
    return Response(body, media_type=media_type_of(how.fmt), headers=headers)


async def object_answer(
    blobs: BlobStore, key: str, how: Rendering, redirect: bool, headers: dict[str, str]
) -> Response[Any] | None:
    """The object streamed, or with ``redirect`` (a store that presigns) a 307 to a
    presigned GET of it; None when there is no such object."""
    if redirect and blobs.can_presign:
        if await blobs.head(key) is None:
            return None
        url = await blobs.presign("GET", key, REDIRECT_EXPIRES_S)
        # The URL expires: no cache may keep the redirect.
        return Redirect(url, status_code=307, headers={**headers, "Cache-Control": "no-store"})
    try:
        chunks = await started(blobs.stream(key))
    except BlobMissing:
        return None
    return Stream(chunks, media_type=media_type_of(how.fmt), headers=headers)
