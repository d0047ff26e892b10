"""Results in the object store: every read of a done job (poll, each format, its files, page
events) comes from results/<tenant>/<job>/; DELETE and cancel remove the job's objects.

Each test runs on both backends (a file:// folder and the session's SeaweedFS) unless it
needs one: a presigned redirect and an unreachable S3 endpoint are S3's.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
from litestar.testing import TestClient
from support.jobflow import take
from support.payloads import fake_png
from support.stored_jobs import (
    finish_into_store,
    keys_under,
    owned_document,
    put_result,
    queue_by_reference,
)
from support.structured_results import (
    FIGURE,
    SEARCHABLE_PDF,
    done_job,
    second_page,
    structured_result,
    submit_report,
)

from ocrq.producer.jobs.views import new_job_id
from ocrq.shared.blobs import BlobStore, document_key, open_blob_store, result_prefix
from ocrq.shared.blobs.paths import RESULT_JSON
from ocrq.shared.embedded import free_port
from ocrq.shared.record import Field
from ocrq.shared.schemas import DocumentRef
from ocrq.shared.settings import Settings
from ocrq.shared.store import JobStore

TENANT = "public"  # the open API's tenant


@pytest.fixture
async def blobs(each_blob_settings: Settings) -> AsyncIterator[BlobStore]:
    """The test's store, opened as the producer opens it."""
    opened = open_blob_store(each_blob_settings)
    assert opened is not None
    yield opened
    await opened.aclose()


def producer_on(make_client: Any, on: Settings, **overrides: Any) -> TestClient[Any]:
    """An open API whose object store is the one ``on`` names."""
    named = {"blob_url": on.blobs.blob_url, "s3_endpoint": on.blobs.s3_endpoint}
    client: TestClient[Any] = make_client(**(named | overrides))
    return client


@pytest.fixture
def stored_api(make_client: Any, each_blob_settings: Settings) -> TestClient[Any]:
    """The API on the test's store."""
    return producer_on(make_client, each_blob_settings)


async def stored_job(
    api: TestClient[Any], store: JobStore, blobs: BlobStore, **options: Any
) -> str:
    """A job submitted through the API, finished with its result in the store."""
    submit_report(api, **options)
    return await finish_into_store(
        store, blobs, searchable_pdf=options.get("searchable_pdf", False)
    )


