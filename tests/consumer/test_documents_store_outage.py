"""The store going away mid-job is waited out like an engine outage: jobs wait, not fail."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest
from support.documents import sized_pdf
from support.seaweed import Seaweed

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.paths import RESULT_JSON, document_key, result_key
from ocrq.shared.schemas import DocumentRef, Status
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore

TENANT = "t"  # the tenant queue_ref queues for (tests/consumer/conftest.py)
Burst = Callable[[Settings], Awaitable[None]]
QueueRef = Callable[..., Awaitable[str]]
DOWN_S = 4.0  # how long each test keeps the store down


@pytest.fixture
def restarted(seaweed: Seaweed) -> Iterator[Seaweed]:
    """The session's SeaweedFS, running again after the test whatever happened."""
    yield seaweed
    seaweed.start()


async def wait_for(check: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
    """Poll ``check`` until it holds (the job's state lives in Redis: nothing to await)."""
    async with asyncio.timeout(timeout_s):
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_a_store_outage_while_reading_the_document_is_waited_out(
    blob_settings: Settings,
    restarted: Seaweed,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    patient = replace_settings(blob_settings, blob_outage_s=120.0, blob_timeout_s=3.0)
    blobs = opened(patient)
    data = sized_pdf([(300, 400), (400, 300)])
    key = document_key(TENANT, "doc-down")
    await blobs.put(key, data)
    job = await queue_ref(make_ref(key, data))
    restarted.kill()
    working = asyncio.create_task(burst(patient))
    await wait_for(lambda: has_status(store, job, Status.PROCESSING), 30.0)
    await asyncio.sleep(DOWN_S)
    assert await store.status(job) == Status.PROCESSING  # waiting, its entry still held
    await asyncio.to_thread(restarted.start)
    await working
    assert (await store.read(job)).status is Status.DONE
    assert await blobs.head(result_key(TENANT, job, RESULT_JSON)) is not None


async def test_a_store_outage_while_writing_the_result_is_waited_out(
    blob_settings: Settings,
    restarted: Seaweed,
    store: JobStore,
    fake: FakeVllm,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    patient = replace_settings(blob_settings, blob_outage_s=120.0, blob_timeout_s=3.0)
    blobs = opened(patient)
    data = sized_pdf([(300, 400)])
    key = document_key(TENANT, "doc-down-2")
    await blobs.put(key, data)
    job = await queue_ref(make_ref(key, data))
    fake.configure(latency_s=2.0)  # the document is read; the store dies during the page
    working = asyncio.create_task(burst(patient))
    await wait_for(lambda: pages_known(store, job), 30.0)
    restarted.kill()
    await asyncio.sleep(DOWN_S)
    assert await store.status(job) == Status.PROCESSING
    await asyncio.to_thread(restarted.start)
    await working
    assert (await store.read(job)).status is Status.DONE
    assert await blobs.head(result_key(TENANT, job, RESULT_JSON)) is not None


async def test_a_store_down_past_the_outage_window_fails_the_job_unavailable(
    blob_settings: Settings,
    restarted: Seaweed,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    brief = replace_settings(blob_settings, blob_outage_s=2.0, blob_timeout_s=1.0)
    data = sized_pdf([(300, 400)])
    key = document_key(TENANT, "doc-gone-for-good")
    await opened(brief).put(key, data)
    job = await queue_ref(make_ref(key, data))
    restarted.kill()
    await burst(brief)
    record = await store.read(job)
    assert record.status is Status.FAILED
    assert record.error is not None and record.error.code == "unavailable"


async def has_status(store: JobStore, job: str, status: Status) -> bool:
    return await store.status(job) == status


async def pages_known(store: JobStore, job: str) -> bool:
    return (await store.read(job)).pages_total > 0
