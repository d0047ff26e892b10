"""Redis at maxmemory (noeviction): uploads get 503, and every job in flight still finishes."""

from __future__ import annotations

import os
import secrets
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from ocrq.producer.app import create_app
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import Field, new_job_fields
from ocrq.shared.schemas import JobOptions
from ocrq.shared.settings import Settings
from ocrq.shared.store import JobStore, Outcome, now_ms

ME = "w-oom"
PAYLOAD = 256 * 1024


async def enqueue(store: JobStore) -> str:
    job_id = secrets.token_urlsafe(16)
    fields = new_job_fields(
        job_id=job_id, tenant="public", filename=None, media_type="application/pdf",
        data=os.urandom(PAYLOAD), options=JobOptions(), created_ms=now_ms(),
    )  # fmt: skip
    assert (await store.enqueue(job_id, "interactive", fields, None))[0]
    return job_id


async def take(store: JobStore) -> tuple[str, str]:
    reply = await store.redis.xreadgroup(
        "workers", ME, {store.keys.stream("interactive"): ">"}, count=1
    )
    entry, fields = reply[0][1][0]
    return fields[b"id"].decode(), entry.decode()


async def fill_up(store: JobStore) -> None:
    """Set maxmemory just under what Redis already uses: every growing write is refused."""
    used, _ = await store.memory()
    await store.redis.config_set("maxmemory", used - 64 * 1024)
    with pytest.raises(OcrqError) as caught:
        await enqueue(store)
    assert caught.value.code is ErrorCode.UNAVAILABLE and caught.value.retry_after


async def test_at_maxmemory_claim_progress_and_finish_still_work(own_store: JobStore) -> None:
    jobs = [await enqueue(own_store) for _ in range(3)]
    await fill_up(own_store)
    job_id, entry = await take(own_store)
    assert job_id == jobs[0]
    assert await own_store.claim(job_id, "interactive", entry, ME) == "ok"
    assert await own_store.progress(job_id, ME, 1, 1)
    result = msgspec.json.encode({"markdown": "x" * 1000})
    assert await own_store.finish(job_id, "interactive", entry, ME, Outcome.done(result, 1))
    record = await own_store.read(job_id, (Field.STATUS, Field.PAYLOAD))
    assert record.status == "done" and record.payload is None


async def test_at_maxmemory_poison_and_cancel_still_work(own_store: JobStore) -> None:
    poisoned, cancelled = await enqueue(own_store), await enqueue(own_store)
    await fill_up(own_store)
    job_id, entry = await take(own_store)
    assert await own_store.poison(job_id, "interactive", entry, ME, deliveries=4)
    assert (await own_store.read(poisoned)).error.code == "poisoned"  # type: ignore[union-attr]
    assert await own_store.cancel(cancelled, "public") == "cancelled"
    assert (await own_store.read(cancelled, (Field.PAYLOAD,))).payload is None


async def test_a_full_redis_answers_uploads_with_503_and_retry_after(
    own_store: JobStore, own_settings: Settings
) -> None:
    await enqueue(own_store)
    await fill_up(own_store)
    with TestClient(create_app(own_settings), base_url="http://127.0.0.1:8000") as api:
        r = api.post("/v1/jobs", content=b"%PDF-1.4\n" + os.urandom(PAYLOAD))
        assert r.status_code == 503 and r.json()["code"] == "unavailable"
        assert int(r.headers["retry-after"]) > 0 and "full" in r.json()["message"]
        metrics: Any = api.get("/metrics").text
    gauges = dict(
        line.split(" ") for line in metrics.splitlines() if line.startswith("ocrq_redis_memory")
    )
    used, limit = await own_store.memory()
    assert float(gauges["ocrq_redis_memory_max_bytes"]) == limit > 0
    # At the limit, give or take the client buffers Redis frees in its cron (every 100 ms):
    # a 256 kB upload's query buffer may still count when the limit is set, and not later.
    assert float(gauges["ocrq_redis_memory_used_bytes"]) > limit - 2 * PAYLOAD
    assert abs(float(gauges["ocrq_redis_memory_used_bytes"]) - used) < 2 * PAYLOAD
