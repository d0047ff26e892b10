"""Backoff: capped exponential delays with jitter, for Redis, object store and engine outages."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from ocrq.shared.blobs.base import BlobUnavailable
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.store import REDIS_DOWN

T = TypeVar("T")
log = structlog.get_logger("ocrq.retry")


def backoff_delay(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Delay before retry number ``attempt`` (1-based): capped exponential, ±50 % jitter."""
    return float(min(cap_s, base_s * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.5))


class Backoff:
    """Successive delays of one retry loop; ``reset()`` after a success."""

    def __init__(self, base_s: float, cap_s: float, rng: random.Random | None = None) -> None:
        self.base_s, self.cap_s = base_s, cap_s
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        """The delay before the next try (one more failure counted)."""
        self.attempt += 1
        return backoff_delay(self.attempt, self.base_s, self.cap_s, self._rng)

    def reset(self) -> None:
        """Start again from the base delay."""
        self.attempt = 0

    async def sleep(self, stop: asyncio.Event | None = None) -> float:
        """Wait the next delay (returning early when ``stop`` is set); the delay waited."""
        delay = self.next_delay()
        if stop is None:
            await asyncio.sleep(delay)
            return delay
        try:
            await asyncio.wait_for(stop.wait(), delay)
        except TimeoutError:
            pass
        return delay


async def through_outages(call: Callable[[], Awaitable[T]], what: str) -> T:
    """Run a Redis call; while Redis is unreachable or paused, wait and try it again.

    A job must never fail because the job store blinked: its worker keeps it and finishes
    it once Redis answers again. Every script a job runs is safe to repeat. Cancelling the
    calling task (a drain) is the only way out.
    """
    backoff = Backoff(0.2, 5.0)
    while True:
        try:
            return await call()
        except REDIS_DOWN as e:
            delay = backoff.next_delay()
            log.warning("redis_unavailable", during=what, error=str(e), retry_in_s=round(delay, 2))
            await asyncio.sleep(delay)


async def through_blob_outages(call: Callable[[], Awaitable[T]], what: str, outage_s: float) -> T:
    """Run an object store call; while the store is unavailable, wait and try it again.

    Like an engine outage, a store outage makes jobs wait, not fail: the caller's heartbeat
    keeps the job's entry owned meanwhile. After ``outage_s`` (OCRQ_BLOB_OUTAGE_S) without
    an answer the job fails with ``unavailable``. Every call retried here is idempotent
    (a PUT rewrites the same object, a download starts the file again).
    """
    backoff = Backoff(0.5, 5.0)  # a store back from a restart is used again within seconds
    gives_up = time.monotonic() + outage_s
    while True:
        try:
            return await call()
        except BlobUnavailable as e:
            left = gives_up - time.monotonic()
            if left <= 0:
                message = f"no answer for {outage_s:g} s while {what}: {e}"
                raise OcrqError(ErrorCode.UNAVAILABLE, message[:300]) from e
            delay = min(left, backoff.next_delay())
            log.warning("blob_unavailable", during=what, error=str(e), retry_in_s=round(delay, 2))
            await asyncio.sleep(delay)
