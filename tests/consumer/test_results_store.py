"""With a store, a job's result, Markdown and files go to results/<tenant>/<job>/; Redis
keeps the pointer. With output_prefix the Markdown and JSON also land where the tenant said."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
from prometheus_client import generate_latest
from support.documents import sized_pdf

from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.stored_results import output_stem
from ocrq.shared.blobs.base import BlobStore
from ocrq.shared.blobs.paths import RESULT_JSON, RESULT_MARKDOWN, document_key, result_key
from ocrq.shared.record import SEARCHABLE_PDF, new_job_fields
from ocrq.shared.render.markdown import document_markdown
from ocrq.shared.schemas import DocumentRef, JobOptions, Result, Status
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore, now_ms

TENANT = "t"  # the tenant queue_ref queues for (tests/consumer/conftest.py)
Burst = Callable[[Settings], Awaitable[None]]
QueueRef = Callable[..., Awaitable[str]]
TWO_PAGES = [(300, 400), (400, 300)]


async def test_a_result_with_its_files_is_in_the_store_and_redis_keeps_the_pointer(
    each_blob_settings: Settings,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    blobs = opened(each_blob_settings)
    data = sized_pdf(TWO_PAGES)
    key = document_key(TENANT, "doc-r1")
    await blobs.put(key, data)
    job = await queue_ref(make_ref(key, data), options=JobOptions(searchable_pdf=True))
    await burst(each_blob_settings)
    record = await store.read(job)
    assert record.status is Status.DONE, record.error
    assert record.result is None and record.pages_done == 2
    assert not await store.redis.exists(store.keys.job_pages(job), store.keys.job_files(job))
    result = msgspec.json.decode(await blobs.get(result_key(TENANT, job, RESULT_JSON)), type=Result)
    assert result.id == job and result.page_count == 2 and result.searchable_pdf
    markdown = await blobs.get(result_key(TENANT, job, RESULT_MARKDOWN))
    assert markdown.decode() == document_markdown(result.pages, result.segments)
    assert (await blobs.get(result_key(TENANT, job, SEARCHABLE_PDF))).startswith(b"%PDF-")
    assert result.images, "the fake's layout has a figure on every page"
    for image in result.images:
        figure = await blobs.get(result_key(TENANT, job, f"images/{image}"))
        assert figure.startswith(b"\x89PNG")


async def test_an_inline_document_has_its_result_in_the_store_too(
    settings: Settings,
    tmp_path: Path,
    store: JobStore,
    burst: Burst,
    opened: Callable[[Settings], BlobStore],
) -> None:
    on_file = replace_settings(settings, blob_url=f"file://{tmp_path / 'blobs'}")
    job = secrets.token_urlsafe(16)
    fields = new_job_fields(
        job_id=job, tenant=TENANT, filename="small.pdf", media_type="application/pdf",
        data=sized_pdf(TWO_PAGES), options=JobOptions(), created_ms=now_ms(),
    )  # fmt: skip
    assert (await store.enqueue(job, "interactive", fields, None))[0]
    await burst(on_file)
    record = await store.read(job)
    assert record.status is Status.DONE and record.result is None and record.result_ref
    assert await opened(on_file).head(result_key(TENANT, job, RESULT_JSON)) is not None


async def test_output_prefix_gets_each_files_markdown_and_json_by_its_name(
    each_blob_settings: Settings,
    store: JobStore,
    burst: Burst,
    queue_ref: QueueRef,
    make_ref: Callable[..., DocumentRef],
    opened: Callable[[Settings], BlobStore],
) -> None:
    blobs = opened(each_blob_settings)
    data = sized_pdf(TWO_PAGES)
    out = JobOptions(output_prefix="tenants/t/out/")
    jobs = []
    # One burst each: two jobs of one name finishing at the same moment may both take it.
    for n, filename in enumerate(["scan.pdf", "scan.pdf", None]):
        key = document_key(TENANT, f"doc-o{n}")
        await blobs.put(key, data)
        jobs.append(await queue_ref(make_ref(key, data), options=out, filename=filename))
        await burst(each_blob_settings)
    first, second, unnamed = jobs
    names = sorted([info.key async for info in blobs.list("tenants/t/out/")])
    assert names == sorted(
        f"tenants/t/out/{stem}.{ext}"
        for stem in ("scan", f"scan-{second}", unnamed)
        for ext in ("md", "json")
    )
    result = msgspec.json.decode(await blobs.get("tenants/t/out/scan.json"), type=Result)
    assert result.id == first
    markdown = await blobs.get(f"tenants/t/out/{unnamed}.md")
    assert markdown == await blobs.get(result_key(TENANT, unnamed, RESULT_MARKDOWN))


def test_an_output_stem_is_the_filename_without_its_extension_else_the_job_id() -> None:
    assert output_stem("scan.2024.pdf", "j1") == "scan.2024"
    assert output_stem("folder/inner\\name.tiff", "j1") == "name"
    assert output_stem(None, "j1") == "j1"
    assert output_stem(".pdf", "j1") == "j1"
    assert output_stem("..", "j1") == "j1"


def test_store_calls_feed_the_workers_blob_metrics() -> None:
    metrics = WorkerMetrics()
    metrics.observe_blob("put", 0.02, 2048, True)
    metrics.observe_blob("download", 1.5, 0, False)
    text = generate_latest(metrics.registry).decode()
    assert 'ocrq_blob_seconds_count{op="put"} 1.0' in text
    assert 'ocrq_blob_bytes_total{op="put"} 2048.0' in text
    assert 'ocrq_blob_errors_total{op="download"} 1.0' in text


async def test_without_a_store_the_result_and_its_files_stay_in_redis(
    settings: Settings, store: JobStore, burst: Burst
) -> None:
    plain = replace_settings(settings, blob_url="")
    job = secrets.token_urlsafe(16)
    fields = new_job_fields(
        job_id=job, tenant=TENANT, filename=None, media_type="application/pdf",
        data=sized_pdf(TWO_PAGES), options=JobOptions(searchable_pdf=True), created_ms=now_ms(),
    )  # fmt: skip
    assert (await store.enqueue(job, "interactive", fields, None))[0]
    await burst(plain)
    record = await store.read(job)
    assert record.status is Status.DONE and not record.result_ref and record.result
    pdf = await store.redis.hget(store.keys.job_files(job), SEARCHABLE_PDF)
    assert pdf is not None and pdf.startswith(b"%PDF-")
