"""The collector: a backlog at once, else a long BLOCK for the first entry; a lone job never
waits for a window, a burst at most one; a worker takes no more than it can start soon."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from ocrq.consumer.flow import PageFlow
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.worker import Worker
from ocrq.shared.lanes import LaneEntry
from ocrq.shared.record import ENTRY_JOB_ID
from ocrq.shared.settings import replace_settings
from ocrq.shared.store import JobStore

# A collect that waited for this window would time out.
LONG_WINDOW: dict[str, Any] = {"collect_window_ms": 60_000}


async def add(store: JobStore, job_id: str, lane: str = "interactive") -> None:
    fields = {"status": "queued", "tenant": "t", "lane": lane, "payload": b"x"}
    await store.enqueue(job_id, lane, fields, None)


async def add_together(store: JobStore, *job_ids: str) -> None:
    """Entries in one transaction: a blocked reader is woken once all are in the stream."""
    async with store.redis.pipeline(transaction=True) as pipe:
        for job_id in job_ids:
            pipe.xadd(store.keys.stream("interactive"), {ENTRY_JOB_ID: job_id})
        await pipe.execute()


async def blocked_clients(store: JobStore) -> int:
    return int((await store.redis.info("clients"))["blocked_clients"])


async def collecting(w: Worker, take: int, stop: asyncio.Event) -> asyncio.Task[list[LaneEntry]]:
    """collect_window started on empty lanes, once its read is blocked there."""
    before = await blocked_clients(w.store)
    task = asyncio.create_task(w.collect_window(take, stop))
    for _ in range(1000):  # 10 s at most
        if await blocked_clients(w.store) > before:
            return task
        await asyncio.sleep(0.01)
    raise TimeoutError("the worker never blocked")


async def run_for_a_while(d: LaneEntry) -> None:
    await asyncio.sleep(30)


def worker(store: JobStore, tmp_path: Path, *, name: str = "w-test", **settings: Any) -> Worker:
    healthy = SimpleNamespace(is_open=False)
    changed = replace_settings(store.settings, **settings)
    flow = PageFlow(changed.ocr.engine_concurrency, changed.worker.raster_workers, 10**9)
    runner: Any = SimpleNamespace(
        me=name,
        workspace=tmp_path / name,
        process=run_for_a_while,
        reader=SimpleNamespace(circuit=healthy, flow=flow),
        documents=None,
    )
    return Worker(changed, store, runner, WorkerMetrics())


async def collect_soon(w: Worker, take: int, block_ms: int | None = None) -> list[LaneEntry]:
    """collect_window, failing the test if it waits anywhere near a long window."""
    return await asyncio.wait_for(w.collect_window(take, asyncio.Event(), block_ms), 10)


@pytest.mark.smoke
async def test_a_lone_job_is_taken_without_waiting_for_a_window(
    store: JobStore, tmp_path: Path
) -> None:
    task = await collecting(worker(store, tmp_path, **LONG_WINDOW), 16, asyncio.Event())
    await add(store, "solo")
    assert [d.job_id for d in await asyncio.wait_for(task, 10)] == ["solo"]


async def test_a_queued_backlog_is_taken_without_waiting_for_a_window(
    store: JobStore, tmp_path: Path
) -> None:
    for i in range(3):
        await add(store, f"j{i}")
    got = await collect_soon(worker(store, tmp_path, **LONG_WINDOW), 16)
    assert [d.job_id for d in got] == ["j0", "j1", "j2"]


async def test_a_burst_is_gathered_for_one_window(store: JobStore, tmp_path: Path) -> None:
    task = await collecting(worker(store, tmp_path, collect_window_ms=2000), 16, asyncio.Event())
    await add_together(store, "first", "second")  # others queued with the first: a burst
    await asyncio.sleep(0.1)
    await add(store, "late")  # well within the window
    got = await asyncio.wait_for(task, 10)
    assert [d.job_id for d in got] == ["first", "second", "late"]


async def test_a_burst_that_fills_the_take_is_dispatched_without_a_window(
    store: JobStore, tmp_path: Path
) -> None:
    task = await collecting(worker(store, tmp_path, **LONG_WINDOW), 3, asyncio.Event())
    await add_together(store, *(f"j{i}" for i in range(10)))
    assert [d.job_id for d in await asyncio.wait_for(task, 10)] == ["j0", "j1", "j2"]


async def test_a_stop_ends_the_window_early(store: JobStore, tmp_path: Path) -> None:
    stop = asyncio.Event()
    task = await collecting(worker(store, tmp_path, **LONG_WINDOW), 16, stop)
    await add_together(store, "a", "b")
    await asyncio.sleep(0.1)
    stop.set()
    assert [d.job_id for d in await asyncio.wait_for(task, 10)] == ["a", "b"]


async def test_the_interactive_lane_is_read_first(store: JobStore, tmp_path: Path) -> None:
    await add(store, "bulk", lane="batch")
    await add(store, "urgent")
    got = await worker(store, tmp_path).read_queued(1)
    assert [(d.job_id, d.lane) for d in got] == [("urgent", "interactive")]


async def test_nothing_queued_returns_empty_after_the_block(
    store: JobStore, tmp_path: Path
) -> None:
    w = worker(store, tmp_path, redis_block_ms=50)
    assert await collect_soon(w, 16) == []


async def test_nothing_queued_and_no_block_returns_empty_at_once(
    store: JobStore, tmp_path: Path
) -> None:
    w = worker(store, tmp_path, redis_block_ms=60_000)
    assert await collect_soon(w, 16, block_ms=0) == []


async def test_a_worker_takes_no_more_than_it_can_start_soon(
    store: JobStore, tmp_path: Path
) -> None:
    for i in range(20):
        await add(store, f"j{i}")
    first, second = worker(store, tmp_path, name="w-1"), worker(store, tmp_path, name="w-2")
    room = first.room()
    assert room == 2 * first.settings.worker.raster_workers < 20
    for d in await collect_soon(first, room):
        await first._dispatch(d)
    assert first.room() == 0  # nothing it took has started rendering yet
    got = await collect_soon(second, second.room())
    assert len(got) == room  # the rest is left for other workers
    for task in first.tasks:
        task.cancel()


async def test_max_jobs_caps_the_jobs_in_flight(store: JobStore, tmp_path: Path) -> None:
    w = worker(store, tmp_path, max_jobs=1)
    await add(store, "a")
    (d,) = await w.read_queued(4)
    await w._dispatch(d)
    w.flow.plan("a", 0)  # its pages all came from text layers: nothing left to render
    assert w.flow.room() > 0 and w.room() == 0
    for task in w.tasks:
        task.cancel()


async def test_an_entry_that_names_no_job_is_dropped_not_redelivered(
    store: JobStore, tmp_path: Path
) -> None:
    stream = store.keys.stream("interactive")
    await store.redis.xadd(stream, {"something": "else"})
    w = worker(store, tmp_path)
    for d in await w.read_queued(4):
        await w._dispatch(d)
    assert w.tasks == {}
    assert await store.redis.xlen(stream) == 0
    assert (await store.redis.xpending(stream, "workers"))["pending"] == 0


async def test_a_read_never_returns_more_than_asked(store: JobStore, tmp_path: Path) -> None:
    for i in range(3):
        await add(store, f"i{i}")
        await add(store, f"b{i}", lane="batch")
    w = worker(store, tmp_path)
    assert [d.job_id for d in await w.read_queued(2)] == ["i0", "i1"]
    assert [d.job_id for d in await w.read_queued(2)] == ["i2"]
    assert [d.job_id for d in await w.read_queued(2)] == ["b0", "b1"]


async def test_a_job_already_running_here_is_not_started_twice(
    store: JobStore, tmp_path: Path
) -> None:
    await add(store, "once")
    w = worker(store, tmp_path)
    (d,) = await w.read_queued(1)
    assert await w._dispatch(d) == 1
    assert await w._dispatch(d) == 0  # the same entry, reclaimed from ourselves
    assert await w._dispatch(msgspec.structs.replace(d, entry_id="0-1")) == 0  # the same job
    assert len(w.tasks) == 1
    for task in w.tasks:
        task.cancel()


async def test_entries_pending_to_this_worker_are_resumed_with_their_jobs(
    store: JobStore, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        await add(store, name)
    w = worker(store, tmp_path)
    got = await w.read_queued(3)  # pending to us; then the tasks died with a connection
    await store.redis.xdel(store.keys.stream("interactive"), got[2].entry_id)
    resumed = await w.resume_own()
    assert [(d.job_id, d.entry_id) for d in resumed] == [
        ("a", got[0].entry_id), ("b", got[1].entry_id), ("", got[2].entry_id)
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
    assert (
        await store.prune_consumers(store.keys.stream("interactive"), "w-test", min_idle_s=0.01)
        == 1
    )
    names = {c["name"] for c in await store.redis.xinfo_consumers(stream, group)}
    assert names == {b"busy"}


async def test_a_steady_interactive_stream_still_lets_batch_in_by_its_share(
    store: JobStore, tmp_path: Path
) -> None:
    for i in range(4):
        await add(store, f"i{i}")
        await add(store, f"b{i}", lane="batch")
    w = worker(store, tmp_path, batch_share=3)  # at least one batch read in every 3
    order = [(await w.read_queued(1))[0].job_id for _ in range(6)]
    assert order == ["i0", "i1", "b0", "i2", "i3", "b1"]


async def test_an_interactive_job_behind_a_long_batch_goes_first(
    store: JobStore, tmp_path: Path
) -> None:
    for i in range(500):
        await add(store, f"b{i}", lane="batch")
    w = worker(store, tmp_path, batch_share=3)
    assert [(await w.read_queued(1))[0].job_id for _ in range(5)] == [f"b{i}" for i in range(5)]
    await add(store, "urgent")
    assert (await w.read_queued(1))[0].job_id == "urgent"
