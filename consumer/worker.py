"""The worker loop: reclaim stale entries, collect a window of new ones, dispatch each job."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import structlog
from redis.exceptions import RedisError, ResponseError

from ocrq.consumer.delivery import Delivery, parse_entries
from ocrq.consumer.job import JobRunner
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.retry import Backoff
from ocrq.consumer.workspace import sweep_stale
from ocrq.shared.settings import Settings
from ocrq.shared.store import REDIS_DOWN, JobStore

log = structlog.get_logger("ocrq.worker")


class Worker:
    """One consumer process: at most ``max_jobs`` jobs in flight."""

    def __init__(
        self, settings: Settings, store: JobStore, runner: JobRunner, metrics: WorkerMetrics
    ) -> None:
        self.settings, self.store, self.runner, self.metrics = settings, store, runner, metrics
        self.me = runner.me
        self.stack_root: Path = runner.workspace.parent  # where other workers' folders live
        self.tasks: dict[asyncio.Task[None], Delivery] = {}
        self._next_reclaim = 0.0

    async def run(self, stop: asyncio.Event, *, burst: bool = False) -> None:
        """Read and dispatch until stop is set, then drain in-flight jobs within the grace.

        ``burst``: return as soon as the lanes are empty and nothing is in flight (tests,
        one-off batch runs), as arq's burst mode does.
        """
        await self._ensure_groups(stop)
        backoff = Backoff(0.5, 10.0)
        while not stop.is_set():
            self.metrics.last_loop = time.monotonic()
            try:
                dispatched = await self._turn(stop, burst)
                backoff.reset()
            except (RedisError, OSError) as e:  # down, failing over, read-only: wait it out
                if isinstance(e, ResponseError) and "NOGROUP" in str(e):
                    log.warning("group_missing_recreating", error=str(e))
                    with contextlib.suppress(RedisError, OSError):
                        await self.store.ensure_groups()
                    continue
                log.warning("redis_unavailable", error=str(e), attempt=backoff.attempt + 1)
                await backoff.sleep(stop)
                continue
            if burst and not dispatched and not self.tasks:
                break
        await self.drain()

    async def _turn(self, stop: asyncio.Event, burst: bool) -> int:
        """One turn of the loop; how many jobs it dispatched."""
        free = self.settings.max_jobs - len(self.tasks)
        if free <= 0:
            await asyncio.wait(set(self.tasks), timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            return 0
        dispatched = 0
        if time.monotonic() >= self._next_reclaim:
            # Dispatched before anything else can fail: these entries are already ours.
            dispatched += await self._dispatch(await self.reclaim(free))
            free = self.settings.max_jobs - len(self.tasks)
        if free > 0:
            # In burst mode an idle worker must notice an empty queue quickly.
            block_ms = 1 if burst and not self.tasks else self.settings.redis_block_ms
            deliveries = await self.collect_window(free, stop, block_ms)
            if deliveries:
                self.metrics.window_fill.observe(len(deliveries))
            dispatched += await self._dispatch(deliveries)
        return dispatched

    async def _dispatch(self, deliveries: list[Delivery]) -> int:
        started = 0
        for d in deliveries:
            if not d.job_id:  # an entry that names no job: drop it rather than redeliver it
                await self.store.drop_entry(d.lane, d.entry)
                continue
            task = asyncio.create_task(self.runner.process(d), name=f"job-{d.job_id}")
            self.tasks[task] = d
            task.add_done_callback(self._forget)
            started += 1
        return started

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)

    async def collect_window(
        self, free: int, stop: asyncio.Event, block_ms: int | None = None
    ) -> list[Delivery]:
        """Block for the first entry, then gather more for one window or until ``free``."""
        got = await self.read(free, block_ms or self.settings.redis_block_ms)
        if not got:
            return got
        deadline = time.monotonic() + self.settings.collect_window_ms / 1000
        while len(got) < free and not stop.is_set():
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                break
            try:
                got += await self.read(free - len(got), left_ms)
            except (RedisError, OSError) as e:  # keep what was read: it is pending to us
                log.warning("collect_interrupted", error=str(e), kept=len(got))
                break
        return got

    async def read(self, count: int, block_ms: int) -> list[Delivery]:
        """Up to count new entries, interactive lane first; BLOCK at most block_ms (≥1)."""
        keys = self.store.keys
        first: dict[Any, Any] = {keys.stream(keys.lanes[0]): ">"}
        got = parse_entries(
            await self.store.redis.xreadgroup(keys.group, self.me, first, count=count)
        )
        if got:
            return got
        both: dict[Any, Any] = {keys.stream(lane): ">" for lane in keys.lanes}
        reply = await self.store.redis.xreadgroup(
            keys.group, self.me, both, count=count, block=max(1, block_ms)
        )
        return parse_entries(reply)

    async def reclaim(self, free: int) -> list[Delivery]:
        """XAUTOCLAIM entries idle past the visibility timeout (their worker died)."""
        keys, out = self.store.keys, list[Delivery]()
        self._next_reclaim = time.monotonic() + max(1.0, self.settings.visibility_timeout_ms / 4000)
        # A dead worker on this host left its page folder behind: reclaim its disk with its work.
        await asyncio.to_thread(sweep_stale, self.stack_root)
        for lane in keys.lanes:
            stream = keys.stream(lane)
            reply = await self.store.redis.xautoclaim(
                stream, keys.group, self.me, self.settings.visibility_timeout_ms,
                start_id="0-0", count=free - len(out),
            )  # fmt: skip
            for d in parse_entries([(stream.encode(), reply[1])]):
                out.append(await self._with_delivery_count(stream, d))
            if len(out) >= free:
                break
        if out:
            log.warning("reclaimed", count=len(out), jobs=[d.job_id for d in out])
        return out

    async def _with_delivery_count(self, stream: str, d: Delivery) -> Delivery:
        pending = await self.store.redis.xpending_range(
            stream, self.store.keys.group, min=d.entry, max=d.entry, count=1
        )
        count = int(pending[0]["times_delivered"]) if pending else 1
        return Delivery(lane=d.lane, entry=d.entry, job_id=d.job_id, deliveries=count)

    async def drain(self) -> None:
        """Let in-flight jobs finish within the grace; cancel the rest (they stay pending)."""
        if not self.tasks:
            return
        log.info("draining", in_flight=len(self.tasks), grace_s=self.settings.drain_grace_s)
        _, pending = await asyncio.wait(set(self.tasks), timeout=self.settings.drain_grace_s)
        unfinished = [self.tasks[task] for task in pending]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for d in unfinished:  # hand them back now rather than after the visibility timeout
            try:
                await self.store.release(d.job_id, d.lane, d.entry, self.me)
            except REDIS_DOWN as e:
                log.warning("release_failed", job_id=d.job_id, error=str(e))
        if unfinished:
            log.warning("drain_timeout", released=[d.job_id for d in unfinished])

    async def _ensure_groups(self, stop: asyncio.Event) -> None:
        backoff = Backoff(0.5, 10.0)
        while not stop.is_set():
            try:
                await self.store.ensure_groups()
                return
            except REDIS_DOWN as e:
                log.warning("redis_unavailable", error=str(e), attempt=backoff.attempt + 1)
                await backoff.sleep(stop)
