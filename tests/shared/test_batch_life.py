"""A batch lives from the moment it opens: one whose producer died before sealing it is sealed
by the sweeper after its deadline, its jobs run on and its webhook fires."""

from __future__ import annotations

import redis.asyncio as aioredis

from ocrq.producer.jobs.views import new_job_id
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.errors import ErrorCode
from ocrq.shared.keys import is_known_id, tag_of
from ocrq.shared.record import new_job_fields
from ocrq.shared.schemas import JobOptions
from ocrq.shared.store import JobStore, now_ms

TENANT = "acme"
OPTIONS = JobOptions(lane="batch", callback_url="https://hooks.example.com/ocrq")


async def open_batch_with_jobs(batches: BatchStore, jobs: int) -> tuple[str, list[str]]:
    """Open a batch and enqueue jobs in it as POST /v1/batches does, then never seal it (the
    producer died part way through the request)."""
    created, batch_id = await batches.open(new_job_id(), TENANT, OPTIONS, None)
    assert created
    ids = []
    for i in range(jobs):
        job_id = new_job_id(tag_of(batch_id))
        fields = new_job_fields(
            job_id=job_id, tenant=TENANT, filename=f"{i}.pdf", media_type="application/pdf",
            data=b"%PDF-1.4\n", options=OPTIONS, created_ms=now_ms(), batch=batch_id,
        )  # fmt: skip
        await batches.jobs.enqueue(job_id, "batch", fields, None, batch=batch_id)
        ids.append(job_id)
    return batch_id, ids


def past_the_deadline(batches: BatchStore) -> int:
    """A clock a second past the open deadline of a batch opened now."""
    return now_ms() + int(batches.open_deadline_s * 1000) + 1000


async def test_an_open_batch_has_a_life_from_the_moment_it_opens(
    store: JobStore, aredis: aioredis.Redis
) -> None:
    batches = BatchStore(store)
    batch_id, _ = await open_batch_with_jobs(batches, 0)
    ttl = await aredis.ttl(store.keys.batch(batch_id))
    assert 0 < ttl <= store.settings.api.result_ttl_s
    assert batches.open_deadline_s > store.settings.api.body_timeout_s  # the request's own deadline


async def test_a_batch_whose_producer_died_is_sealed_after_its_deadline_losing_no_job(
    store: JobStore, aredis: aioredis.Redis
) -> None:
    batches = BatchStore(store)
    batch_id, job_ids = await open_batch_with_jobs(batches, 3)
    assert await batches.sweep() == []  # before its deadline the request may still be running
    assert await batches.sweep(past_the_deadline(batches)) == [batch_id]
    record = await batches.read(batch_id)
    assert record is not None and record.sealed and record.finished_at is None
    assert record.total == 3 and await batches.job_ids(batch_id) == job_ids
    assert [f.code for f in record.rejected] == [ErrorCode.UNAVAILABLE.value]
    assert record.rejected[0].index == 3  # where the request stopped being read
    assert await aredis.xlen(store.keys.stream("batch")) == 3  # every job still runs
    for job_id in job_ids:
        assert await store.status(job_id) == "queued"  # and is pollable
    assert await batches.sweep(past_the_deadline(batches)) == []  # sealed once
    for job_id in job_ids:
        assert await store.cancel(job_id, TENANT) == "cancelled"
    record = await batches.read(batch_id)
    assert record is not None and record.finished_at is not None
    hooks = await aredis.xrange(store.keys.webhooks(tag_of(batch_id)))
    assert [(f[b"kind"], f[b"id"]) for _, f in hooks] == [(b"batch", batch_id.encode())]
    for key in (store.keys.batch(batch_id), store.keys.batch_jobs(batch_id)):
        assert 0 < await aredis.ttl(key) <= store.settings.api.result_ttl_s


async def test_a_sealed_batch_is_left_alone_by_the_sweeper(store: JobStore) -> None:
    batches = BatchStore(store)
    batch_id, _ = await open_batch_with_jobs(batches, 1)
    assert not await batches.seal(batch_id, [])
    assert await batches.sweep(past_the_deadline(batches)) == []
    record = await batches.read(batch_id)
    assert record is not None and record.sealed and record.rejected == []


async def test_a_batch_deleted_before_its_seal_leaves_nothing_to_sweep(
    store: JobStore, aredis: aioredis.Redis
) -> None:
    batches = BatchStore(store)
    batch_id, _ = await open_batch_with_jobs(batches, 0)
    await batches.delete(batch_id)
    assert await batches.sweep(past_the_deadline(batches)) == []
    assert await aredis.exists(store.keys.batch(batch_id)) == 0


async def test_a_seal_by_the_producer_after_the_sweeper_keeps_every_job(
    store: JobStore,
) -> None:
    """A producer slower than the deadline (not dead) seals after the sweeper: no job lost."""
    batches = BatchStore(store)
    batch_id, job_ids = await open_batch_with_jobs(batches, 2)
    assert await batches.sweep(past_the_deadline(batches)) == [batch_id]
    await batches.seal(batch_id, [])
    record = await batches.read(batch_id)
    assert record is not None and record.sealed and record.total == 2
    assert await batches.job_ids(batch_id) == job_ids


def test_only_ids_shaped_like_the_ones_ocrq_makes_are_known_ids() -> None:
    assert is_known_id(new_job_id()) and is_known_id(new_job_id("p3-17"))
    for odd in ["", "x", "nope", f"{new_job_id()}:jobs", "../../etc", "a" * 23, "a\0" * 11,
                f"{'t' * 40}.{new_job_id()}"]:  # fmt: skip
        assert not is_known_id(odd), odd
