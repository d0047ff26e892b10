"""Batches with an object store: big documents go to the store before their jobs, results are
read from it (JSON Lines, ZIP), cancel and delete remove the jobs' objects, and an
``output_prefix`` must lie under the tenant's prefixes."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import TestClient
from support.payloads import b64, fake_png, small_pdf
from support.stored_jobs import finish_into_store, keys_under
from support.structured_results import FIGURE, SEARCHABLE_PDF

from ocrq.shared.blobs import BlobStore, document_key, open_blob_store, result_prefix
from ocrq.shared.embedded import free_port
from ocrq.shared.record import Field
from ocrq.shared.settings import Settings
from ocrq.shared.store import JobStore

TENANT = "public"  # the open API's tenant
INLINE_MAX = 4096
BIG = fake_png(4 * INLINE_MAX)  # over INLINE_MAX: it goes to the store
SMALL = small_pdf()  # under it: inline in Redis


@pytest.fixture
async def blobs(each_blob_settings: Settings) -> AsyncIterator[BlobStore]:
    """The test's store, opened as the producer opens it."""
    opened = open_blob_store(each_blob_settings)
    assert opened is not None
    yield opened
    await opened.aclose()


def producer_on(make_client: Any, on: Settings, **overrides: Any) -> TestClient[Any]:
    """An open API on the store ``on`` names, documents over INLINE_MAX going there."""
    named = {
        "blob_url": on.blobs.blob_url,
        "s3_endpoint": on.blobs.s3_endpoint,
        "inline_max_bytes": INLINE_MAX,
    }
    client: TestClient[Any] = make_client(**(named | overrides))
    return client


@pytest.fixture
def stored_api(make_client: Any, each_blob_settings: Settings) -> TestClient[Any]:
    """The API on the test's store."""
    return producer_on(make_client, each_blob_settings)


def submit(api: TestClient[Any], *documents: tuple[str, bytes], query: str = "") -> Any:
    """POST a JSON batch of (filename, bytes); the response."""
    body = {"documents": [{"document": b64(data), "filename": name} for name, data in documents]}
    return api.post(f"/v1/batches{query}", json=body)


