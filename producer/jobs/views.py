"""Jobs as the API sees them: ids, tenant visibility, and the view a poll returns."""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import UTC, datetime

import msgspec

from ocrq.producer.jobs.stored import result_json
from ocrq.producer.runtime import Runtime
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import DEFAULT_TAG, is_known_id, with_tag
from ocrq.shared.record import Field, JobRecord
from ocrq.shared.schemas import ACTIVE, JobSummary, JobView, Progress, Result, Status, WebhookState

# The fields a job's summary shows (GET /v1/jobs, live events): never the payload or result.
SUMMARY_FIELDS = (
    Field.STATUS,
    Field.FILENAME,
    Field.MEDIA_TYPE,
    Field.LANE,
    Field.PAGES_DONE,
    Field.PAGES_TOTAL,
    Field.CREATED_AT,
    Field.FINISHED_AT,
    Field.ERROR,
)


def new_job_id(tag: str = DEFAULT_TAG) -> str:
    """128 random bits, URL-safe (22 characters), never starting with "-", after its tag.

    An id that starts with "-" reads as an option on a command line (`ocrq status -x…`).
    Batch ids are made the same way.
    """
    while (token := secrets.token_urlsafe(16)).startswith("-"):
        pass
    return with_tag(token, tag)


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO-8601 UTC timestamp."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def visible(job_id: str, record: JobRecord, tenant: str) -> JobRecord:
    """The record when it exists and is the tenant's own; not_found otherwise."""
    if record.status is None or record.tenant != tenant:
        raise OcrqError(ErrorCode.NOT_FOUND, f"no job {job_id}")
    return record


def job_view(job_id: str, record: JobRecord, tenant: str) -> JobView:
    """Build the poll view; a job of another tenant (or none) is not_found."""
    r = visible(job_id, record, tenant)
    return JobView(
        id=job_id,
        status=r.status or "",
        filename=r.filename or None,
        media_type=r.media_type,
        size=r.size,
        lane=r.lane,
        options=r.options,
        progress=Progress(pages_done=r.pages_done, pages_total=r.pages_total),
        attempts=r.attempts,
        created_at=iso(r.created_at),
        started_at=iso(r.started_at),
        finished_at=iso(r.finished_at),
        error=r.error,
        result=msgspec.json.decode(r.result, type=Result) if r.result else None,
        batch=r.batch or None,
        webhook=msgspec.json.decode(r.webhook, type=WebhookState) if r.webhook else None,
    )


def job_summary(job_id: str, r: JobRecord) -> JobSummary:
    """The list line of a job (a record already known to be the tenant's)."""
    return JobSummary(
        id=job_id,
        status=r.status or "",
        filename=r.filename or None,
        media_type=r.media_type,
        lane=r.lane,
        progress=Progress(pages_done=r.pages_done, pages_total=r.pages_total),
        created_at=iso(r.created_at),
        finished_at=iso(r.finished_at),
        error=r.error,
    )


def known_job(job_id: str) -> str:
    """The id when it has the shape of ocrq's ids; not_found before it can name a key."""
    if not is_known_id(job_id):
        raise OcrqError(ErrorCode.NOT_FOUND, f"no job {job_id}")
    return job_id


async def read_view(rt: Runtime, job_id: str, tenant: str) -> JobView:
    """Read what a poll may read (never the payload) and build the view; a result in the
    object store is read from there (503 when it is unreachable)."""
    record = visible(job_id, await rt.store.read(known_job(job_id)), tenant)
    if record.result is None and record.result_ref:
        record = msgspec.structs.replace(record, result=await result_json(rt, job_id, record))
    return job_view(job_id, record, tenant)


async def await_view(
    rt: Runtime, job_id: str, tenant: str, seconds: float, *, until_end: bool = False
) -> JobView:
    """The job's view once it changes (``until_end``: once it ends), or after ``seconds``.

    One pub/sub subscription per process wakes the waiters (producer/events.py).
    """
    with rt.events.watch(job_id) as changed:
        view = await read_view(rt, job_id, tenant)
        deadline = time.monotonic() + seconds
        seen = (view.status, view.progress)
        # A wake-up without a change (the hub resubscribed) waits on for the time left.
        while Status(view.status) in ACTIVE and (until_end or (view.status, view.progress) == seen):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(changed.wait(), timeout=left)
            except TimeoutError:
                break
            changed.clear()  # before the read: a change after it wakes the next wait
            view = await read_view(rt, job_id, tenant)
    return view
