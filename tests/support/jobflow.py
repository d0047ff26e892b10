"""Drive a queued job through the store as a worker would (for producer tests)."""

from __future__ import annotations

import msgspec

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import EngineInfo, Page, Result
from ocrq.shared.store import JobStore, Outcome

ME = "test-worker"


async def take(store: JobStore, lane: str = "interactive") -> tuple[str, str]:
    """Read one entry, take the job it runs (a fair-share ticket's) and claim it;
    (job_id, entry)."""
    (read,) = await store.lanes.read_new(store.keys.stream(lane), ME, 1)
    given = await store.fair.take(read, ME)
    assert given is not None and not given.ticket
    assert await store.claim(given.job_id, lane, given.entry_id, ME) == "ok"
    return given.job_id, given.entry_id


def result_for(job_id: str, markdown: str) -> Result:
    """A one-page result."""
    page = Page(number=1, width=100, height=100, markdown=markdown)
    engine = EngineInfo(name="test", model="none", profile="none")
    return Result(
        id=job_id,
        status="done",
        media_type="application/pdf",
        page_count=1,
        markdown=markdown,
        pages=[page],
        engine=engine,
    )


async def finish_done(store: JobStore, markdown: str = "# Hello\n") -> str:
    """Take the next job and finish it with a result; its id."""
    job_id, entry = await take(store)
    outcome = Outcome.done(msgspec.json.encode(result_for(job_id, markdown)), 1)
    assert await store.finish(job_id, "interactive", entry, ME, outcome)
    return job_id


async def finish_failed(store: JobStore, code: ErrorCode) -> str:
    """Take the next job and fail it with code."""
    job_id, entry = await take(store)
    outcome = Outcome.failed(OcrqError(code, f"{code.value} for test"))
    assert await store.finish(job_id, "interactive", entry, ME, outcome)
    return job_id
