"""The worker loop: reclaim stale entries, collect a window of new ones, dispatch each job."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import msgspec
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
        # Entries already pending to us that no task runs yet: read beyond the free slots,
        # or found again after an outage or a restart under the same name.
        self.held: list[Delivery] = []
        self._next_reclaim = 0.0
        self._cursors = dict.fromkeys(store.keys.lanes, "0-0")  # XAUTOCLAIM, per lane
        self._resume = True  # take back our own pending entries at start
        self._interactive_streak = 0  # reads served by `interactive` since `batch` last was

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
                self._resume = True  # jobs that died with the connection are still ours
                if isinstance(e, ResponseError) and "NOGROUP" in str(e):
                    log.warning("group_missing_recreating", error=str(e))
                    with contextlib.suppress(RedisError, OSError):
                        await self.store.ensure_groups()
                    continue
                log.warning("redis_unavailable", error=str(e), attempt=backoff.attempt + 1)
                await backoff.sleep(stop)
                continue
            if burst and not dispatched and not self.tasks and not self.held:
                break
        await self.drain()

    async def _turn(self, stop: asyncio.Event, burst: bool) -> int:
        """One turn of the loop; how many jobs it dispatched."""
        if self._resume:
            self.held += await self.resume_own()
            self._resume = False
        circuit = self.runner.reader.circuit
        if circuit.is_open:  # the engine is down: take no new work, wait for it
            await circuit.wait_closed(1.0)
            return 0
        dispatched = await self._dispatch_held()
        free = self.free_slots()
        if free <= 0:
            await asyncio.wait(set(self.tasks), timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            return dispatched
        if time.monotonic() >= self._next_reclaim:
            # Dispatched before anything else can fail: these entries are already ours.
            self.held += await self.reclaim(free)
            dispatched += await self._dispatch_held()
            free = self.free_slots()
        if free > 0:
            # In burst mode an idle worker must notice an empty queue quickly.
            block_ms = 1 if burst and not self.tasks else self.settings.redis_block_ms
            deliveries = await self.collect_window(free, stop, block_ms)
            if deliveries:
                self.metrics.window_fill.observe(len(deliveries))
            self.held += deliveries
            dispatched += await self._dispatch_held()
        return dispatched

    def free_slots(self) -> int:
        """Jobs this worker may still start."""
        return self.settings.max_jobs - len(self.tasks)

    async def _dispatch_held(self) -> int:
        """Start held deliveries while slots are free; the rest stay held for the next turn."""
        started = 0
        while self.held and self.free_slots() > 0:
            started += await self._dispatch(self.held.pop(0))
        return started

    async def _dispatch(self, d: Delivery) -> int:
        if not d.job_id:  # an entry that names no job: drop it rather than redeliver it
            await self.store.drop_entry(d.lane, d.entry)
            return 0
        running = self.tasks.values()
        if any(r.entry == d.entry or r.job_id == d.job_id for r in running):
            # Reclaimed from ourselves after a long outage, or a second entry of a job we
            # run: a second copy here would share (and delete) the first one's files.
            log.info("already_running", job_id=d.job_id, entry=d.entry)
            return 0
        task = asyncio.create_task(self.runner.process(d), name=f"job-{d.job_id}")
        self.tasks[task] = d
        task.add_done_callback(self._forget)
        return 1

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

    def lane_order(self) -> tuple[str, ...]:
        """Interactive first, except that every OCRQ_BATCH_SHARE-th read tries batch first.

        So a steady interactive stream cannot starve batch jobs, while an interactive job
        that arrives behind a long batch still goes first (the streak is then zero).
        """
        lanes = self.store.keys.lanes
        if self._interactive_streak >= max(1, self.settings.batch_share) - 1:
            return tuple(reversed(lanes))
        return lanes

    async def read(self, count: int, block_ms: int) -> list[Delivery]:
        """Up to count new entries, in lane_order; BLOCK at most block_ms (≥1).

        Each lane is read on its own while any has entries, so one read never returns more
        than ``count``. Only the blocking read names every lane, and Redis serves a blocked
        read from the one lane that got an entry; should entries have arrived on two lanes
        in between, the extra ones are held for the next turn (they are pending to us).
        """
        keys, redis = self.store.keys, self.store.redis
        for lane in self.lane_order():
            reply = await redis.xreadgroup(keys.group, self.me, {keys.stream(lane): ">"}, count)
            if got := parse_entries(reply):
                first = lane == keys.lanes[0]
                self._interactive_streak = self._interactive_streak + 1 if first else 0
                return got
        every: dict[Any, Any] = {keys.stream(lane): ">" for lane in keys.lanes}
        reply = await redis.xreadgroup(keys.group, self.me, every, count, block=max(1, block_ms))
        return parse_entries(reply)

    async def reclaim(self, free: int) -> list[Delivery]:
        """XAUTOCLAIM entries idle past the visibility timeout (their worker died)."""
        keys, out = self.store.keys, list[Delivery]()
        self._next_reclaim = time.monotonic() + max(1.0, self.settings.visibility_timeout_ms / 4000)
        # A dead worker on this host left its page folder behind: reclaim its disk with its work.
        await asyncio.to_thread(sweep_stale, self.stack_root)
        for lane in keys.lanes:
            stream = keys.stream(lane)
            cursor, entries, *_ = await self.store.redis.xautoclaim(
                stream, keys.group, self.me, self.settings.visibility_timeout_ms,
                start_id=self._cursors[lane], count=free - len(out),
            )  # fmt: skip
            # The scan goes on from where it stopped: stale entries behind many live ones
            # are reached in later turns rather than never.
            self._cursors[lane] = cursor.decode() if isinstance(cursor, bytes) else str(cursor)
            for d in parse_entries([(stream.encode(), entries)]):
                out.append(await self._with_delivery_count(stream, d))
            await self.store.prune_consumers(lane, self.me, self.settings.consumer_prune_idle_s)
            if len(out) >= free:
                break
        if out:
            log.warning("reclaimed", count=len(out), jobs=[d.job_id for d in out])
        return out

    async def resume_own(self) -> list[Delivery]:
        """Entries pending to this very consumer that no task runs (an outage, a restart)."""
        running = {d.entry for d in self.tasks.values()} | {d.entry for d in self.held}
        out: list[Delivery] = []
        for lane in self.store.keys.lanes:
            pending = await self.store.own_pending(lane, self.me, 10 * self.settings.max_jobs)
            for entry, delivered in pending:
                if entry not in running:
                    job_id, batch = await self.store.entry_job(lane, entry)
                    out.append(Delivery(lane, entry, job_id, delivered, batch))
        if out:
            log.warning("resumed_own_entries", count=len(out), jobs=[d.job_id for d in out])
        return out

    async def _with_delivery_count(self, stream: str, d: Delivery) -> Delivery:
        pending = await self.store.redis.xpending_range(
            stream, self.store.keys.group, min=d.entry, max=d.entry, count=1
        )
        count = int(pending[0]["times_delivered"]) if pending else 1
        return msgspec.structs.replace(d, deliveries=count)

    async def drain(self) -> None:
        """Let in-flight jobs finish within the grace; hand the rest (and held ones) back."""
        unfinished = list(self.held)
        self.held.clear()
        if self.tasks:
            log.info("draining", in_flight=len(self.tasks), grace_s=self.settings.drain_grace_s)
            _, pending = await asyncio.wait(set(self.tasks), timeout=self.settings.drain_grace_s)
            unfinished += [self.tasks[task] for task in pending]
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
