"""The worker loop: reclaim stale entries, take new ones while the page flow has room.

How the lanes are read (``collect_window``), as measured on Redis 7.0 (BENCHMARKS.md):

- What is queued already is taken at once, without blocking: a backlog waits for no window.
- With nothing queued, one long blocking read (``redis_block_ms``) waits for the first
  entry; Redis wakes a blocked client the moment XADD adds one.
- A lone job, one that nothing else is queued with, is dispatched at once: no window.
- When others came with it (a burst is arriving) and the worker has room for more, it
  gathers the burst for the rest of one window (``collect_window_ms``): an asyncio sleep,
  then a non-blocking read. Never a short BLOCK: Redis 7.0 at its default ``hz 10`` times
  out blocked clients on its ~100 ms clock, so ``BLOCK 1..50`` returns after ~100 ms.

How many to take is ``room()``: what the worker can start rendering soon (``PageFlow``),
within ``max_jobs``; so one worker's first read cannot take most of a burst from the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import structlog

from ocrq.consumer.flow import PageFlow
from ocrq.consumer.job import JobRunner
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.retry import Backoff
from ocrq.consumer.workspace import sweep_stale
from ocrq.shared.lanes import LaneEntry
from ocrq.shared.settings import Settings
from ocrq.shared.store import REDIS_DOWN, STORE_ERRORS, JobStore, is_missing_group

log = structlog.get_logger("ocrq.worker")


def rotated(items: list[str], turn: int) -> list[str]:
    """``items`` starting at position ``turn`` (mod its length), wrapping round."""
    start = turn % len(items)
    return items[start:] + items[:start]


class Worker:
    """One consumer process: takes jobs while its page flow has room, at most ``max_jobs``."""

    def __init__(
        self, settings: Settings, store: JobStore, runner: JobRunner, metrics: WorkerMetrics
    ) -> None:
        self.settings, self.store, self.runner, self.metrics = settings, store, runner, metrics
        self.me = runner.me
        self.flow: PageFlow = runner.reader.flow
        self.stack_root: Path = runner.workspace.parent  # where other workers' folders live
        disk = runner.documents.disk if runner.documents else None
        self.spool_root: Path | None = disk.parent if disk else None  # their disk spools
        self.lanes = store.lanes
        store.on_end = metrics.tenant_ended  # ocrq_tenant_jobs / _pages, once per job
        self.tasks: dict[asyncio.Task[None], LaneEntry] = {}
        # Entries already pending to us that no task runs yet: read beyond the room,
        # or found again after an outage or a restart under the same name.
        self.held: list[LaneEntry] = []
        self._next_reclaim = 0.0
        self._cursors: dict[str, str] = {}  # XAUTOCLAIM's scan position, per stream
        self._rotation = 0  # which partition a read of the queue tries first
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
            except STORE_ERRORS as e:  # down, failing over, read-only: wait it out
                self._resume = True  # jobs that died with the connection are still ours
                if is_missing_group(e):
                    log.warning("group_missing_recreating", error=str(e))
                    with contextlib.suppress(*STORE_ERRORS):
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
        room = self.room()
        if room <= 0:  # until a page group is rendered or a job ends; a second at most
            await self.flow.wait_for_room(1.0)
            return dispatched
        if time.monotonic() >= self._next_reclaim:
            # Dispatched before anything else can fail: these entries are already ours.
            self.held += await self.reclaim(room)
            dispatched += await self._dispatch_held()
            room = self.room()
        if room > 0:
            # In burst mode an idle worker must notice an empty queue at once.
            block_ms = 0 if burst and not self.tasks else self.settings.store.redis_block_ms
            entries = await self.collect_window(room, stop, block_ms)
            if entries:
                self.metrics.window_fill.observe(len(entries))
            self.held += entries
            dispatched += await self._dispatch_held()
        return dispatched

    def room(self) -> int:
        """Jobs to take now: what the worker can start soon, within ``max_jobs`` in flight."""
        return min(self.settings.worker.max_jobs - len(self.tasks), self.flow.room())

    async def _dispatch_held(self) -> int:
        """Start held entries while there is room; the rest stay held for the next turn."""
        started = 0
        while self.held and self.room() > 0:
            started += await self._dispatch(self.held.pop(0))
        return started

    async def _dispatch(self, held: LaneEntry) -> int:
        entry = await self.store.fair.take(held, self.me)  # a ticket: which job it runs
        if entry is None:  # no job waits for it (acked), or it is no longer ours
            return 0
        if entry.ticket:  # only ended jobs so far (each call drops some): try again
            self.held.append(entry)
            return 0
        if not entry.job_id:  # an entry that names no job: drop it rather than redeliver it
            await self.lanes.drop(entry.stream, entry.entry_id)
            return 0
        running = self.tasks.values()
        if any(r.entry_id == entry.entry_id or r.job_id == entry.job_id for r in running):
            # Reclaimed from ourselves after a long outage, or a second entry of a job we
            # run: a second copy here would share (and delete) the first one's files.
            log.info("already_running", job_id=entry.job_id, entry=entry.entry_id)
            return 0
        self.flow.admit(entry.job_id)
        task = asyncio.create_task(self.runner.process(entry), name=f"job-{entry.job_id}")
        self.tasks[task] = entry
        task.add_done_callback(self._forget)
        return 1

    def _forget(self, task: asyncio.Task[None]) -> None:
        entry = self.tasks.pop(task, None)
        if entry is not None:
            self.flow.forget(entry.job_id)

    async def collect_window(
        self, take: int, stop: asyncio.Event, block_ms: int | None = None
    ) -> list[LaneEntry]:
        """Up to ``take`` entries: those queued, else the first to arrive and its burst.

        ``block_ms`` 0: return at once when nothing is queued (burst mode, tests).
        """
        got = await self.read_queued(take)
        if got or block_ms == 0:
            return got
        got = await self.wait_first(block_ms or self.settings.store.redis_block_ms)
        if not got or len(got) >= take:
            return got
        opened = time.monotonic()
        more = await self._read_more(take - len(got))
        if more and len(got) + len(more) < take:  # a burst: gather it for one window
            await self._rest_of_window(opened, stop)
            more += await self._read_more(take - len(got) - len(more))
        return got + more

    async def _read_more(self, count: int) -> list[LaneEntry]:
        """What else is queued; an error keeps what was read already (it is pending to us)."""
        try:
            return await self.read_queued(count)
        except STORE_ERRORS as e:
            log.warning("collect_interrupted", error=str(e))
            return []

    async def _rest_of_window(self, opened: float, stop: asyncio.Event) -> None:
        left = opened + self.settings.worker.collect_window_ms / 1000 - time.monotonic()
        if left > 0:  # a timed sleep, not a BLOCK: Redis would round it up to ~100 ms
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), left)

    def lane_order(self) -> tuple[str, ...]:
        """Interactive first, except that every OCRQ_BATCH_SHARE-th read tries batch first.

        So a steady interactive stream cannot starve batch jobs, while an interactive job
        that arrives behind a long batch still goes first (the streak is then zero).
        """
        lanes = self.store.keys.lanes
        if self._interactive_streak >= max(1, self.settings.worker.batch_share) - 1:
            return tuple(reversed(lanes))
        return lanes

    async def read_queued(self, count: int) -> list[LaneEntry]:
        """Up to count entries already queued, from the first lane in lane_order with any.

        Never blocks, and never returns more than ``count``: each lane is read on its own.
        """
        keys = self.store.keys
        self._rotation += 1  # partitions take turns at being read first
        for lane in self.lane_order():
            for stream in rotated(keys.streams(lane), self._rotation):
                if got := await self.lanes.read_new(stream, self.me, count):
                    first = lane == keys.lanes[0]
                    self._interactive_streak = self._interactive_streak + 1 if first else 0
                    return got
        return []

    async def wait_first(self, block_ms: int) -> list[LaneEntry]:
        """The first entry to arrive on any lane, waiting at most block_ms (≥1).

        XADD wakes the blocked read at once. Redis serves it from the lane that got the
        entry; should entries have arrived on two lanes at once, the second one is held
        for the next turn (it is pending to us).
        """
        tags = self.store.keys.tags
        if len(tags) == 1:
            return await self._wait_partition(tags[0], block_ms)
        return await self._wait_any_partition(block_ms)

    async def _wait_partition(self, tag: str, block_ms: int) -> list[LaneEntry]:
        """One blocking read over every lane of one partition (their streams share a slot)."""
        keys = self.store.keys
        streams = [keys.stream(lane, tag) for lane in keys.lanes]
        return await self.lanes.wait_new(streams, self.me, block_ms)

    async def _wait_any_partition(self, block_ms: int) -> list[LaneEntry]:
        """A blocking read per partition (one read cannot name several cluster slots); the
        first to return wins and the others are cancelled.

        A cancelled read may have been served an entry whose reply never arrived: it is
        pending to us, and resume_own, asked for on the next turn, takes it back.
        """
        reads = {
            asyncio.create_task(self._wait_partition(tag, block_ms), name=f"wait-{tag}")
            for tag in self.store.keys.tags
        }
        got: list[LaneEntry] = []
        try:
            while reads and not got:
                done, reads = await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    got += task.result()
        finally:
            for task in reads:
                task.cancel()
            await asyncio.gather(*reads, return_exceptions=True)
            self._resume = self._resume or bool(reads)
        return got

    async def reclaim(self, room: int) -> list[LaneEntry]:
        """XAUTOCLAIM entries idle past the visibility timeout (their worker died)."""
        out: list[LaneEntry] = []
        self._next_reclaim = time.monotonic() + max(
            1.0, self.settings.worker.visibility_timeout_ms / 4000
        )
        # A dead worker on this host left its page folder behind: reclaim its disk with its work.
        await asyncio.to_thread(sweep_stale, self.stack_root)
        if self.spool_root is not None:
            await asyncio.to_thread(sweep_stale, self.spool_root)
        for _, stream in self.store.keys.lane_streams():
            # The scan goes on from where it stopped: stale entries behind many live ones
            # are reached in later turns rather than never.
            self._cursors[stream], found = await self.lanes.reclaim(
                stream,
                self.me,
                self.settings.worker.visibility_timeout_ms,
                self._cursors.get(stream, "0-0"),
                room - len(out),
            )
            for entry in found:
                out.append(await self.lanes.with_delivery_count(entry))
            await self.store.prune_consumers(
                stream, self.me, self.settings.worker.consumer_prune_idle_s
            )
            if len(out) >= room:
                break
        if out:
            log.warning("reclaimed", count=len(out), jobs=[e.job_id for e in out])
        return out

    async def resume_own(self) -> list[LaneEntry]:
        """Entries pending to this very consumer that no task runs (an outage, a restart)."""
        running = {e.entry_id for e in self.tasks.values()} | {e.entry_id for e in self.held}
        out: list[LaneEntry] = []
        for _, stream in self.store.keys.lane_streams():
            pending = await self.lanes.own_pending(
                stream, self.me, 10 * self.settings.worker.max_jobs
            )
            for entry_id, delivered in pending:
                if entry_id not in running:
                    out.append(await self.lanes.entry(stream, entry_id, delivered))
        if out:
            log.warning("resumed_own_entries", count=len(out), jobs=[e.job_id for e in out])
        return out

    async def drain(self) -> None:
        """Let in-flight jobs finish within the grace; hand the rest (and held ones) back."""
        unfinished = list(self.held)
        self.held.clear()
        if self.tasks:
            log.info(
                "draining", in_flight=len(self.tasks), grace_s=self.settings.worker.drain_grace_s
            )
            _, pending = await asyncio.wait(
                set(self.tasks), timeout=self.settings.worker.drain_grace_s
            )
            unfinished += [self.tasks[task] for task in pending]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for entry in unfinished:  # hand them back now rather than after the visibility timeout
            try:
                await self.store.release(entry.job_id, entry.lane, entry.entry_id, self.me)
            except REDIS_DOWN as e:
                log.warning("release_failed", job_id=entry.job_id, error=str(e))
        if unfinished:
            log.warning("drain_timeout", released=[e.job_id for e in unfinished])

    async def _ensure_groups(self, stop: asyncio.Event) -> None:
        backoff = Backoff(0.5, 10.0)
        while not stop.is_set():
            try:
                await self.store.ensure_groups()
                return
            except REDIS_DOWN as e:
                log.warning("redis_unavailable", error=str(e), attempt=backoff.attempt + 1)
                await backoff.sleep(stop)
