"""What a job keeps besides its result: finished pages as they come, and its files."""

from __future__ import annotations

import asyncio

import msgspec

from ocrq.shared.record import JobEvent
from ocrq.shared.store import JobStore, Outcome

LANE = "interactive"


async def claimed(store: JobStore, me: str = "w1") -> tuple[str, str]:
    fields = {"status": "queued", "tenant": "t", "payload": b"%PDF-1.7 raw", "lane": LANE}
    await store.enqueue("job1", LANE, fields, None)
    reply = await store.redis.xreadgroup("workers", me, {store.keys.stream(LANE): ">"}, count=1)
    entry = reply[0][1][0][0].decode()
    assert await store.claim("job1", LANE, entry, me) == "ok"
    return "job1", entry


def done() -> Outcome:
    return Outcome.done(msgspec.json.encode({"markdown": "x"}), 2)


async def test_finished_pages_are_readable_while_the_job_runs(store: JobStore) -> None:
    job_id, _ = await claimed(store)
    assert await store.progress(job_id, "w1", 1, 3, {1: b'{"number":1}'})
    assert await store.read_pages(job_id, [1, 2]) == [b'{"number":1}', None]
    assert await store.redis.ttl(store.keys.job_pages(job_id)) > 0


async def test_progress_publishes_the_numbers_of_the_pages_just_finished(store: JobStore) -> None:
    job_id, _ = await claimed(store)
    async with store.redis.pubsub() as pubsub:
        await pubsub.subscribe(store.keys.events)
        await pubsub.get_message(timeout=1)  # the subscribe confirmation
        await store.progress(job_id, "w1", 2, 3, {2: b"{}", 3: b"{}"})
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=2)
    assert message is not None
    event = msgspec.json.decode(message["data"], type=JobEvent)
    assert (event.id, event.pages_done, event.pages) == (job_id, 2, [2, 3])


async def test_a_worker_that_lost_the_job_keeps_no_pages_and_no_files(store: JobStore) -> None:
    job_id, _ = await claimed(store)
    assert not await store.progress(job_id, "w2", 1, 3, {1: b"{}"})
    assert not await store.save_files(job_id, "w2", {"images/p1-1.png": b"png"})
    assert await store.read_pages(job_id, [1]) == [None]
    assert await store.read_file(job_id, "images/p1-1.png") is None


async def test_files_live_as_long_as_the_result(store: JobStore) -> None:
    job_id, entry = await claimed(store)
    assert await store.save_files(
        job_id, "w1", {"images/p1-1.png": b"png", "searchable.pdf": b"%PDF"}
    )
    await store.progress(job_id, "w1", 1, 1, {1: b"{}"})
    assert await store.finish(job_id, LANE, entry, "w1", done())
    assert await store.read_file(job_id, "searchable.pdf") == b"%PDF"
    ttl = store.settings.api.result_ttl_s
    for key in (store.keys.job_files(job_id), store.keys.job_pages(job_id)):
        assert 0 < await store.redis.ttl(key) <= ttl


async def test_deleting_a_job_deletes_its_pages_and_files(store: JobStore) -> None:
    job_id, entry = await claimed(store)
    await store.save_files(job_id, "w1", {"images/p1-1.png": b"png"})
    await store.progress(job_id, "w1", 1, 1, {1: b"{}"})
    await store.finish(job_id, LANE, entry, "w1", done())
    assert await store.cancel(job_id, "t", delete=True) == "deleted"
    assert not await store.redis.exists(store.keys.job_files(job_id), store.keys.job_pages(job_id))


async def test_an_empty_file_set_writes_nothing(store: JobStore) -> None:
    job_id, _ = await claimed(store)
    assert await store.save_files(job_id, "w1", {})
    await asyncio.sleep(0)
    assert not await store.redis.exists(store.keys.job_files(job_id))
