"""What the API shows of a batch: its view, and the answer to a replayed submission."""

from __future__ import annotations

from ocrq.producer.jobs.views import iso
from ocrq.producer.runtime import Runtime
from ocrq.shared.batch_store import BatchRecord
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import Field, JobRecord
from ocrq.shared.schemas import (
    BatchAccepted,
    BatchCounts,
    BatchFile,
    BatchJob,
    BatchView,
    Progress,
)

ROW_FIELDS = (Field.STATUS, Field.FILENAME, Field.PAGES_DONE, Field.PAGES_TOTAL, Field.ERROR)


async def visible_batch(rt: Runtime, batch_id: str, tenant: str) -> BatchRecord:
    """The batch when it exists and is the tenant's own; not_found otherwise."""
    return tenants_batch(await rt.batches.read(batch_id), batch_id, tenant)


def tenants_batch(record: BatchRecord | None, batch_id: str, tenant: str) -> BatchRecord:
    """The record when it is a batch of this tenant; not_found otherwise."""
    if record is None or record.tenant != tenant:
        raise OcrqError(ErrorCode.NOT_FOUND, f"no batch {batch_id}")
    return record


def batch_status(record: BatchRecord) -> str:
    """open: documents still arriving; running; finished: every job ended."""
    if record.finished_at is not None:
        return "finished"
    return "running" if record.sealed else "open"


def tally(rows: list[JobRecord], record: BatchRecord) -> tuple[BatchCounts, Progress]:
    """Counts by status and pages done / total, over every job of the batch."""
    counts = BatchCounts(
        total=record.total, done=record.done, failed=record.failed, cancelled=record.cancelled
    )
    pages = Progress()
    for row in rows:
        counts.queued += row.status == "queued"
        counts.processing += row.status == "processing"
        pages.pages_done += row.pages_done
        pages.pages_total += row.pages_total
    return counts, pages


async def batch_view(rt: Runtime, record: BatchRecord, limit: int, offset: int) -> BatchView:
    """The batch with a page of its jobs in submission order."""
    ids = await rt.batches.job_ids(record.id)
    rows = await rt.batches.job_rows(ids, ROW_FIELDS)
    counts, pages = tally(rows, record)
    page = [
        BatchJob(
            id=job_id,
            filename=row.filename or None,
            status=row.status or "expired",
            pages_done=row.pages_done,
            pages_total=row.pages_total,
            error=row.error.code if row.error else None,
        )
        for job_id, row in list(zip(ids, rows, strict=True))[offset : offset + limit]
    ]
    more = offset + limit < len(ids)
    return BatchView(
        id=record.id,
        status=batch_status(record),
        counts=counts,
        pages=pages,
        options=record.options,
        created_at=iso(record.created_at),
        finished_at=iso(record.finished_at),
        rejected=record.rejected,
        jobs=page,
        next_offset=offset + limit if more else None,
        webhook=record.webhook,
    )


async def batch_accepted(rt: Runtime, record: BatchRecord) -> BatchAccepted:
    """What a replayed submission (same Idempotency-Key) answers: the first batch."""
    ids = await rt.batches.job_ids(record.id)
    rows = await rt.batches.job_rows(ids, (Field.FILENAME,))
    accepted = [
        BatchFile(index=i, filename=row.filename or None, id=job_id)
        for i, (job_id, row) in enumerate(zip(ids, rows, strict=True))
    ]
    return BatchAccepted(
        id=record.id,
        status=batch_status(record),
        created_at=iso(record.created_at) or "",
        accepted=accepted,
        rejected=record.rejected,
    )
