"""Seal the batches whose producer died while reading their request.

Every producer process sweeps now and then; sealing is one script that checks the batch is
still open, so two producers sweeping together seal a batch once. A sealed batch then ends
like any other: when its last job ends it is finished and its webhook is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from litestar import Litestar

from ocrq.producer.runtime import Runtime
from ocrq.shared.batch_store import BatchStore

log = structlog.get_logger("ocrq.producer")
SWEEP_EVERY_S = 30.0  # at most; a fraction of the open deadline when that is shorter


def sweep_interval(batches: BatchStore) -> float:
    """Seconds between sweeps, with jitter so that producers started together spread out."""
    base = min(SWEEP_EVERY_S, batches.open_deadline_s / 4)
    return base * random.uniform(0.5, 1.5)


async def sweep_forever(batches: BatchStore) -> None:
    """Sweep until cancelled; a round that fails (Redis away) is only skipped."""
    while True:
        await asyncio.sleep(sweep_interval(batches))
        try:
            async with asyncio.timeout(30):
                swept = await batches.sweep()
        except Exception as e:  # Redis away, a script refused: the next round tries again
            log.warning("batch_sweep_failed", error=str(e)[:200])
            continue
        for batch_id in swept:
            log.warning("batch_abandoned_sealed", batch_id=batch_id)


@asynccontextmanager
async def batch_sweeper(app: Litestar) -> AsyncIterator[None]:
    """A lifespan (after the one that makes the runtime): the sweeper runs while the app does."""
    rt: Runtime = app.state.runtime
    task = asyncio.create_task(sweep_forever(rt.batches), name="ocrq-batch-sweeper")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
