"""The enqueue as one MULTI/EXEC: the fields go to an incoming hash, enqueue.lua admits them
or deletes them; nothing of a refused upload stays, and Redis losing its scripts is mended."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import replace_settings
from ocrq.shared.store import JobStore


def fields(tenant: str = "acme") -> dict[str, Any]:
    return {"status": "queued", "tenant": tenant, "payload": b"%PDF-1.7 raw", "lane": "interactive"}


async def incoming_keys(store: JobStore) -> list[bytes]:
    return [key async for key in store.redis.scan_iter(match=f"{store.keys.prefix}*incoming:*")]


async def test_an_admitted_job_is_renamed_whole_and_keeps_no_expiry(store: JobStore) -> None:
    created, job_id = await store.enqueue("job-a", "interactive", fields(), None)
    assert created and job_id == "job-a"
    job = store.keys.job("job-a")
    assert await store.redis.hget(job, "payload") == b"%PDF-1.7 raw"
    assert await store.redis.ttl(job) == -1  # the incoming hash's guard did not follow it
    assert await store.redis.xlen(store.keys.stream("interactive")) == 1
    assert await incoming_keys(store) == []


async def test_a_full_lane_refuses_with_503_and_leaves_nothing_behind(store: JobStore) -> None:
    store.settings = replace_settings(store.settings, max_backlog=1)
    await store.enqueue("job-a", "interactive", fields(), None)
    with pytest.raises(OcrqError) as err:
        await store.enqueue("job-b", "interactive", fields(), None)
    assert err.value.code is ErrorCode.QUEUE_FULL and err.value.http_status == 503
    assert await store.redis.exists(store.keys.job("job-b")) == 0
    assert await store.redis.xlen(store.keys.stream("interactive")) == 1
    assert await incoming_keys(store) == []


async def test_an_idempotent_replay_returns_the_first_job_and_writes_nothing(
    store: JobStore,
) -> None:
    assert await store.enqueue("job-a", "interactive", fields(), "key-1") == (True, "job-a")
    assert await store.enqueue("job-b", "interactive", fields(), "key-1") == (False, "job-a")
    assert await store.redis.exists(store.keys.job("job-b")) == 0
    assert await incoming_keys(store) == []


async def test_concurrent_uploads_with_one_key_make_one_job(store: JobStore) -> None:
    replies = await asyncio.gather(
        *(store.enqueue(f"job-{i}", "interactive", fields(), "key-1") for i in range(8))
    )
    winners = {job_id for _, job_id in replies}
    assert len(winners) == 1 and sum(created for created, _ in replies) == 1
    assert await store.redis.xlen(store.keys.stream("interactive")) == 1
    assert await incoming_keys(store) == []


async def test_a_client_id_that_exists_is_a_409_and_the_job_is_untouched(store: JobStore) -> None:
    await store.enqueue("job-a", "interactive", fields(), None)
    with pytest.raises(OcrqError) as err:
        await store.enqueue("job-a", "interactive", fields("globex"), None, given_id=True)
    assert err.value.code is ErrorCode.CONFLICT
    assert await store.redis.hget(store.keys.job("job-a"), "tenant") == b"acme"
    assert await incoming_keys(store) == []


async def test_an_upload_after_redis_lost_its_scripts_is_queued_once(store: JobStore) -> None:
    await store.redis.script_flush()
    assert await store.enqueue("job-a", "interactive", fields(), None) == (True, "job-a")
    assert await store.redis.xlen(store.keys.stream("interactive")) == 1
    assert await store.redis.ttl(store.keys.job("job-a")) == -1
    assert await incoming_keys(store) == []
