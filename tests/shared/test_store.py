"""The Lua transitions: each checks the current state, so no update is ever lost."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import replace_settings
from ocrq.shared.store import JobStore, Outcome

LANE = "interactive"


async def enqueue(store: JobStore, job_id: str = "job1", idem: str | None = None) -> bool:
    fields = {"status": "queued", "tenant": "t", "payload": b"%PDF-1.7 raw", "lane": LANE}
    created, _ = await store.enqueue(job_id, LANE, fields, idem)
    return created


async def deliver(store: JobStore, me: str) -> list[tuple[str, str]]:
    """XREADGROUP everything new for consumer ``me``: [(job_id, entry)]."""
    reply = await store.redis.xreadgroup("workers", me, {store.keys.stream(LANE): ">"}, count=10)
    return [(f[b"id"].decode(), e.decode()) for _, entries in reply for e, f in entries]


async def field(store: JobStore, job_id: str, name: str) -> Any:
    return await store.redis.hget(store.keys.job(job_id), name)


async def pending(store: JobStore) -> int:
    return int((await store.redis.xpending(store.keys.stream(LANE), "workers"))["pending"])


def done() -> Outcome:
    return Outcome.done(msgspec.json.encode({"markdown": "x"}), 1)


@pytest.mark.smoke
async def test_claim_then_finish_writes_the_result_drops_the_payload_and_acks(
    store: JobStore,
) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    assert await store.claim(job_id, LANE, entry, "w1") == "ok"
    assert await field(store, job_id, "status") == b"processing"
    assert await store.finish(job_id, LANE, entry, "w1", done())
    assert await field(store, job_id, "status") == b"done"
    assert await field(store, job_id, "payload") is None
    assert await pending(store) == 0
    assert await store.redis.xlen(store.keys.stream(LANE)) == 0  # XDEL after the ACK


async def test_a_cancelled_job_is_skipped_and_acked(store: JobStore) -> None:
    await enqueue(store)
    assert await store.cancel("job1", "t") == "cancelled"
    [(job_id, entry)] = await deliver(store, "w1")
    assert await store.claim(job_id, LANE, entry, "w1") == "skip:cancelled"
    assert await pending(store) == 0


async def test_cancel_racing_a_finishing_worker_keeps_the_cancel(store: JobStore) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    assert await store.cancel(job_id, "t") == "cancelled"
    assert not await store.finish(job_id, LANE, entry, "w1", done())
    assert await field(store, job_id, "status") == b"cancelled"
    assert await pending(store) == 0  # the worker still let go of its entry


async def test_progress_is_refused_once_the_job_is_no_longer_ours(store: JobStore) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    assert await store.progress(job_id, "w1", 1, 3)
    assert not await store.progress(job_id, "w2", 2, 3)
    await store.cancel(job_id, "t")
    assert not await store.progress(job_id, "w1", 2, 3)


async def test_after_a_reclaim_only_the_new_owner_can_finish(store: JobStore) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    await store.redis.xclaim(store.keys.stream(LANE), "workers", "w2", 0, [entry])
    assert await store.claim(job_id, LANE, entry, "w2") == "ok"  # processing → taken over
    assert await field(store, job_id, "attempts") == b"2"
    assert not await store.finish(job_id, LANE, entry, "w1", done())
    assert await pending(store) == 1  # w1 did not ACK w2's entry
    assert await store.finish(job_id, LANE, entry, "w2", done())
    assert await pending(store) == 0


async def test_a_duplicated_stream_entry_is_dropped_while_the_job_runs(store: JobStore) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    await store.redis.xadd(store.keys.stream(LANE), {"id": job_id})  # a retried XADD
    [(dup_id, dup_entry)] = await deliver(store, "w2")
    assert await store.claim(dup_id, LANE, dup_entry, "w2") == "skip:duplicate"
    assert await field(store, job_id, "worker") == b"w1"
    assert await store.finish(job_id, LANE, entry, "w1", done())


async def test_touch_resets_idle_time_only_for_the_owner(store: JobStore) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    assert await store.touch(job_id, LANE, entry, "w1")
    assert not await store.touch(job_id, LANE, entry, "w2")


async def test_poison_fails_the_job_and_copies_it_to_the_dead_stream(store: JobStore) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    assert await store.poison(job_id, LANE, entry, "w1", 4)
    error = msgspec.json.decode(await field(store, job_id, "error"))
    assert error["code"] == "poisoned" and await field(store, job_id, "status") == b"failed"
    [(_, dead)] = await store.redis.xrange(store.keys.dead("p0"))
    assert dead[b"id"] == job_id.encode() and dead[b"deliveries"] == b"4"
    assert await pending(store) == 0


async def test_idempotent_enqueue_returns_the_first_job_until_it_is_deleted(
    store: JobStore,
) -> None:
    idem = "k"  # the client's Idempotency-Key
    assert await enqueue(store, "a", idem)
    assert not await enqueue(store, "b", idem)
    assert await store.redis.exists(store.keys.job("b")) == 0
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    await store.finish(job_id, LANE, entry, "w1", done())
    assert await store.cancel("a", "t", delete=True) == "deleted"
    assert await enqueue(store, "c", idem)  # the key no longer names a live job


async def test_the_backlog_limit_refuses_with_queue_full(store: JobStore) -> None:
    store.settings = replace_settings(store.settings, max_backlog=1)
    await enqueue(store, "a")
    with pytest.raises(OcrqError) as err:
        await enqueue(store, "b")
    assert err.value.code is ErrorCode.QUEUE_FULL and err.value.retry_after
    assert await store.redis.exists(store.keys.job("b")) == 0


async def test_enqueue_recreates_a_lost_group_at_id_0(store: JobStore) -> None:
    await store.redis.flushdb()
    await enqueue(store)
    groups = await store.redis.xinfo_groups(store.keys.stream(LANE))
    assert groups[0]["name"] == b"workers" and groups[0]["lag"] == 1


async def test_release_hands_an_unfinished_job_back_for_an_immediate_reclaim(
    store: JobStore,
) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    assert not await store.release(job_id, LANE, entry, "w2")  # not w2's to give
    assert await store.release(job_id, LANE, entry, "w1")
    assert await field(store, job_id, "status") == b"queued"
    visibility = store.settings.worker.visibility_timeout_ms
    reply = await store.redis.xautoclaim(store.keys.stream(LANE), "workers", "w2", visibility)
    assert [e for e, _ in reply[1]] == [entry.encode()]
    [info] = await store.redis.xpending_range(store.keys.stream(LANE), "workers", entry, entry, 1)
    assert info["times_delivered"] == 1  # a drain does not use up one of the job's deliveries
    assert await store.claim(job_id, LANE, entry, "w2") == "ok"


async def test_poisoning_a_finished_job_only_acks_it(store: JobStore) -> None:
    await enqueue(store)
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    await store.redis.hset(store.keys.job(job_id), "status", "done")
    assert await store.poison(job_id, LANE, entry, "w1", 9)
    assert await field(store, job_id, "status") == b"done"
    assert await store.redis.xlen(store.keys.dead("p0")) == 0 and await pending(store) == 0


async def test_an_active_job_never_expires_and_an_ended_one_keeps_its_result_ttl(
    store: JobStore,
) -> None:
    await enqueue(store)
    assert await store.redis.ttl(store.keys.job("job1")) == -1  # queued: lives with its entry
    [(job_id, entry)] = await deliver(store, "w1")
    await store.claim(job_id, LANE, entry, "w1")
    assert await store.redis.ttl(store.keys.job(job_id)) == -1  # processing: the same
    await store.finish(job_id, LANE, entry, "w1", done())
    assert await store.redis.ttl(store.keys.job(job_id)) > 24 * 3600
