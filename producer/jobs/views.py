"""Jobs as the API sees them: ids, tenant visibility, and the view a poll returns."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

import msgspec

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import DEFAULT_TAG, with_tag
from ocrq.shared.record import Field, JobRecord
from ocrq.shared.schemas import JobSummary, JobView, Progress, Result, WebhookState

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
