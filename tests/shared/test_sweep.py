"""The store sweeper on both backends with the real Redis: what no job owns goes, in time."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest

from ocrq.shared.blobs import (
    BlobStore,
    document_key,
    open_blob_store,
    result_key,
    sweep,
    upload_key,
)
from ocrq.shared.blobs.sweep import LEASE, SweepReport, run_sweeper, sweep_once
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore

GRACE_S = 1.5  # S3's Last-Modified has whole seconds: objects may look up to 1 s older
AGE_S = 2.2  # the "old" objects' age when the sweep runs


@pytest.fixture
def sweep_settings(each_blob_settings: Settings) -> Settings:
    return replace_settings(each_blob_settings, sweep_grace_s=GRACE_S, upload_ttl_s=0)


@pytest.fixture
async def blobs(sweep_settings: Settings) -> AsyncIterator[BlobStore]:
    store = open_blob_store(sweep_settings)
    assert store is not None
    yield store
    await store.aclose()


async def live_job(store: JobStore, job_id: str) -> None:
    await store.redis.hset(store.keys.job(job_id), mapping={"status": "queued", "tenant": "t"})


async def keys_in(blobs: BlobStore) -> set[str]:
    return {info.key async for info in blobs.list("")}


async def test_a_sweep_removes_old_objects_of_gone_jobs_only(
    blobs: BlobStore, store: JobStore, sweep_settings: Settings
) -> None:
    for job_id in ("live", "up-used", "running"):
        await live_job(store, job_id)
    old = [
        document_key("t", "orphan"),
        document_key("t", "live"),
        upload_key("t", "up-unused"),
        upload_key("t", "up-used"),
        result_key("t", "expired", "result.json"),
        result_key("t", "expired", "images/p1-1.png"),
        result_key("t", "running", "result.json"),
        result_key("t", "half", "result.json"),
        "documents/t/not/ours",  # not <area>/<tenant>/<job>: left alone
        "tenants/t/in/source.pdf",  # a tenant's own prefix: never swept
    ]
    for key in old:
        await blobs.put(key, b"x")
    await asyncio.sleep(AGE_S)
    young = [document_key("t", "young-orphan"), result_key("t", "half", "result.md")]
    for key in young:
        await blobs.put(key, b"y")

    report = await sweep_once(blobs, store, sweep_settings, int(time.time() * 1000))

    gone = {
        document_key("t", "orphan"),
        upload_key("t", "up-unused"),
        result_key("t", "expired", "result.json"),
        result_key("t", "expired", "images/p1-1.png"),
    }
    assert await keys_in(blobs) == set(old + young) - gone
    assert (report.documents, report.uploads, report.results, report.objects) == (1, 1, 1, 4)
    assert report.seen == len(old) + len(young) - 1  # all but the tenant's own prefix


async def test_an_unused_upload_stays_for_its_url_life_plus_the_grace(
    blobs: BlobStore, store: JobStore, sweep_settings: Settings
) -> None:
    await blobs.put(upload_key("t", "pending"), b"x")
    await blobs.put(document_key("t", "orphan"), b"x")
    await asyncio.sleep(AGE_S)
    now = int(time.time() * 1000)
    long_urls = replace_settings(sweep_settings, upload_ttl_s=3600)
    report = await sweep_once(blobs, store, long_urls, now)
    assert (report.documents, report.uploads) == (1, 0)
    assert await keys_in(blobs) == {upload_key("t", "pending")}
    report = await sweep_once(blobs, store, long_urls, now + 3600 * 1000)
    assert report.uploads == 1
    assert await keys_in(blobs) == set()


async def test_sweepers_share_one_lease_and_stop_when_told(
    blobs: BlobStore, store: JobStore, sweep_settings: Settings
) -> None:
    await blobs.put(document_key("t", "orphan"), b"x")
    await asyncio.sleep(AGE_S)
    fast = replace_settings(sweep_settings, sweep_interval_s=0.3)
    stop = asyncio.Event()
    sweepers = [
        asyncio.create_task(run_sweeper(blobs, store, fast, f"worker-{n}", stop)) for n in (1, 2)
    ]
    try:
        for _ in range(100):  # 10 s at most
            if not await keys_in(blobs):
                break
            await asyncio.sleep(0.1)
        assert await keys_in(blobs) == set()
        holder = await store.redis.hget(store.keys.lease(LEASE), "owner")
        assert holder in (b"worker-1", b"worker-2")
    finally:  # told to stop, both end, whatever was found above
        stop.set()
        await asyncio.wait_for(asyncio.gather(*sweepers), timeout=2)


async def test_a_sweeper_cancelled_during_a_sweep_ends(
    blobs: BlobStore, store: JobStore, sweep_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker that cancels its sweeper mid-sweep (not through `stop`) must see it end: the
    # sweep's own cancellation used to be taken for the sweeper's, which then swept on.
    started = asyncio.Event()

    async def long_sweep(*args: object) -> SweepReport:
        started.set()
        await asyncio.sleep(60)
        return SweepReport()

    monkeypatch.setattr(sweep, "sweep_once", long_sweep)
    sweeper = asyncio.create_task(run_sweeper(blobs, store, sweep_settings, "w", asyncio.Event()))
    await asyncio.wait_for(started.wait(), timeout=5)

    sweeper.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(sweeper, timeout=2)


async def test_a_sweeper_waits_out_an_unreachable_store(
    blob_settings: Settings, store: JobStore
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    away = replace_settings(
        blob_settings,
        s3_endpoint=f"http://127.0.0.1:{closed}",
        blob_timeout_s=0.5,
        sweep_interval_s=0.2,
    )
    blobs = open_blob_store(away)
    assert blobs is not None
    stop = asyncio.Event()
    sweeper = asyncio.create_task(run_sweeper(blobs, store, away, "me", stop))
    await asyncio.sleep(1.5)  # several failed sweeps: logged, never raised
    assert not sweeper.done()
    stop.set()
    await asyncio.wait_for(sweeper, timeout=2)
