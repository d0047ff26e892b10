"""Jobs whose document is an object in the store: spooled, read, deleted when owned."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from support.documents import sized_pdf

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.paths import document_key, result_prefix, upload_key
from ocrq.shared.schemas import DocumentRef, Status
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore

TENANT = "t"  # the tenant queue_ref queues for (tests/consumer/conftest.py)
Burst = Callable[[Settings], Awaitable[None]]
QueueRef = Callable[..., Awaitable[str]]
TWO_PAGES = [(300, 400), (400, 300)]


async def test_a_blob_document_is_read_and_deleted_after_its_job(
    each_blob_settings: Settings,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    blobs = opened(each_blob_settings)
    data = sized_pdf(TWO_PAGES)
    key = document_key(TENANT, "doc-1")
    await blobs.put(key, data)
    job = await queue_ref(make_ref(key, data))
    await burst(each_blob_settings)
    record = await store.read(job)
    assert record.status is Status.DONE, record.error
    assert record.result_ref == result_prefix(TENANT, job)
    assert await blobs.head(key) is None  # owned: gone with its job


async def test_a_tenants_own_object_is_kept_after_its_job(
    each_blob_settings: Settings,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    blobs = opened(each_blob_settings)
    data = sized_pdf(TWO_PAGES)
    key = "tenants/t/in/scan.pdf"
    await blobs.put(key, data)
    job = await queue_ref(make_ref(key, data, owned=False))
    await burst(each_blob_settings)
    assert (await store.read(job)).status is Status.DONE
    assert await blobs.head(key) is not None


async def test_a_document_that_does_not_match_its_checksum_fails_and_is_deleted(
    settings: Settings,
    tmp_path: Path,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    on_file = replace_settings(settings, blob_url=f"file://{tmp_path / 'blobs'}")
    blobs = opened(on_file)
    data = sized_pdf(TWO_PAGES)
    key = document_key(TENANT, "doc-2")
    await blobs.put(key, data)
    job = await queue_ref(make_ref(key, data, checksum="sha256:" + "0" * 64))
    await burst(on_file)
    record = await store.read(job)
    assert record.status is Status.FAILED
    assert record.error is not None and record.error.code == "corrupt_document"
    assert "checksum" in record.error.message
    assert await blobs.head(key) is None  # a failed job's document goes too


async def test_a_document_gone_from_the_store_fails_its_job(
    settings: Settings,
    tmp_path: Path,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
) -> None:
    on_file = replace_settings(settings, blob_url=f"file://{tmp_path / 'blobs'}")
    job = await queue_ref(make_ref(document_key(TENANT, "never-written"), b"%PDF-1.7"))
    await burst(on_file)
    record = await store.read(job)
    assert record.status is Status.FAILED
    assert record.error is not None and record.error.code == "corrupt_document"
    assert "gone from the store" in record.error.message


async def test_a_blob_over_the_source_limit_fails_payload_too_large(
    settings: Settings,
    tmp_path: Path,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    data = sized_pdf(TWO_PAGES)
    on_file = replace_settings(
        settings, blob_url=f"file://{tmp_path / 'blobs'}", max_source_bytes=len(data) - 1
    )
    key = upload_key(TENANT, "up-1")
    await opened(on_file).put(key, data)
    job = await queue_ref(make_ref(key, data))
    await burst(on_file)
    record = await store.read(job)
    assert record.error is not None and record.error.code == "payload_too_large"


async def test_documents_by_reference_have_the_source_page_limit(
    settings: Settings,
    tmp_path: Path,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    limits = replace_settings(
        settings, blob_url=f"file://{tmp_path / 'blobs'}", default_max_pages=1, max_source_pages=2
    )
    blobs = opened(limits)
    two, three = sized_pdf(TWO_PAGES), sized_pdf([*TWO_PAGES, (300, 300)])
    jobs = {}
    for name, data, key in [
        ("upload of two", two, upload_key(TENANT, "up-2")),
        ("upload of three", three, upload_key(TENANT, "up-3")),
        ("stored inline upload of two", two, document_key(TENANT, "doc-3")),
    ]:
        await blobs.put(key, data)
        jobs[name] = await queue_ref(make_ref(key, data))
    await burst(limits)
    records = {name: await store.read(job) for name, job in jobs.items()}
    assert records["upload of two"].status is Status.DONE, records["upload of two"].error
    for name in ("upload of three", "stored inline upload of two"):  # over 2; over 1
        error = records[name].error
        assert error is not None and error.code == "too_many_pages", name


async def test_a_document_over_the_shm_share_spools_to_disk_for_its_job_only(
    settings: Settings,
    tmp_path: Path,
    store: JobStore,
    fake: FakeVllm,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    spool_dir = tmp_path / "spool"
    on_disk = replace_settings(
        settings,
        blob_url=f"file://{tmp_path / 'blobs'}",
        spool_shm_max_mb=0,
        document_spool_dir=str(spool_dir),
    )
    data = sized_pdf(TWO_PAGES)
    key = upload_key(TENANT, "up-4")
    await opened(on_disk).put(key, data)
    job = await queue_ref(make_ref(key, data))
    fake.configure(latency_s=1.0)  # time to look while the job runs
    seen: dict[str, list[Path]] = {"disk": [], "shm": []}

    async def look() -> None:
        while not seen["disk"]:
            seen["disk"] = list(spool_dir.glob(f"ocrq-spool/*/*/{job}/document"))
            seen["shm"] = list((tmp_path / "shm").rglob(f"{job}/document"))
            await asyncio.sleep(0.05)

    looking = asyncio.create_task(look())
    await burst(on_disk)
    await asyncio.wait_for(looking, 1.0)
    assert (await store.read(job)).status is Status.DONE
    assert seen["disk"] and not seen["shm"]
    assert not list(spool_dir.glob("ocrq-spool/*/*/*"))  # the job's and the worker's folders
