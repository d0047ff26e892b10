"""Retries for transient engine failures: exponential backoff with jitter, then the last cause."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from shared.errors import OcrqError
from shared.settings import Settings

T = TypeVar("T")
log = structlog.get_logger("ocrq.retry")


def backoff_delay(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Delay before retry number ``attempt`` (1-based): capped exponential, ±50 % jitter."""
    return float(min(cap_s, base_s * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.5))


async def with_retries(
    call: Callable[[], Awaitable[T]],
    settings: Settings,
    on_error: Callable[[OcrqError], None] | None = None,
    rng: random.Random | None = None,
) -> T:
    """Run call; retry transient OcrqErrors up to settings.engine_retries, then raise the last."""
    rng = rng or random.Random()
    attempt = 0
    while True:
        try:
            return await call()
        except OcrqError as e:
            if on_error:
                on_error(e)
            attempt += 1
            if not e.transient or attempt > settings.engine_retries:
                raise
            delay = backoff_delay(
                attempt, settings.engine_backoff_s, settings.engine_backoff_max_s, rng
            )
            log.warning("engine_retry", attempt=attempt, code=e.code.value, delay_s=round(delay, 2))
            await asyncio.sleep(delay)
