"""Drive a queued job through the store as a worker would (for producer tests)."""

from __future__ import annotations

import msgspec
import redis.asyncio as aioredis

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import EngineInfo, Page, Result
from ocrq.shared.store import JobStore, Outcome

ME = "test-worker"


async def take(store: JobStore, lane: str = "interactive") -> tuple[str, str]:
    """XREADGROUP one entry and claim its job; (job_id, entry)."""
    redis: aioredis.Redis = store.redis
    reply = await redis.xreadgroup("workers", ME, {store.keys.stream(lane): ">"}, count=1)
    entry_id, fields = reply[0][1][0]
    job_id, entry = fields[b"id"].decode(), entry_id.decode()
    assert await store.claim(job_id, lane, entry, ME) == "ok"
    return job_id, entry


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
