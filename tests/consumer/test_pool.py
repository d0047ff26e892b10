"""The recycling process pool: a runaway call or a dead worker gets a fresh pool."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

from ocrq.consumer.pool import PoolClosed, RecyclingPool


@pytest.fixture
async def pool() -> AsyncIterator[RecyclingPool]:
    p = RecyclingPool(lambda: ProcessPoolExecutor(max_workers=1), 1)
    yield p
    await p.aclose()


async def test_a_call_past_its_timeout_is_killed_and_the_pool_keeps_working(
    pool: RecyclingPool,
) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await pool.run(0.5, time.sleep, 60)
    assert await pool.run(10, os.getpid) != os.getpid()  # a fresh worker answers
    assert time.monotonic() - started < 30


async def test_a_dead_worker_is_replaced(pool: RecyclingPool) -> None:
    with pytest.raises(BrokenProcessPool):
        await pool.run(10, os._exit, 1)
    assert await pool.run(10, sum, [1, 2, 3]) == 6


async def test_the_timeout_counts_running_time_not_waiting_time(pool: RecyclingPool) -> None:
    slow = asyncio.ensure_future(pool.run(10, time.sleep, 1.0))
    queued = asyncio.ensure_future(pool.run(0.8, sum, [1]))  # waits ~1 s for the worker
    assert await queued == 1
    await slow


async def test_a_closed_pool_refuses_calls(pool: RecyclingPool) -> None:
    await pool.aclose()
    with pytest.raises(PoolClosed):
        await pool.run(1, sum, [1])


async def test_a_cancelled_caller_keeps_the_slot_until_its_call_ends(pool: RecyclingPool) -> None:
    first = asyncio.create_task(pool.run(10, time.sleep, 1.0))
    await asyncio.sleep(0.2)  # running in the worker
    first.cancel()
    # Queued behind the orphaned call, this one's clock starts only once the worker is free:
    # 1 s of waiting is not counted against its 0.5 s.
    started = time.monotonic()
    assert await pool.run(0.5, os.getpid) != os.getpid()
    assert time.monotonic() - started >= 0.6  # it did wait for the orphan to end