async def test_a_stored_result_leaves_only_its_folder_in_redis(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore, sync_redis: Any
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    record = await store.read(job_id, (Field.RESULT, Field.RESULT_REF))
    assert record.result is None and record.result_ref == result_prefix(TENANT, job_id)
    assert not sync_redis.exists(store.keys.job_pages(job_id), store.keys.job_files(job_id))


async def test_the_poll_view_holds_the_result_read_from_the_store(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    view = stored_api.get(f"/v1/jobs/{job_id}").json()
    assert view["status"] == "done"
    assert view["result"]["markdown"] == structured_result(job_id).markdown
    assert [p["number"] for p in view["result"]["pages"]] == [1, 2]
    waited = stored_api.get(f"/v1/jobs/{job_id}?wait=1").json()
    assert waited["result"] == view["result"]


@pytest.mark.parametrize(
    "query",
    [
        "format=json",
        "format=markdown",
        "format=markdown&keep_headers_footers=true",
        "format=html",
        "format=text",
        "format=chunks&chunk_tokens=32",
        "format=pdf",
    ],
)
async def test_every_format_answers_as_the_same_result_in_redis_does(
    api: TestClient[Any],
    stored_api: TestClient[Any],
    store: JobStore,
    blobs: BlobStore,
    query: str,
) -> None:
    in_redis = await done_job(api, store, searchable_pdf=True)
    in_store = await stored_job(stored_api, store, blobs, searchable_pdf=True)
    expected = api.get(f"/v1/jobs/{in_redis}/result?{query}")
    got = stored_api.get(f"/v1/jobs/{in_store}/result?{query}")
    assert expected.status_code == got.status_code == 200, got.text
    assert got.headers["content-type"] == expected.headers["content-type"]
    assert got.headers.get("content-disposition") == expected.headers.get("content-disposition")
    if query == "format=json":  # the worker's JSON as written (the ids differ)
        assert got.content == msgspec.json.encode(structured_result(in_store, searchable_pdf=True))
    else:  # the same bytes but for the job's id
        assert got.content.replace(in_store.encode(), in_redis.encode()) == expected.content


async def test_the_default_markdown_is_the_workers_result_md(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    await blobs.put(result_prefix(TENANT, job_id) + "result.md", b"# from result.md\n")
    assert stored_api.get(f"/v1/jobs/{job_id}/result?format=markdown").text == "# from result.md\n"
    asked = stored_api.get(f"/v1/jobs/{job_id}/result?format=markdown&keep_headers_footers=true")
    assert asked.text.startswith("# Quarterly Report")  # options of its own: rendered


async def test_a_job_without_result_md_renders_its_markdown_from_the_json(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    submit_report(stored_api)
    job_id = await finish_into_store(store, blobs, markdown_file=False)
    for query in ("format=markdown", "format=markdown&redirect=true"):
        r = stored_api.get(f"/v1/jobs/{job_id}/result?{query}", follow_redirects=False)
        assert r.status_code == 200 and r.text == structured_result(job_id).markdown


@pytest.mark.parametrize("fmt", ["json", "pdf", "markdown"])
async def test_redirect_true_is_a_307_to_a_presigned_get_where_the_store_presigns(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore, fmt: str
) -> None:
    job_id = await stored_job(stored_api, store, blobs, searchable_pdf=True)
    direct = stored_api.get(f"/v1/jobs/{job_id}/result?format={fmt}")
    r = stored_api.get(
        f"/v1/jobs/{job_id}/result?format={fmt}&redirect=true", follow_redirects=False
    )
    if not blobs.can_presign:  # file://: the bytes themselves
        assert r.status_code == 200 and r.content == direct.content
        return
    assert r.status_code == 307 and r.headers["cache-control"] == "no-store"
    async with httpx.AsyncClient(timeout=10) as client:
        fetched = await client.get(r.headers["location"])
    assert fetched.status_code == 200 and fetched.content == direct.content


async def test_rendered_formats_are_never_redirected(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    for fmt in ("html", "text", "chunks"):
        r = stored_api.get(f"/v1/jobs/{job_id}/result?format={fmt}&redirect=true")
        assert r.status_code == 200 and r.content


async def test_tables_figures_and_pages_are_served_from_the_store(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    table = stored_api.get(f"/v1/jobs/{job_id}/tables/1.csv")
    assert table.status_code == 200
    assert next(csv.reader(io.StringIO(table.text))) == ["Item", "Price"]
    image = stored_api.get(f"/v1/jobs/{job_id}/images/p1-1.png")
    assert image.status_code == 200 and image.content == FIGURE
    assert stored_api.get(f"/v1/jobs/{job_id}/images/p1-2.png").status_code == 404
    page = stored_api.get(f"/v1/jobs/{job_id}/pages/2")
    assert page.status_code == 200 and page.json() == json.loads(msgspec.json.encode(second_page()))


async def test_page_events_of_a_stored_result_come_from_the_store(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    text = stored_api.get(f"/v1/jobs/{job_id}/events?pages=true").text
    kinds = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("event: ")]
    assert kinds == ["page", "page", "job"]


async def test_an_object_gone_from_the_store_is_404_saying_so(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs, searchable_pdf=True)
    await blobs.delete_prefix(result_prefix(TENANT, job_id))
    for path in ("", "/result", "/result?format=html", "/tables/1.csv", "/pages/1"):
        r = stored_api.get(f"/v1/jobs/{job_id}{path}")
        assert r.status_code == 404, (path, r.text)
        assert "no longer in the object store" in r.json()["message"]
    assert stored_api.get(f"/v1/jobs/{job_id}/result?format=pdf").status_code == 406
    assert stored_api.get(f"/v1/jobs/{job_id}/images/p1-1.png").status_code == 404


async def test_the_store_unreachable_is_503_with_retry_after(
    make_client: Any, blob_settings: Settings, store: JobStore
) -> None:
    writer = open_blob_store(blob_settings)
    assert writer is not None
    try:
        job_id = await stored_job(producer_on(make_client, blob_settings), store, writer)
    finally:
        await writer.aclose()
    dead = producer_on(
        make_client,
        blob_settings,
        s3_endpoint=f"http://127.0.0.1:{free_port()}",
        blob_timeout_s=1.0,
    )
    for path in ("", "/result", "/result?format=text", "/images/p1-1.png", "/tables/1.csv"):
        r = dead.get(f"/v1/jobs/{job_id}{path}")
        assert r.status_code == 503 and r.json()["code"] == "unavailable", (path, r.text)
        assert r.headers["retry-after"] == "5"


async def test_a_producer_without_the_store_says_where_the_result_is(
    api: TestClient[Any], stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    r = api.get(f"/v1/jobs/{job_id}/result")
    assert r.status_code == 503 and "OCRQ_BLOB_URL" in r.json()["message"]


async def test_delete_leaves_nothing_of_the_job_in_the_bucket(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = new_job_id()
    await queue_by_reference(store, job_id, await owned_document(blobs, TENANT, job_id), TENANT)
    assert await finish_into_store(store, blobs, searchable_pdf=True) == job_id
    assert len(await keys_under(blobs)) == 5  # document, result.json, .md, figure, PDF
    r = stored_api.delete(f"/v1/jobs/{job_id}")
    assert r.status_code == 200 and stored_api.get(f"/v1/jobs/{job_id}").status_code == 404
    assert await keys_under(blobs) == []


async def test_deleting_a_running_job_removes_its_document_and_partial_results(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = new_job_id()
    await queue_by_reference(store, job_id, await owned_document(blobs, TENANT, job_id), TENANT)
    await take(store)
    await put_result(store, blobs, job_id, searchable_pdf=False, markdown_file=False)
    assert stored_api.delete(f"/v1/jobs/{job_id}").status_code == 200
    assert await keys_under(blobs) == []


async def test_cancel_removes_the_owned_document_but_not_a_tenants_own_key(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    own, theirs = new_job_id(), new_job_id()
    await queue_by_reference(store, own, await owned_document(blobs, TENANT, own), TENANT)
    source = "tenants/public/in/scan.pdf"
    await blobs.put(source, b"%PDF-1.7 the tenant's own file")
    await queue_by_reference(
        store, theirs, DocumentRef(kind="blob", key=source, size=30, owned=False), TENANT
    )
    for job_id in (own, theirs):
        r = stored_api.post(f"/v1/jobs/{job_id}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert await keys_under(blobs) == [source]
    assert stored_api.delete(f"/v1/jobs/{theirs}").status_code == 200
    assert await keys_under(blobs) == [source]  # deleting the job never deletes their file


async def test_a_store_failure_never_fails_a_cancel_or_delete(
    make_client: Any, blob_settings: Settings, store: JobStore
) -> None:
    writer = open_blob_store(blob_settings)
    assert writer is not None
    try:
        jobs = [new_job_id(), new_job_id()]
        for job_id in jobs:
            document = await owned_document(writer, TENANT, job_id)
            await queue_by_reference(store, job_id, document, TENANT)
        dead = producer_on(
            make_client,
            blob_settings,
            s3_endpoint=f"http://127.0.0.1:{free_port()}",
            blob_timeout_s=1.0,
        )
        assert dead.post(f"/v1/jobs/{jobs[0]}/cancel").status_code == 200
        assert dead.delete(f"/v1/jobs/{jobs[1]}").status_code == 200
        # Left for the sweeper: the documents are still there.
        assert await writer.head(document_key(TENANT, jobs[0])) is not None
    finally:
        await writer.aclose()


async def test_the_redis_path_is_unchanged_with_a_store_configured(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await done_job(stored_api, store, searchable_pdf=True)  # finished into Redis
    assert stored_api.get(f"/v1/jobs/{job_id}").json()["result"]["page_count"] == 2
    r = stored_api.get(f"/v1/jobs/{job_id}/result?format=pdf&redirect=true")
    assert r.status_code == 200 and r.content == SEARCHABLE_PDF
    assert stored_api.get(f"/v1/jobs/{job_id}/images/p1-1.png").content == FIGURE
    assert stored_api.delete(f"/v1/jobs/{job_id}").status_code == 200
    assert await keys_under(blobs) == []


async def test_a_json_result_is_streamed_whole(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    job_id = await stored_job(stored_api, store, blobs)
    big = b'{"pad":"' + b"x" * (3 * 1024 * 1024) + b'"}'  # several chunks of any backend
    await blobs.put(result_prefix(TENANT, job_id) + RESULT_JSON, big)
    assert stored_api.get(f"/v1/jobs/{job_id}/result").content == big


async def test_a_job_submitted_over_the_inline_limit_leaves_nothing_once_deleted(
    make_client: Any, each_blob_settings: Settings, blobs: BlobStore
) -> None:
    api = producer_on(make_client, each_blob_settings, inline_max_bytes=1024)
    r = api.post("/v1/jobs", content=fake_png(8192), headers={"content-type": "image/png"})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert await keys_under(blobs) == [document_key(TENANT, job_id)]
    assert api.delete(f"/v1/jobs/{job_id}").status_code == 200
    assert await keys_under(blobs) == []
