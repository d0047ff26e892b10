"""Fair share within a lane: tickets in the stream, one queue per tenant (shared/fair.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from ocrq.shared.keys import with_tag
from ocrq.shared.lanes import LaneEntry
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore, Outcome

# Also run on a Redis Cluster and behind Sentinel by CI (OCRQ_TEST_TOPOLOGY).
pytestmark = pytest.mark.topology
LANE = "interactive"


def fields(tenant: str) -> dict[str, Any]:
    return {"status": "queued", "tenant": tenant, "payload": b"%PDF-1.7 raw", "lane": LANE}


async def store_with(aredis: aioredis.Redis, settings: Settings, **changes: Any) -> JobStore:
    made = JobStore(aredis, replace_settings(settings, **changes))
    await made.ensure_groups()
    return made


def tag(store: JobStore) -> str:
    """The partition these tests queue in (the first: on a cluster, one master's slots)."""
    return store.keys.tags[0]


async def enqueue(store: JobStore, tenant: str, count: int, start: int = 0) -> list[str]:
    ids = [
        with_tag(f"{tenant}{i:04d}".ljust(22, "x"), tag(store)) for i in range(start, start + count)
    ]
    for job_id in ids:
        assert (await store.enqueue(job_id, LANE, fields(tenant), None))[0]
    return ids


async def read(store: JobStore, me: str = "w1") -> LaneEntry:
    (entry,) = await store.lanes.read_new(store.keys.stream(LANE, tag(store)), me, 1)
    return entry


def tenant_of(entry: LaneEntry) -> str:
    """The tenant a test job belongs to: its id, past the partition tag, starts with it."""
    return entry.job_id.rpartition(".")[2][0]


async def take(store: JobStore, me: str = "w1") -> LaneEntry:
    """The next ticket and the job it runs, claimed."""
    given = await store.fair.take(await read(store, me), me)
    assert given is not None and not given.ticket
    assert await store.claim(given.job_id, LANE, given.entry_id, me) == "ok"
    return given


async def finish(store: JobStore, entry: LaneEntry, pages: int = 1, me: str = "w1") -> None:
    outcome = Outcome.done(msgspec.json.encode({"pages": pages}), pages)
    assert await store.finish(entry.job_id, LANE, entry.entry_id, me, outcome)


async def test_one_job_of_a_second_tenant_runs_next_not_behind_the_first_tenants_backlog(
    store: JobStore,
) -> None:
    await enqueue(store, "a", 50)
    (lone,) = await enqueue(store, "b", 1)
    first, second = await take(store), await take(store)
    assert lone in (first.job_id, second.job_id)


async def test_with_fair_share_off_the_lane_is_first_come_first_served(
    aredis: aioredis.Redis, settings: Settings
) -> None:
    fifo = await store_with(aredis, settings, fair_share=False)
    backlog = await enqueue(fifo, "a", 5)
    await enqueue(fifo, "b", 1)
    taken = [(await take(fifo)).job_id for _ in range(5)]
    assert taken == backlog
    assert not (await read(fifo)).ticket  # entries name their job, as before


async def test_tenants_share_a_lane_by_their_weights(
    aredis: aioredis.Redis, settings: Settings
) -> None:
    weighted = await store_with(aredis, settings, quotas="heavy:weight=3")
    await enqueue(weighted, "heavy", 60)
    await enqueue(weighted, "light", 60)
    served = Counter()
    for _ in range(40):
        entry = await take(weighted)
        served[entry.job_id.rpartition(".")[2][:5]] += 1
        await finish(weighted, entry)
    assert served["heavy"] == 30 and served["light"] == 10


async def test_a_tenants_long_jobs_are_charged_their_pages_when_they_end(store: JobStore) -> None:
    await enqueue(store, "a", 10)
    await enqueue(store, "b", 10)
    first = await take(store)
    await finish(store, first, pages=6)  # its tenant owes 5 more pages than one-page jobs
    others = [await take(store) for _ in range(8)]
    tenants = [tenant_of(entry) for entry in others]
    other = "b" if tenant_of(first) == "a" else "a"
    # Six pages each before turns resume: the other tenant's six one-page jobs come first.
    assert tenants[:6] == [other] * 6
    assert set(tenants[6:]) == {"a", "b"}


async def test_a_reclaimed_ticket_runs_the_job_it_was_given_and_counts_its_deliveries(
    store: JobStore,
) -> None:
    await enqueue(store, "a", 2)
    await enqueue(store, "b", 2)
    given = await take(store, "w1")
    stream = store.keys.stream(LANE, tag(store))
    _, found = await store.lanes.reclaim(stream, "w2", 0, "0-0", 10)
    again = await store.fair.take(await store.lanes.with_delivery_count(found[0]), "w2")
    assert again is not None and again.job_id == given.job_id and again.deliveries == 2
    assert await store.claim(again.job_id, LANE, again.entry_id, "w2") == "ok"
    await finish(store, again, me="w2")
    assert await store.redis.hlen(store.keys.fair_taken(LANE, tag(store))) == 0


async def test_a_job_cancelled_while_it_waits_is_skipped_and_no_ticket_is_left_behind(
    store: JobStore,
) -> None:
    gone, kept = await enqueue(store, "a", 2)
    assert await store.cancel(gone, "a") == "cancelled"
    entry = await take(store)
    assert entry.job_id == kept
    await finish(store, entry)
    spare = await store.fair.take(await read(store), "w1")
    assert spare is None  # no job waits for it: acked and deleted
    assert await store.redis.xlen(store.keys.stream(LANE, tag(store))) == 0


async def test_the_stream_holds_one_entry_per_waiting_job_for_the_lag_keda_reads(
    store: JobStore,
) -> None:
    await enqueue(store, "a", 7)
    await enqueue(store, "b", 3)
    assert (await store.lane_stats(LANE)) == (10, 0)  # lag, pending
    entry = await take(store)
    assert (await store.lane_stats(LANE)) == (9, 1)
    await finish(store, entry)
    assert (await store.lane_stats(LANE)) == (9, 0)


async def test_a_ticket_that_outlived_its_deliveries_before_it_had_a_job_does_not_poison_one(
    store: JobStore,
) -> None:
    (job_id,) = await enqueue(store, "a", 1)
    stream = store.keys.stream(LANE, tag(store))
    await read(store)
    for me in ("w2", "w3", "w4", "w5"):  # reclaimed again and again before any take
        _, found = await store.lanes.reclaim(stream, me, 0, "0-0", 10)
    ticket = await store.lanes.with_delivery_count(found[0])
    assert ticket.deliveries == 5
    given = await store.fair.take(ticket, "w5")
    assert given is not None and given.job_id == job_id and given.deliveries == 1


@pytest.mark.parametrize("partitions", [3])
async def test_each_partition_keeps_its_own_tenants_queues(
    aredis: aioredis.Redis, settings: Settings, partitions: int
) -> None:
    parted = await store_with(aredis, settings, partitions=partitions)
    await parted.ensure_groups()
    for tag in parted.keys.tags:
        job_id = with_tag("j" * 22, tag)
        assert (await parted.enqueue(job_id, LANE, fields("a"), None))[0]
    for tag in parted.keys.tags:
        stream = parted.keys.stream(LANE, tag)
        (entry,) = await parted.lanes.read_new(stream, "w1", 1)
        given = await parted.fair.take(entry, "w1")
        assert given is not None and given.job_id == with_tag("j" * 22, tag)