async def test_a_big_document_goes_to_the_store_before_its_job(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    assert len(BIG) > INLINE_MAX > len(SMALL)
    r = submit(stored_api, ("big.png", BIG), ("small.pdf", SMALL))
    assert r.status_code == 202, r.text
    big_id, small_id = (f["id"] for f in r.json()["accepted"])
    big = await store.read(big_id, (Field.PAYLOAD, Field.DOCUMENT, Field.SIZE))
    assert big.payload is None and big.document is not None and big.size == len(BIG)
    assert big.document.key == document_key(TENANT, big_id) and big.document.owned
    assert big.document.checksum == "sha256:" + hashlib.sha256(BIG).hexdigest()
    assert await blobs.get(big.document.key) == BIG
    small = await store.read(small_id, (Field.PAYLOAD, Field.DOCUMENT))
    assert small.payload == SMALL and small.document is None
    assert await keys_under(blobs) == [big.document.key]


async def test_the_store_down_refuses_only_the_documents_it_should_hold(
    make_client: Any, blob_settings: Settings, store: JobStore
) -> None:
    dead = producer_on(
        make_client,
        blob_settings,
        s3_endpoint=f"http://127.0.0.1:{free_port()}",
        blob_timeout_s=1.0,
    )
    r = submit(dead, ("big.png", BIG), ("small.pdf", SMALL))
    assert r.status_code == 202, r.text
    assert [f["filename"] for f in r.json()["accepted"]] == ["small.pdf"]
    (refused,) = r.json()["rejected"]
    assert refused["filename"] == "big.png" and refused["code"] == "unavailable"
    alone = submit(dead, ("big.png", BIG))
    assert alone.status_code == 503 and alone.json()["code"] == "unavailable"


async def stored_batch(
    api: TestClient[Any], store: JobStore, blobs: BlobStore, query: str = ""
) -> str:
    """A batch of two reports, both finished with their results in the store; its id."""
    r = submit(api, ("Report.pdf", SMALL), ("Report.pdf", BIG), query=query)
    assert r.status_code == 202, r.text
    for _ in range(2):
        await finish_into_store(
            store, blobs, searchable_pdf="searchable_pdf" in query, lane="batch"
        )
    batch_id: str = r.json()["id"]
    return batch_id


async def test_batch_results_are_read_from_the_store(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    batch_id = await stored_batch(stored_api, store, blobs, "?searchable_pdf=true")
    r = stored_api.get(f"/v1/batches/{batch_id}/results")
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert [line["result"]["page_count"] for line in lines] == [2, 2]
    r = stored_api.get(f"/v1/batches/{batch_id}/results?formats=markdown,json,pdf")
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    assert {"Report.md", "Report.json", "Report.pdf", "Report/images/p1-1.png"} <= set(
        archive.namelist()
    )
    assert archive.read("Report/images/p1-1.png") == FIGURE
    assert archive.read("Report-2.pdf") == SEARCHABLE_PDF
    assert archive.read("Report.md").decode().startswith("# Quarterly Report")


async def test_a_result_gone_from_the_store_is_that_jobs_error_in_the_results(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    batch_id = await stored_batch(stored_api, store, blobs)
    first = stored_api.get(f"/v1/batches/{batch_id}/results").text.splitlines()[0]
    await blobs.delete_prefix(result_prefix(TENANT, json.loads(first)["id"]))
    lines = [
        json.loads(x) for x in stored_api.get(f"/v1/batches/{batch_id}/results").text.splitlines()
    ]
    assert lines[0]["result"] is None and lines[0]["error"]["code"] == "not_found"
    assert lines[1]["result"]["page_count"] == 2
    r = stored_api.get(f"/v1/batches/{batch_id}/results?format=zip")
    assert set(zipfile.ZipFile(io.BytesIO(r.content)).namelist()) == {
        "Report.md",
        "Report/images/p1-1.png",
        "index.jsonl",
    }


async def test_batch_results_with_the_store_unreachable_are_503(
    make_client: Any, blob_settings: Settings, store: JobStore
) -> None:
    writer = open_blob_store(blob_settings)
    assert writer is not None
    try:
        batch_id = await stored_batch(producer_on(make_client, blob_settings), store, writer)
    finally:
        await writer.aclose()
    dead = producer_on(
        make_client,
        blob_settings,
        s3_endpoint=f"http://127.0.0.1:{free_port()}",
        blob_timeout_s=1.0,
    )
    for query in ("", "?format=zip"):
        r = dead.get(f"/v1/batches/{batch_id}/results{query}")
        assert r.status_code == 503 and r.headers["retry-after"] == "5", r.text


async def test_deleting_a_batch_leaves_nothing_of_it_in_the_bucket(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    r = submit(stored_api, ("a.png", BIG), ("b.png", BIG), ("c.png", BIG))
    batch_id = r.json()["id"]
    await finish_into_store(store, blobs, lane="batch")  # one done, two still queued
    assert len(await keys_under(blobs)) == 3 + 3  # three documents, one result's three files
    assert stored_api.delete(f"/v1/batches/{batch_id}").status_code == 200
    assert await keys_under(blobs) == []


async def test_cancelling_a_batch_removes_its_queued_documents(
    stored_api: TestClient[Any], store: JobStore, blobs: BlobStore
) -> None:
    r = submit(stored_api, ("a.png", BIG), ("b.png", BIG))
    batch_id = r.json()["id"]
    done = await finish_into_store(store, blobs, lane="batch")
    assert stored_api.post(f"/v1/batches/{batch_id}/cancel").json()["cancelled"] == 1
    left = await keys_under(blobs)
    # The done job's result stays (and its document, which its worker removes); the
    # cancelled job's document is gone.
    assert all(key.startswith(result_prefix(TENANT, done)) or done in key for key in left)


@pytest.mark.parametrize(
    ("prefix", "status"),
    [
        ("tenants/public/out/", 202),
        ("tenants/acme/out/", 403),
        ("results/public/", 403),
        ("tenants/public/../acme/", 400),
        ("/tenants/public/out/", 400),
    ],
)
async def test_an_output_prefix_must_lie_under_the_tenants_prefixes(
    stored_api: TestClient[Any], prefix: str, status: int
) -> None:
    r = submit(stored_api, ("a.pdf", SMALL), query=f"?output_prefix={prefix}")
    assert r.status_code == status, r.text
    if status == 202:
        batch = stored_api.get(f"/v1/batches/{r.json()['id']}").json()
        assert batch["options"]["output_prefix"] == prefix


def test_an_output_prefix_needs_a_store(api: TestClient[Any]) -> None:
    r = submit(api, ("a.pdf", SMALL), query="?output_prefix=tenants/public/out/")
    assert r.status_code == 400 and "OCRQ_BLOB_URL" in r.json()["message"]
