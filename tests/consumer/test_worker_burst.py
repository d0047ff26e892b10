"""Burst mode: an in-process worker takes every queued job and returns once the lanes are empty."""

from __future__ import annotations

import asyncio
import secrets

import msgspec
from support.documents import png, sized_pdf

from ocrq.consumer.main import serve
from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.record import Field, new_job_fields
from ocrq.shared.schemas import JobOptions, Result, Status
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore, now_ms


async def enqueue(store: JobStore, data: bytes, media_type: str, lane: str = "interactive") -> str:
    job_id = secrets.token_urlsafe(16)
    fields = new_job_fields(
        job_id=job_id, tenant="t", filename=None, media_type=media_type, data=data,
        options=JobOptions(lane=lane), created_ms=now_ms(),
    )  # fmt: skip
    assert (await store.enqueue(job_id, lane, fields, None))[0]
    return job_id


async def test_a_burst_worker_finishes_every_queued_job_then_returns(
    store: JobStore, settings: Settings, fake: FakeVllm
) -> None:
    jobs = [
        await enqueue(store, png(320, 200), "image/png"),
        await enqueue(store, sized_pdf([(300, 400), (400, 300)]), "application/pdf"),
        await enqueue(store, png(200, 320), "image/png", lane="batch"),
    ]
    engine = replace_settings(settings, engine="vllm", vllm_url=fake.url)
    await asyncio.wait_for(serve(engine, asyncio.Event(), burst=True), timeout=60)
    for job_id in jobs:
        record = await store.read(job_id)
        assert record.status is Status.DONE, record.error
        assert msgspec.json.decode(record.result or b"", type=Result).page_count >= 1
    for lane in store.keys.lanes:
        assert await store.lane_stats(lane) == (0, 0)
    assert not await store.redis.hexists(store.keys.job(jobs[0]), Field.PAYLOAD)


async def test_a_burst_worker_on_empty_lanes_returns_at_once(
    store: JobStore, settings: Settings, fake: FakeVllm
) -> None:
    engine = replace_settings(settings, engine="vllm", vllm_url=fake.url)
    await asyncio.wait_for(serve(engine, asyncio.Event(), burst=True), timeout=20)
