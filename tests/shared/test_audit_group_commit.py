"""Audit appends are group-committed: concurrent entries share round trips, each gets its own
id, and a failed write fails every entry it carried without wedging the next ones."""

from __future__ import annotations

import asyncio

from redis.exceptions import ResponseError

from ocrq.shared.audit_store import AuditEntry, AuditTrail
from ocrq.shared.store import JobStore


def entry(n: int) -> AuditEntry:
    return AuditEntry(action="job.submit", tenant="acme", job_id=f"job-{n}", status=202)


async def test_concurrent_appends_each_get_their_own_entry(store: JobStore) -> None:
    trail = AuditTrail(store, retention_days=90)
    ids = await asyncio.gather(*(trail.append(entry(n)) for n in range(20)))
    assert len(set(ids)) == 20
    stored = await store.redis.xrange(store.keys.audit())
    assert {entry_id.decode() for entry_id, _ in stored} == set(ids)
    assert {fields[b"job_id"] for _, fields in stored} == {f"job-{n}".encode() for n in range(20)}


async def test_a_failed_write_fails_each_entry_and_the_next_ones_are_written(
    store: JobStore,
) -> None:
    trail = AuditTrail(store, retention_days=90)
    await store.redis.set(store.keys.audit(), "not a stream")
    results = await asyncio.gather(
        *(trail.append(entry(n)) for n in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, ResponseError) for r in results)
    await store.redis.delete(store.keys.audit())
    assert await trail.append(entry(99))
    assert await store.redis.xlen(store.keys.audit()) == 1


async def test_a_cancelled_writer_leaves_no_entry_waiting_for_ever(store: JobStore) -> None:
    trail = AuditTrail(store, retention_days=90)
    first = asyncio.ensure_future(trail.append(entry(1)))
    await asyncio.sleep(0)  # the first append is now the writer, its round trip in flight
    second = asyncio.ensure_future(trail.append(entry(2)))
    first.cancel()
    done = await asyncio.wait_for(asyncio.gather(second, return_exceptions=True), timeout=5)
    assert isinstance(done[0], (str, RuntimeError))  # answered, written or not
    assert await trail.append(entry(3))  # a later append writes again
