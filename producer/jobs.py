"""Jobs as the API sees them: the hash written at enqueue, the view read by a poll."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

import msgspec

from producer.ingest import Submission
from shared.errors import ErrorCode, OcrqError
from shared.schemas import ErrorBody, JobView, Progress, Result, Status, stored_options


def new_job_id() -> str:
    """128 random bits, URL-safe (22 characters)."""
    return secrets.token_urlsafe(16)


def iso(ms: Any) -> str | None:
    """Epoch milliseconds (bytes or int) as an ISO-8601 UTC timestamp."""
    if ms is None or ms == b"":
        return None
    return datetime.fromtimestamp(int(ms) / 1000, UTC).isoformat(timespec="milliseconds")


def job_fields(job_id: str, tenant: str, sub: Submission, created_ms: int) -> dict[str, Any]:
    """Every field of a new job hash; the payload is the raw bytes, never base64."""
    return {
        "id": job_id,
        "status": Status.QUEUED.value,
        "tenant": tenant,
        "filename": sub.filename or "",
        "media_type": sub.media_type,
        "size": len(sub.data),
        "lane": sub.options.lane,
        "options": msgspec.json.encode(sub.options),
        "created_at": created_ms,
        "attempts": 0,
        "pages_total": 0,
        "pages_done": 0,
        "payload": sub.data,
    }


def view_from_fields(job_id: str, f: dict[str, Any], tenant: str) -> JobView:
    """Build the poll view; a job of another tenant (or none) is not_found."""
    if not f.get("status") or f.get("tenant", b"").decode() != tenant:
        raise OcrqError(ErrorCode.NOT_FOUND, f"no job {job_id}")
    status = f["status"].decode()
    return JobView(
        id=job_id,
        status=status,
        filename=f.get("filename", b"").decode() or None,
        media_type=f.get("media_type", b"").decode(),
        size=int(f.get("size", 0)),
        lane=f.get("lane", b"interactive").decode(),
        options=stored_options(f.get("options", b"{}")),
        progress=Progress(
            pages_done=int(f.get("pages_done", 0)), pages_total=int(f.get("pages_total", 0))
        ),
        attempts=int(f.get("attempts", 0)),
        created_at=iso(f.get("created_at")),
        started_at=iso(f.get("started_at")),
        finished_at=iso(f.get("finished_at")),
        error=msgspec.json.decode(f["error"], type=ErrorBody) if f.get("error") else None,
        result=msgspec.json.decode(f["result"], type=Result) if f.get("result") else None,
    )
