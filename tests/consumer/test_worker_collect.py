"""The collector: block for the first entry, then gather for one window or until full."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from ocrq.consumer.delivery import Delivery
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.worker import Worker
from ocrq.shared.store import JobStore


async def add(store: JobStore, job_id: str, lane: str = "interactive") -> None:
    fields = {"status": "queued", "tenant": "t", "lane": lane, "payload": b"x"}
    await store.enqueue(job_id, lane, fields, None)


async def run_for_a_while(d: Delivery) -> None:
    await asyncio.sleep(30)


def worker(store: JobStore, tmp_path: Path, **settings: Any) -> Worker:
    healthy = SimpleNamespace(is_open=False)
    runner: Any = SimpleNamespace(
        me="w-test",
        workspace=tmp_path / "w-test",
        process=run_for_a_while,
        reader=SimpleNamespace(circuit=healthy),
    )
    changed = msgspec.structs.replace(store.settings, **settings)
    return Worker(changed, store, runner, WorkerMetrics())


@pytest.mark.smoke
async def test_a_lone_job_waits_at_most_one_window(store: JobStore, tmp_path: Path) -> None:
    await add(store, "solo")
    started = time.monotonic()
    got = await worker(store, tmp_path).collect_window(16, asyncio.Event())
    elapsed = time.monotonic() - started
    assert [d.job_id for d in got] == ["solo"]
    assert 0.09 <= elapsed < 0.6, elapsed  # one 100 ms window, plus a noisy machine's slack


async def test_jobs_arriving_within_the_window_are_collected_together(
    store: JobStore, tmp_path: Path
) -> None:
    async def trickle() -> None:
        for i in range(3):
            await asyncio.sleep(0.02)
            await add(store, f"late{i}")

    task = asyncio.create_task(trickle())
    await add(store, "first")
    got = await worker(store, tmp_path).collect_window(16, asyncio.Event())
    await task
    assert [d.job_id for d in got] == ["first", "late0", "late1", "late2"]


async def test_a_full_window_dispatches_without_waiting(store: JobStore, tmp_path: Path) -> None:
    for i in range(10):
        await add(store, f"j{i}")
    w = worker(store, tmp_path)
    w.settings = msgspec.structs.replace(store.settings, collect_window_ms=2000)
    started = time.monotonic()
    got = await w.collect_window(4, asyncio.Event())
    assert len(got) == 4 and time.monotonic() - started < 1.0  # far from the 2 s window


async def test_the_interactive_lane_is_read_first(store: JobStore, tmp_path: Path) -> None:
    await add(store, "bulk", lane="batch")
    await add(store, "urgent")
    got = await worker(store, tmp_path).read(1, block_ms=10)
    assert [(d.job_id, d.lane) for d in got] == [("urgent", "interactive")]


async def test_nothing_queued_returns_empty_after_the_block(
    store: JobStore, tmp_path: Path
) -> None:
    w = worker(store, tmp_path)
    w.settings = msgspec.structs.replace(store.settings, redis_block_ms=50)
    assert await w.collect_window(16, asyncio.Event()) == []


async def test_an_entry_that_names_no_job_is_dropped_not_redelivered(
    store: JobStore, tmp_path: Path
) -> None:
    stream = store.keys.stream("interactive")
    await store.redis.xadd(stream, {"something": "else"})
    w = worker(store, tmp_path)
    for d in await w.read(4, block_ms=10):
        await w._dispatch(d)
    assert w.tasks == {}
    assert await store.redis.xlen(stream) == 0
    assert (await store.redis.xpending(stream, "workers"))["pending"] == 0


async def test_a_read_never_returns_more_than_asked(store: JobStore, tmp_path: Path) -> None:
    for i in range(3):
        await add(store, f"i{i}")
        await add(store, f"b{i}", lane="batch")
    w = worker(store, tmp_path)
    assert [d.job_id for d in await w.read(2, block_ms=10)] == ["i0", "i1"]
    assert [d.job_id for d in await w.read(2, block_ms=10)] == ["i2"]
    assert [d.job_id for d in await w.read(2, block_ms=10)] == ["b0", "b1"]


async def test_a_job_already_running_here_is_not_started_twice(
    store: JobStore, tmp_path: Path
) -> None:
    await add(store, "once")
    w = worker(store, tmp_path)
    (d,) = await w.read(1, block_ms=10)
    assert await w._dispatch(d) == 1
    assert await w._dispatch(d) == 0  # the same entry, reclaimed from ourselves
    assert await w._dispatch(msgspec.structs.replace(d, entry="0-1")) == 0  # the same job
    assert len(w.tasks) == 1
    for task in w.tasks:
        task.cancel()


async def test_entries_pending_to_this_worker_are_resumed_with_their_jobs(
    store: JobStore, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        await add(store, name)
    w = worker(store, tmp_path)
    got = await w.read(3, block_ms=10)  # pending to us; then the tasks died with a connection
    await store.redis.xdel(store.keys.stream("interactive"), got[2].entry)
    resumed = await w.resume_own()
    assert [(d.job_id, d.entry) for d in resumed] == [
        ("a", got[0].entry), ("b", got[1].entry), ("", got[2].entry)
    ]  # fmt: skip
    assert all(d.deliveries == 1 for d in resumed)


async def test_reclaim_reaches_stale_entries_behind_many_live_ones(
    store: JobStore, tmp_path: Path
) -> None:
    stream, group = store.keys.stream("interactive"), store.keys.group
    for i in range(60):
        await add(store, f"j{i:02d}")
    entries = await store.redis.xreadgroup(group, "dead", {stream: ">"}, count=60)
    ids = [entry for entry, _ in entries[0][1]]
    await asyncio.sleep(0.3)  # every entry idle past the visibility timeout...
    await store.redis.xclaim(stream, group, "alive", 0, ids[:55], justid=True)  # ...but these
    w = worker(store, tmp_path, visibility_timeout_ms=200)
    found: list[str] = []
    for _ in range(10):  # XAUTOCLAIM looks at 10 x COUNT entries per call: 6 calls get there
        found += [d.job_id for d in await w.reclaim(1)]
        if found:
            break
    assert found == ["j55"]


async def test_consumers_that_own_nothing_and_went_quiet_are_pruned(
    store: JobStore, tmp_path: Path
) -> None:
    stream, group = store.keys.stream("interactive"), store.keys.group
    await add(store, "kept")
    await add(store, "done")
    await store.redis.xreadgroup(group, "busy", {stream: ">"}, count=1)  # owns one entry
    reply = await store.redis.xreadgroup(group, "gone", {stream: ">"}, count=1)
    await store.redis.xack(stream, group, reply[0][1][0][0])  # finished it: owns nothing
    await asyncio.sleep(0.05)
    assert await store.prune_consumers("interactive", "w-test", min_idle_s=0.01) == 1
    names = {c["name"] for c in await store.redis.xinfo_consumers(stream, group)}
    assert names == {b"busy"}


async def test_a_steady_interactive_stream_still_lets_batch_in_by_its_share(
    store: JobStore, tmp_path: Path
) -> None:
    for i in range(4):
        await add(store, f"i{i}")
        await add(store, f"b{i}", lane="batch")
    w = worker(store, tmp_path, batch_share=3)  # at least one batch read in every 3
    order = [(await w.read(1, block_ms=10))[0].job_id for _ in range(6)]
    assert order == ["i0", "i1", "b0", "i2", "i3", "b1"]


async def test_an_interactive_job_behind_a_long_batch_goes_first(
    store: JobStore, tmp_path: Path
) -> None:
    for i in range(500):
        await add(store, f"b{i}", lane="batch")
    w = worker(store, tmp_path, batch_share=3)
    assert [(await w.read(1, block_ms=10))[0].job_id for _ in range(5)] == [
        f"b{i}" for i in range(5)
    ]
    await add(store, "urgent")
    assert (await w.read(1, block_ms=10))[0].job_id == "urgent"
