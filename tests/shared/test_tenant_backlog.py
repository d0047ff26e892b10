"""The per-tenant backlog: jobs waiting or running per tenant, released by the ending script."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import with_tag
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore, Outcome


def fields(tenant: str, lane: str) -> dict[str, Any]:
    return {"status": "queued", "tenant": tenant, "payload": b"%PDF-1.7 raw", "lane": lane}


async def enqueue(
    store: JobStore, job_id: str, tenant: str = "acme", lane: str = "interactive"
) -> str:
    created, _ = await store.enqueue(job_id, lane, fields(tenant, lane), None)
    assert created
    return job_id


async def refused(store: JobStore, job_id: str, tenant: str = "acme") -> OcrqError:
    """Enqueue a job that must be refused; the error, once checked that nothing was written."""
    with pytest.raises(OcrqError) as err:
        await store.enqueue(job_id, "interactive", fields(tenant, "interactive"), None)
    assert await store.redis.exists(store.keys.job(job_id)) == 0
    return err.value


async def take(store: JobStore, me: str, lane: str = "interactive") -> tuple[str, str]:
    """XREADGROUP the lane's next entry for ``me`` and claim its job: (job id, entry)."""
    reply = await store.redis.xreadgroup("workers", me, {store.keys.stream(lane): ">"}, count=1)
    entry, values = reply[0][1][0]
    job_id = values[b"id"].decode()
    assert await store.claim(job_id, lane, entry.decode(), me) == "ok"
    return job_id, entry.decode()


@pytest.fixture
def quota(store: JobStore) -> JobStore:
    """The store with a backlog of 2 jobs per tenant."""
    store.settings = replace_settings(store.settings, max_tenant_backlog=2)
    return store


async def test_a_tenant_at_its_backlog_is_refused_with_quota_exceeded_naming_the_limit(
    quota: JobStore,
) -> None:
    await enqueue(quota, "a")
    await enqueue(quota, "b", lane="batch")  # both lanes count towards one backlog
    err = await refused(quota, "c")
    assert err.code is ErrorCode.QUOTA_EXCEEDED and err.http_status == 429
    assert err.retry_after and err.retry_after > 0
    assert "acme" in err.message and "OCRQ_MAX_TENANT_BACKLOG=2" in err.message


async def test_another_tenant_still_enqueues_while_one_is_at_its_backlog(
    quota: JobStore,
) -> None:
    await enqueue(quota, "a")
    await enqueue(quota, "b")
    await refused(quota, "c")
    await enqueue(quota, "d", tenant="globex")
    await enqueue(quota, "e", tenant="globex")


async def test_finishing_a_job_done_or_failed_gives_its_tenant_room_back(
    quota: JobStore,
) -> None:
    await enqueue(quota, "a")
    await enqueue(quota, "b")
    job_id, entry = await take(quota, "w1")
    assert await quota.finish(job_id, "interactive", entry, "w1", Outcome.done(b"{}", 1))
    await enqueue(quota, "c")
    await refused(quota, "d")
    job_id, entry = await take(quota, "w1")
    failed = Outcome.failed(OcrqError(ErrorCode.ENCRYPTED_DOCUMENT, "locked"))
    assert await quota.finish(job_id, "interactive", entry, "w1", failed)
    await enqueue(quota, "d")


async def test_cancelling_or_deleting_a_job_gives_its_tenant_room_back(quota: JobStore) -> None:
    await enqueue(quota, "a")
    await enqueue(quota, "b")
    assert await quota.cancel("a", "acme") == "cancelled"
    await enqueue(quota, "c")
    await refused(quota, "d")
    assert await quota.cancel("b", "acme", delete=True) == "deleted"  # queued: cancelled first
    await enqueue(quota, "d")
    await refused(quota, "e")
    assert await quota.cancel("a", "acme", delete=True) == "deleted"  # had ended: no change
    await refused(quota, "e")


async def test_poisoning_a_job_gives_its_tenant_room_back(quota: JobStore) -> None:
    await enqueue(quota, "a")
    await enqueue(quota, "b")
    job_id, entry = await take(quota, "w1")
    assert await quota.poison(job_id, "interactive", entry, "w1", 4)
    await enqueue(quota, "c")


async def test_a_reclaimed_or_released_job_stays_counted_once(quota: JobStore) -> None:
    await enqueue(quota, "a")
    job_id, entry = await take(quota, "w1")
    stream = quota.keys.stream("interactive")
    await quota.redis.xclaim(stream, "workers", "w2", 0, [entry])
    assert await quota.claim(job_id, "interactive", entry, "w2") == "ok"  # a reclaim
    assert await quota.release(job_id, "interactive", entry, "w2")  # a drain hands it back
    assert await quota.claim(job_id, "interactive", entry, "w2") == "ok"
    await enqueue(quota, "b")
    await refused(quota, "c")
    assert await quota.finish(job_id, "interactive", entry, "w2", Outcome.done(b"{}", 1))
    await enqueue(quota, "c")


async def test_a_job_gone_or_ended_behind_the_scripts_back_stops_counting(
    quota: JobStore,
) -> None:
    await enqueue(quota, "a")
    await enqueue(quota, "b")
    await refused(quota, "c")
    await quota.redis.delete(quota.keys.job("a"))  # vanished (an operator, an eviction)
    await enqueue(quota, "c")
    await refused(quota, "d")
    await quota.redis.hset(quota.keys.job("b"), "status", "done")  # ended, set by hand
    await enqueue(quota, "d")
    await refused(quota, "e")


async def test_a_replayed_idempotency_key_gets_its_job_back_at_the_backlog(
    quota: JobStore,
) -> None:
    created, first = await quota.enqueue("a", "interactive", fields("acme", "interactive"), "k")
    await enqueue(quota, "b")
    replayed = await quota.enqueue("c", "interactive", fields("acme", "interactive"), "k")
    assert created and replayed == (False, first)  # a lost 202's retry is not refused


async def test_a_backlog_of_zero_means_no_limit(store: JobStore) -> None:
    store.settings = replace_settings(store.settings, max_tenant_backlog=0)
    for n in range(5):
        await enqueue(store, f"j{n}")


@pytest.fixture
async def partitioned(aredis: aioredis.Redis, settings: Settings) -> JobStore:
    """A store over 3 partitions with a backlog of 4 jobs per tenant."""
    three = replace_settings(settings, partitions=3, max_tenant_backlog=4)
    store = JobStore(aredis, three)
    await store.ensure_groups()
    return store


async def test_the_backlog_counts_the_tenant_over_every_partition(
    partitioned: JobStore,
) -> None:
    first, second, third = partitioned.keys.tags
    # A batch's jobs all live in its partition: they may use the tenant's whole backlog.
    for n in range(4):
        await enqueue(partitioned, with_tag(f"a{n}", first), lane="batch")
    for tag in (first, second, third):
        err = await refused(partitioned, with_tag("over", tag))
        assert err.code is ErrorCode.QUOTA_EXCEEDED
    await enqueue(partitioned, with_tag("b0", second), tenant="globex")
    assert await partitioned.cancel(with_tag("a0", first), "acme") == "cancelled"
    await enqueue(partitioned, with_tag("c0", third))
