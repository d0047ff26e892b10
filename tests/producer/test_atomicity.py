"""A burst of concurrent submits against the real server leaves no half-written job."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import redis
from support.payloads import b64, small_pdf

from ocrq.shared.enqueue import NewJob
from ocrq.shared.record import Field
from ocrq.shared.store import JobStore

REQUIRED = {b"status", b"tenant", b"media_type", b"size", b"lane", b"options", b"created_at",
            b"payload"}  # fmt: skip


@pytest.mark.smoke
async def test_concurrent_submits_leave_every_entry_naming_a_complete_job(
    live_producer: str, clean_redis: str
) -> None:
    doc = b64(small_pdf())
    async with httpx.AsyncClient(base_url=live_producer, timeout=30) as client:
        replies = await asyncio.gather(
            *(
                client.post("/v1/jobs", json={"document": doc, "options": {"lane": lane}})
                for lane in ["interactive", "batch"] * 30
            )
        )
    assert [r.status_code for r in replies] == [202] * 60
    r = redis.Redis.from_url(clean_redis)
    named = {
        fields[b"id"].decode()
        for lane in ("interactive", "batch")
        for _, fields in r.xrange(f"ocrq:{{p0}}:stream:{lane}")
    }
    hashes = {k.decode().removeprefix("ocrq:{p0}:job:") for k in r.scan_iter("ocrq:{p0}:job:*")}
    assert named == hashes == {reply.json()["id"] for reply in replies}
    for job_id in hashes:
        assert REQUIRED <= set(r.hkeys(f"ocrq:{{p0}}:job:{job_id}")), job_id
        assert r.ttl(f"ocrq:{{p0}}:job:{job_id}") == -1  # queued: it lives as long as its entry
    r.close()


async def test_a_producer_that_dies_between_the_checks_and_exec_writes_nothing(
    store: JobStore,
) -> None:
    # What enqueue does, cut where a crash could cut it: after the reads, inside MULTI.
    new = NewJob(store.keys, "lost", "interactive", {Field.TENANT: "t", Field.STATUS: "queued"}, "")
    async with store.redis.pipeline(transaction=True) as pipe:
        await pipe.watch("ocrq:{p0}:idem:t:k")
        await pipe.get("ocrq:{p0}:idem:t:k")
        pipe.multi()
        pipe.hset(new.job, mapping={"status": "queued"})
        pipe.xadd(new.stream, new.entry(False))
        await pipe.reset()  # the connection goes away before EXEC
    assert await store.redis.exists(new.job) == 0
    assert await store.redis.xlen(new.stream) == 0
