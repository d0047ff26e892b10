"""The collector: block for the first entry, then gather for one window or until full."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.worker import Worker
from ocrq.shared.store import JobStore


async def add(store: JobStore, job_id: str, lane: str = "interactive") -> None:
    fields = {"status": "queued", "tenant": "t", "lane": lane, "payload": b"x"}
    await store.enqueue(job_id, lane, fields, None)


def worker(store: JobStore, tmp_path: Path) -> Worker:
    runner: Any = SimpleNamespace(me="w-test", workspace=tmp_path / "w-test")
    return Worker(store.settings, store, runner, WorkerMetrics())


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
    await w._dispatch(await w.read(4, block_ms=10))
    assert w.tasks == {}
    assert await store.redis.xlen(stream) == 0
    assert (await store.redis.xpending(stream, "workers"))["pending"] == 0
