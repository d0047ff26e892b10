"""One view of the engine's health for the whole worker: an outage makes jobs wait, not fail.

When a request fails in a way that may pass (the engine unreachable, 5xx, a timeout), the
circuit opens: the worker stops taking new jobs, requests wait, and one probe loop asks
the engine's health endpoint with backoff until it answers. Then the circuit closes and
the waiting requests try again. A request fails for the engine only when

- the engine stayed down ``OCRQ_ENGINE_OUTAGE_S`` (15 min) since the request first failed
  (a vLLM cold start from zero takes minutes and must not fail the jobs queued meanwhile), or
- the request failed ``OCRQ_ENGINE_RETRIES`` times while the engine said it was healthy
  (the request itself is the trouble: it must not be retried for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog

from ocrq.consumer.retry import Backoff
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import Settings

T = TypeVar("T")
log = structlog.get_logger("ocrq.engine")


class EngineCircuit:
    """Closed while the engine answers; open (and probing) while it does not."""

    def __init__(self, probe: Callable[[], Awaitable[bool]], settings: Settings) -> None:
        self._probe = probe
        self.settings = settings
        self._closed = asyncio.Event()
        self._closed.set()
        self._prober: asyncio.Task[None] | None = None
        self.opened_at: float | None = None

    @property
    def is_open(self) -> bool:
        """True while the engine is thought down."""
        return not self._closed.is_set()

    def trip(self, error: OcrqError) -> None:
        """A request failed transiently: open the circuit and start probing (once)."""
        if self.is_open:
            return
        self.opened_at = time.monotonic()
        self._closed.clear()
        log.warning("engine_circuit_open", code=error.code.value, error=error.message)
        self._prober = asyncio.create_task(self._probe_until_up(), name="engine-probe")

    async def wait_closed(self, timeout_s: float) -> bool:
        """Wait until the engine is up again; False when timeout_s passed first."""
        try:
            await asyncio.wait_for(self._closed.wait(), max(0.0, timeout_s))
        except TimeoutError:
            return False
        return True

    async def call(
        self, request: Callable[[], Awaitable[T]], on_error: Callable[[OcrqError], None]
    ) -> T:
        """Run one engine request under the circuit's rules (see the module docstring)."""
        s = self.settings.ocr
        first_failure: float | None = None
        failures_while_up = 0
        pause = Backoff(s.engine_backoff_s, s.engine_backoff_max_s)
        while True:
            if self.is_open:
                started = first_failure or time.monotonic()
                left = s.engine_outage_s - (time.monotonic() - started)
                if not await self.wait_closed(left):
                    raise OcrqError(
                        ErrorCode.ENGINE_UNAVAILABLE,
                        f"the engine has been unreachable for {s.engine_outage_s:g} s",
                    )
            try:
                return await request()
            except OcrqError as e:
                on_error(e)
                if not e.transient:
                    raise
                first_failure = first_failure or time.monotonic()
                failures_while_up += 1
                if failures_while_up > s.engine_retries:
                    raise
                self.trip(e)
                await asyncio.sleep(pause.next_delay())

    async def _probe_until_up(self) -> None:
        backoff = Backoff(
            self.settings.ocr.engine_backoff_s, self.settings.ocr.engine_backoff_max_s
        )
        while True:  # a poll of another process: there is no event to wait on
            if await self._probe():
                break
            await asyncio.sleep(backoff.next_delay())
        down_s = time.monotonic() - (self.opened_at or time.monotonic())
        log.info("engine_circuit_closed", down_s=round(down_s, 2))
        self._closed.set()

    async def aclose(self) -> None:
        """Stop probing."""
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober
