"""The pipeline with an object store: documents and results in SeaweedFS, Redis holds pointers.

A real producer, worker and fake vLLM on the test's Redis, and the session's SeaweedFS
(tests/support/seaweed.py) under a prefix of this test's own; no S3 mocks. The store is
killed and started again in two of the tests: they put it back up whatever happens.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.documents import png
from support.noise_scans import noise_scan_pdf
from support.stack import Stack, running_stack
from support.topology import sync_client

from ocrq.shared.blobs import open_blob_store
from ocrq.shared.settings import Settings

pytestmark = pytest.mark.slow

BIG_PAGES = 10  # ~2 MB of noise JPEGs: far over the 256 KiB inline limit


@pytest.fixture(scope="module")
def big_pdf() -> bytes:
    """A 10-page, ~2 MB scan that no compression shrinks."""
    return noise_scan_pdf(BIG_PAGES)


@pytest.fixture
def store_stack(blob_settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    """A producer and fake vLLM whose settings name the store; the test starts the workers."""
    with running_stack(blob_settings, tmp_path) as stack:
        yield stack


def store_keys(settings: Settings) -> list[str]:
    """Every key under the test's store prefix, as a listing of the bucket shows them."""

    async def listing() -> list[str]:
        store = open_blob_store(settings)
        assert store is not None
        try:
            return [info.key async for info in store.list("")]
        finally:
            await store.aclose()

    return asyncio.run(listing())


def post_raw(stack: Stack, data: bytes, **options: Any) -> httpx.Response:
    """POST /v1/jobs with the document as the raw body (options as query parameters)."""
    params = {k: str(v) for k, v in options.items()}
    return httpx.post(f"{stack.api}/v1/jobs", content=data, params=params, timeout=60)


def upload_and_queue(stack: Stack, data: bytes) -> str:
    """POST /v1/uploads, PUT the bytes to the presigned URL, queue a job on the upload."""
    r = httpx.post(f"{stack.api}/v1/uploads", json={"size": len(data)}, timeout=30)
    assert r.status_code in (200, 201), r.text
    ticket = r.json()
    assert ticket["method"] == "PUT" and ticket["max_bytes"] >= len(data)
    put = httpx.put(ticket["url"], content=data, headers=ticket["headers"], timeout=60)
    assert put.status_code in (200, 201, 204), put.text
    body = {"source": {"upload_id": ticket["upload_id"]}, "filename": "scan.pdf"}
    r = httpx.post(f"{stack.api}/v1/jobs", json=body, timeout=30)
    assert r.status_code == 202, r.text
    job_id: str = r.json()["id"]
    assert job_id == ticket["upload_id"]  # an upload's id is its job's id
    return job_id


def job_field(stack: Stack, job_id: str, name: str) -> bytes | None:
    """One raw field of the job's hash, as Redis holds it."""
    r = sync_client(stack.settings)
    try:
        value: bytes | None = r.hget(stack.keys.job(job_id), name)
        return value
    finally:
        r.close()


def assert_big_result(view: dict[str, Any]) -> None:
    """The job is done with every page of the big scan read."""
    assert view["status"] == "done", view
    assert view["progress"] == {"pages_done": BIG_PAGES, "pages_total": BIG_PAGES}
    assert view["result"]["page_count"] == BIG_PAGES


def test_a_document_over_the_inline_limit_goes_through_the_store(
    store_stack: Stack, big_pdf: bytes
) -> None:
    stack = store_stack
    assert len(big_pdf) > stack.settings.blobs.inline_max_bytes
    job_id = stack.submit(big_pdf)  # JSON base64: the producer writes it to the store
    assert job_field(stack, job_id, "payload") is None
    document = json.loads(job_field(stack, job_id, "document") or b"{}")
    assert document["kind"] == "blob" and document["size"] == len(big_pdf)
    assert document["checksum"].startswith("sha256:")
    assert document["key"] in store_keys(stack.settings)
    stack.start_worker()
    view = stack.wait(job_id)
    assert_big_result(view)
    r = httpx.get(f"{stack.api}/v1/jobs/{job_id}/result", timeout=30)
    assert r.status_code == 200 and r.json()["page_count"] == BIG_PAGES
    assert job_field(stack, job_id, "result") is None  # Redis keeps the pointer only
    assert job_field(stack, job_id, "result_ref")
    assert document["key"] not in store_keys(stack.settings)  # the worker deleted it
    stack.assert_clean()


def test_a_presigned_upload_is_queued_and_its_result_redirects(
    store_stack: Stack, big_pdf: bytes
) -> None:
    stack = store_stack
    stack.start_worker()
    job_id = upload_and_queue(stack, big_pdf)
    assert_big_result(stack.wait(job_id))
    served = httpx.get(f"{stack.api}/v1/jobs/{job_id}/result", timeout=30)
    assert served.status_code == 200
    r = httpx.get(f"{stack.api}/v1/jobs/{job_id}/result?redirect=true", timeout=30)
    assert r.status_code == 307, r.text
    fetched = httpx.get(r.headers["location"], timeout=30)
    assert fetched.status_code == 200
    assert json.loads(fetched.content) == served.json()
    stack.assert_clean()


def test_delete_removes_every_object_of_the_job(store_stack: Stack, big_pdf: bytes) -> None:
    stack = store_stack

    def objects_of(job_id: str) -> list[str]:
        return [key for key in store_keys(stack.settings) if job_id in key]

    def delete(job_id: str) -> None:
        assert httpx.delete(f"{stack.api}/v1/jobs/{job_id}", timeout=30).status_code == 200
        assert httpx.get(f"{stack.api}/v1/jobs/{job_id}", timeout=30).status_code == 404

    # Queued (no worker yet): the documents under documents/ and uploads/ go with the job.
    inline = post_raw(stack, big_pdf).json()["id"]
    uploaded = upload_and_queue(stack, big_pdf)
    assert [k.split("/")[0] for k in objects_of(inline) + objects_of(uploaded)] == [
        "documents",
        "uploads",
    ]
    for job_id in (inline, uploaded):
        delete(job_id)
        assert objects_of(job_id) == []
    # Done: its results under results/ go with it.
    stack.start_worker()
    done = post_raw(stack, big_pdf).json()["id"]
    assert_big_result(stack.wait(done))
    assert objects_of(done) and all(k.startswith("results/") for k in objects_of(done))
    delete(done)
    assert objects_of(done) == []
    assert store_keys(stack.settings) == []  # nothing of any job is left in the bucket
    stack.assert_clean()


def test_jobs_wait_out_a_store_killed_mid_job(
    store_stack: Stack, big_pdf: bytes, seaweed: Any
) -> None:
    stack = store_stack
    stack.fake.configure(latency_s=0.3, max_concurrency=1)  # ~3 s a job: the kill lands in it
    running = stack.submit(big_pdf)
    waiting = stack.submit(big_pdf)  # its document is read after the store is back
    worker = stack.start_worker(max_jobs=1)
    stack.wait_for_status(running, "processing")
    seaweed.kill()
    try:
        time.sleep(4)
        assert stack.status(running) == "processing" and stack.status(waiting) == "queued"
    finally:
        seaweed.start()
    for job_id in (running, waiting):
        assert_big_result(stack.wait(job_id, timeout_s=120))
    assert worker.jobs_done() == {running: 1, waiting: 1}
    assert "Traceback" not in worker.log()
    stack.assert_clean()


def test_ingest_answers_503_while_the_store_is_down(
    store_stack: Stack, big_pdf: bytes, seaweed: Any
) -> None:
    stack = store_stack
    ticket = httpx.post(f"{stack.api}/v1/uploads", json={}, timeout=30).json()
    httpx.put(ticket["url"], content=big_pdf, headers=ticket["headers"], timeout=60)
    source = {"source": {"upload_id": ticket["upload_id"]}}
    seaweed.kill()
    try:
        refused = post_raw(stack, big_pdf)  # over the inline limit: it must go to the store
        by_reference = httpx.post(f"{stack.api}/v1/jobs", json=source, timeout=60)
        small = post_raw(stack, png(64, 48))  # inline: Redis alone takes it
    finally:
        seaweed.start()
    for r in (refused, by_reference):
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) >= 1
        assert r.json()["code"] == "unavailable"
    assert small.status_code == 202, small.text
    stack.start_worker()
    assert stack.wait(small.json()["id"])["status"] == "done"
    accepted = post_raw(stack, big_pdf)  # the store is back: so is ingest
    assert accepted.status_code == 202, accepted.text
    queued = httpx.post(f"{stack.api}/v1/jobs", json=source, timeout=30)
    assert queued.status_code == 202, queued.text  # the refusal did not use the upload up
    for job_id in (accepted.json()["id"], queued.json()["id"]):
        assert_big_result(stack.wait(job_id))
    stack.assert_clean()
