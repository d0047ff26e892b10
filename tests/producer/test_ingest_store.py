"""POST /v1/jobs with an object store: big inline documents go to the store before the job."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis
from litestar.testing import TestClient
from support.payloads import b64, fake_png, small_pdf

from ocrq.producer.app import create_app
from ocrq.shared.blobs import document_key
from ocrq.shared.blobs.opening import open_blob_store
from ocrq.shared.embedded import free_port
from ocrq.shared.schemas import DocumentRef
from ocrq.shared.settings import Settings, replace_settings

INLINE_MAX = 4096


@pytest.fixture
def on_store(each_blob_settings: Settings) -> Iterator[Any]:
    """Factory: a TestClient over the app on a store (file://, then SeaweedFS)."""
    clients: list[TestClient[Any]] = []

    def make(**overrides: Any) -> tuple[TestClient[Any], Settings]:
        settings = replace_settings(each_blob_settings, inline_max_bytes=INLINE_MAX, **overrides)
        client = TestClient(
            create_app(settings), base_url="http://127.0.0.1:8000", raise_server_exceptions=False
        )
        client.__enter__()
        clients.append(client)
        return client, settings

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def stored_objects(settings: Settings, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix`` in the store, read back with its own client."""

    async def read() -> dict[str, bytes]:
        blobs = open_blob_store(settings)
        assert blobs is not None
        try:
            return {info.key: await blobs.get(info.key) async for info in blobs.list(prefix)}
        finally:
            await blobs.aclose()

    return asyncio.run(read())


def job_hash(r: redis.Redis, job_id: str) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = r.hgetall(f"ocrq:{{p0}}:job:{job_id}")  # type: ignore[assignment]
    return found


def test_a_document_over_the_inline_limit_is_written_to_the_store_and_referenced(
    on_store: Any, sync_redis: redis.Redis
) -> None:
    client, settings = on_store()
    big = fake_png(INLINE_MAX * 3)
    r = client.post("/v1/jobs", json={"document": b64(big), "filename": "big.png"})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    fields = job_hash(sync_redis, job_id)
    assert b"payload" not in fields
    ref = msgspec.json.decode(fields[b"document"], type=DocumentRef)
    key = document_key("public", job_id)
    assert ref == DocumentRef(
        kind="blob",
        key=key,
        size=len(big),
        checksum="sha256:" + hashlib.sha256(big).hexdigest(),
        owned=True,
    )
    assert (fields[b"size"], fields[b"media_type"]) == (str(len(big)).encode(), b"image/png")
    assert stored_objects(settings, "documents/") == {key: big}
    entries = sync_redis.xrange("ocrq:{p0}:stream:interactive")
    assert [e[1][b"id"].decode() for e in entries] == [job_id]


def test_a_document_within_the_inline_limit_stays_in_redis(
    on_store: Any, sync_redis: redis.Redis
) -> None:
    client, settings = on_store()
    pdf = small_pdf()
    assert len(pdf) <= INLINE_MAX
    r = client.post("/v1/jobs", content=pdf, headers={"content-type": "application/pdf"})
    assert r.status_code == 202, r.text
    fields = job_hash(sync_redis, r.json()["id"])
    assert fields[b"payload"] == pdf and b"document" not in fields
    assert stored_objects(settings, "documents/") == {}


def test_a_replayed_idempotency_key_leaves_no_second_object(
    on_store: Any, sync_redis: redis.Redis
) -> None:
    client, settings = on_store()
    body = {"document": b64(fake_png(INLINE_MAX * 2))}
    first = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "once"})
    again = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "once"})
    assert (first.status_code, again.status_code) == (202, 200), again.text
    assert again.json()["id"] == first.json()["id"]
    assert list(stored_objects(settings, "documents/")) == [
        document_key("public", first.json()["id"])
    ]


def test_a_refused_enqueue_deletes_the_object_it_had_written(
    on_store: Any, sync_redis: redis.Redis
) -> None:
    client, settings = on_store(max_backlog=0)  # every lane is full
    r = client.post("/v1/jobs", json={"document": b64(fake_png(INLINE_MAX * 2))})
    assert (r.status_code, r.json()["code"]) == (503, "queue_full")
    assert stored_objects(settings, "documents/") == {}
    assert sync_redis.keys("ocrq:*job:*") == []


def test_an_unwritable_folder_store_is_503_with_retry_after_and_nothing_queued(
    make_client: Any, sync_redis: redis.Redis, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_bytes(b"not a folder")
    client = make_client(blob_url=f"file://{tmp_path / 'a-file' / 'blobs'}", inline_max_bytes=1)
    r = client.post("/v1/jobs", json={"document": b64(small_pdf())})
    assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text
    assert int(r.headers["retry-after"]) > 0
    assert sync_redis.keys("ocrq:*job:*") == []
    assert sync_redis.xrange("ocrq:{p0}:stream:interactive") == []


def test_an_unreachable_s3_store_is_503_with_retry_after_and_nothing_queued(
    blob_settings: Settings, sync_redis: redis.Redis
) -> None:
    dead = replace_settings(
        blob_settings,
        s3_endpoint=f"http://127.0.0.1:{free_port()}",
        inline_max_bytes=1,
        blob_timeout_s=3.0,
    )
    with TestClient(
        create_app(dead), base_url="http://127.0.0.1:8000", raise_server_exceptions=False
    ) as client:
        r = client.post("/v1/jobs", json={"document": b64(small_pdf())})
        assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text
        assert int(r.headers["retry-after"]) > 0
        metrics = client.get("/metrics").text
    assert sync_redis.keys("ocrq:*job:*") == []
    assert 'ocrq_blob_errors_total{op="put"}' in metrics


def test_store_calls_are_counted_in_the_metrics(on_store: Any) -> None:
    client, _ = on_store()
    size = INLINE_MAX * 2
    assert client.post("/v1/jobs", json={"document": b64(fake_png(size))}).status_code == 202
    metrics = client.get("/metrics").text
    assert f'ocrq_blob_bytes_total{{direction="write",op="put"}} {float(size)}' in metrics
    assert 'ocrq_blob_seconds_count{op="put"} 1.0' in metrics
