"""The store sweeper: objects whose job is gone (orphan documents, unused uploads, expired
results) are removed, one process of the stack at a time."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine, Sequence
from typing import Any

import msgspec
import structlog
from redis.exceptions import RedisError

from ocrq.shared.blobs.base import BlobError, BlobStore
from ocrq.shared.blobs.paths import DOCUMENTS, RESULTS, UPLOADS
from ocrq.shared.settings import Settings
from ocrq.shared.store import JobStore

log = structlog.get_logger("ocrq.sweep")

LEASE = "blob-sweep"  # the lease (Keys.lease) the sweeping process holds
EXISTS_BATCH = 500  # job ids asked about per round trip (pipelined EXISTS)
ERROR_WAIT_S = 30.0  # after a failed sweep, try again this soon (never later than the interval)


class SweepReport(msgspec.Struct, kw_only=True):
    """What one sweep removed, and what it looked at."""

    documents: int = 0  # documents/<tenant>/<job> objects removed
    uploads: int = 0  # uploads/<tenant>/<id> objects removed
    results: int = 0  # results/<tenant>/<job>/ folders removed
    objects: int = 0  # objects removed in all
    seen: int = 0  # objects listed
    seconds: float = 0.0


async def sweep_once(
    blobs: BlobStore, store: JobStore, settings: Settings, now_ms: int
) -> SweepReport:
    """Remove what no job owns any more and is older than OCRQ_SWEEP_GRACE_S."""
    started = time.perf_counter()
    grace_ms = int(settings.blobs.sweep_grace_s * 1000)
    upload_ms = grace_ms + settings.blobs.upload_ttl_s * 1000
    report = SweepReport()
    report.documents = await _sweep_singles(blobs, store, DOCUMENTS, now_ms - grace_ms, report)
    report.uploads = await _sweep_singles(blobs, store, UPLOADS, now_ms - upload_ms, report)
    report.results = await _sweep_results(blobs, store, now_ms - grace_ms, report)
    report.seconds = time.perf_counter() - started
    return report


def _job_of(key: str, depth: int) -> str | None:
    """The job id in <area>/<tenant>/<job>[/…] (segment 2), when the key has that shape."""
    parts = key.split("/")
    if len(parts) < depth or not parts[1] or not parts[2]:
        return None
    return parts[2]


async def _sweep_singles(
    blobs: BlobStore, store: JobStore, area: str, before_ms: int, report: SweepReport
) -> int:
    """documents/ or uploads/: each object older than ``before_ms`` whose job hash is gone."""
    removed = 0
    batch: list[tuple[str, str]] = []
    async for info in blobs.list(area):
        report.seen += 1
        job_id = _job_of(info.key, 3)
        if job_id is not None and info.key.count("/") == 2 and info.modified_ms < before_ms:
            batch.append((info.key, job_id))
        if len(batch) >= EXISTS_BATCH:
            removed += await _drop_orphans(blobs, store, batch)
            batch = []
    removed += await _drop_orphans(blobs, store, batch)
    report.objects += removed
    return removed


async def _drop_orphans(blobs: BlobStore, store: JobStore, batch: Sequence[tuple[str, str]]) -> int:
    """Delete the keys whose job no longer exists; how many."""
    if not batch:
        return 0
    alive = await store.jobs_exist([job_id for _, job_id in batch])
    orphans = [key for (key, _), live in zip(batch, alive, strict=True) if not live]
    if orphans:
        await blobs.delete(orphans)
    return len(orphans)


class _Folder(msgspec.Struct):
    job_id: str
    newest_ms: int
    keys: list[str]


async def _sweep_results(
    blobs: BlobStore, store: JobStore, before_ms: int, report: SweepReport
) -> int:
    """results/<tenant>/<job>/: a folder whose job is gone and whose newest object is old."""
    removed = 0
    folders: dict[str, _Folder] = {}  # a folder's keys come together in any listing order
    async for info in blobs.list(RESULTS):
        report.seen += 1
        job_id = _job_of(info.key, 4)
        if job_id is None:
            continue
        name = info.key.split("/", 3)
        folder = folders.setdefault("/".join(name[:3]) + "/", _Folder(job_id, 0, []))
        folder.newest_ms = max(folder.newest_ms, info.modified_ms)
        folder.keys.append(info.key)
        if len(folders) > EXISTS_BATCH:
            # Every folder but the one being listed is complete.
            last = next(reversed(folders))
            done = {prefix: f for prefix, f in folders.items() if prefix != last}
            removed += await _drop_old_folders(blobs, store, done, before_ms, report)
            folders = {last: folders[last]}
    removed += await _drop_old_folders(blobs, store, folders, before_ms, report)
    return removed


async def _drop_old_folders(
    blobs: BlobStore,
    store: JobStore,
    folders: dict[str, _Folder],
    before_ms: int,
    report: SweepReport,
) -> int:
    """Delete the old folders whose job no longer exists; how many folders."""
    old = [folder for folder in folders.values() if folder.newest_ms < before_ms]
    if not old:
        return 0
    alive = await store.jobs_exist([folder.job_id for folder in old])
    gone = [folder for folder, live in zip(old, alive, strict=True) if not live]
    keys = [key for folder in gone for key in folder.keys]
    if keys:
        await blobs.delete(keys)
    report.objects += len(keys)
    return len(gone)


async def run_sweeper(
    blobs: BlobStore, store: JobStore, settings: Settings, me: str, stop: asyncio.Event
) -> None:
    """Sweep every OCRQ_SWEEP_INTERVAL_S while holding the stack's lease; never raises.

    The lease lives one interval, so at most one process of the stack sweeps per interval;
    a failed sweep (store or Redis away) is logged and tried again sooner.
    """
    interval_s = settings.blobs.sweep_interval_s
    while not stop.is_set():
        wait_s = interval_s
        try:
            if await store.take_lease(LEASE, me, interval_s):
                report = await _unless_stopped(
                    sweep_once(blobs, store, settings, int(time.time() * 1000)), stop
                )
                if report is not None:
                    log.info("blob sweep", **msgspec.structs.asdict(report))
        except (BlobError, RedisError, OSError) as e:
            log.warning("blob sweep failed", error=str(e), kind=type(e).__name__)
            wait_s = min(interval_s, ERROR_WAIT_S)
        except Exception:  # a sweeper bug must not take the worker down
            log.exception("blob sweep crashed")
            wait_s = min(interval_s, ERROR_WAIT_S)
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can take a cancellation that
        # lands as its timeout fires for its own, and the sweeper would then sweep on.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await stop.wait()


async def _unless_stopped(
    sweep: Coroutine[Any, Any, SweepReport], stop: asyncio.Event
) -> SweepReport | None:
    """The sweep's report, or None when ``stop`` is set first (the sweep is cancelled:
    a worker draining does not wait for a long listing)."""
    task = asyncio.ensure_future(sweep)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            # Waits for the sweep to end without taking its CancelledError for ours: a
            # sweeper cancelled here (its worker shutting down) must end, not sweep on.
            await asyncio.wait({task})
    return None if task.cancelled() else task.result()
