"""While a job runs: keep its stream entry fresh, and stop the work when the job is lost."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog

from ocrq.shared.lanes import LaneEntry
from ocrq.shared.schemas import Status
from ocrq.shared.store import STORE_ERRORS, JobStore

T = TypeVar("T")
log = structlog.get_logger("ocrq.worker")


class Abandoned(Exception):
    """The job was cancelled, or another worker took it over: stop without an outcome."""


class Heartbeat:
    """Touch the entry every interval; a cancelled, deleted or taken-over job ends the work.

    Use as ``async with Heartbeat(...) as beat: result = await beat.watch(work)``.
    """

    def __init__(self, store: JobStore, entry: LaneEntry, me: str, interval_s: float) -> None:
        self.store, self.entry, self.me, self.interval_s = store, entry, me, interval_s
        self.lost: str | None = None  # why the job is no longer ours, once it is not
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat(), name=f"heartbeat-{self.entry.job_id}")
        return self

    async def __aexit__(self, *_exc: object) -> None:
        task = self._task
        if task is None:
            return
        task.cancel()
        await asyncio.wait({task}, timeout=5.0)  # bounded: never hang a drain on it
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: an ended heartbeat is not worth a warning

    async def watch(self, work: Coroutine[Any, Any, T]) -> T:
        """Run work to its end, or raise Abandoned as soon as the heartbeat finds it lost."""
        assert self._task is not None, "watch() runs inside `async with`"
        task = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({task, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled (drain): the work must stop with us
            task.cancel()
            raise
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise Abandoned(self.lost or "heartbeat stopped")

    async def _beat(self) -> None:
        me = asyncio.current_task()
        while me is None or not me.cancelling():
            await asyncio.sleep(self.interval_s)
            try:
                owned = await self.store.touch(
                    self.entry.job_id, self.entry.lane, self.entry.entry_id, self.me
                )
                status = await self.store.status(self.entry.job_id)
            except STORE_ERRORS as e:  # a blip: keep working, try again next beat
                # redis-py may turn our own cancellation into a connection error: the loop
                # condition sees it, so a cancelled heartbeat really stops.
                log.warning("heartbeat_failed", error=str(e))
                continue
            if not owned:
                self.lost = "another worker owns the entry"
                return
            if status != Status.PROCESSING:
                self.lost = f"job is {status}" if status else "job is gone"
                return
