"""POST /v1/jobs {"source": {"key" | "url"}}: the tenant's own objects and URLs, checked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import redis
from litestar.testing import TestClient
from support.payloads import b64, small_pdf

from ocrq.producer.app import create_app
from ocrq.shared.blobs.opening import open_blob_store
from ocrq.shared.schemas import DocumentRef
from ocrq.shared.settings import Settings, replace_settings

PUBLIC_ADDRESS = "93.184.216.34"  # an IP literal: checked with no DNS lookup


@pytest.fixture
def on_store(each_blob_settings: Settings) -> Iterator[Any]:
    """Factory: a TestClient over the app on a store (file://, then SeaweedFS)."""
    clients: list[TestClient[Any]] = []

    def make(**overrides: Any) -> tuple[TestClient[Any], Settings]:
        settings = replace_settings(each_blob_settings, **overrides)
        client = TestClient(
            create_app(settings), base_url="http://127.0.0.1:8000", raise_server_exceptions=False
        )
        client.__enter__()
        clients.append(client)
        return client, settings

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def put_object(settings: Settings, key: str, data: bytes) -> None:
    async def run() -> None:
        blobs = open_blob_store(settings)
        assert blobs is not None
        try:
            await blobs.put(key, data)
        finally:
            await blobs.aclose()

    asyncio.run(run())


def full_key(settings: Settings, relative: str) -> str:
    return settings.blobs.blob_url.rstrip("/") + "/" + relative


def document_of(r: redis.Redis, job_id: str) -> tuple[DocumentRef, dict[bytes, bytes]]:
    fields: dict[bytes, bytes] = r.hgetall(f"ocrq:{{p0}}:job:{job_id}")  # type: ignore[assignment]
    return msgspec.json.decode(fields[b"document"], type=DocumentRef), fields


def test_a_key_under_the_tenants_prefix_is_queued_by_reference(
    on_store: Any, sync_redis: redis.Redis
) -> None:
    client, settings = on_store()
    pdf = small_pdf()
    put_object(settings, "tenants/public/in/scan.pdf", pdf)
    body = {"source": {"key": full_key(settings, "tenants/public/in/scan.pdf")}, "options": {}}
    r = client.post("/v1/jobs?lane=batch", json=body)
    assert r.status_code == 202, r.text
    ref, fields = document_of(sync_redis, r.json()["id"])
    assert ref == DocumentRef(
        kind="blob", key="tenants/public/in/scan.pdf", size=len(pdf), owned=False
    )
    assert (fields[b"media_type"], fields[b"filename"], fields[b"lane"]) == (
        b"application/pdf",
        b"scan.pdf",
        b"batch",
    )


def test_a_key_outside_the_tenants_prefixes_is_forbidden(on_store: Any) -> None:
    client, settings = on_store(source_prefixes="tenants/{tenant}/,shared/{tenant}")
    put_object(settings, "tenants/other/scan.pdf", small_pdf())
    for key in (
        full_key(settings, "tenants/other/scan.pdf"),
        full_key(settings, "tenants/publicity/scan.pdf"),
        "s3://another-bucket/tenants/public/scan.pdf",
    ):
        r = client.post("/v1/jobs", json={"source": {"key": key}})
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), key
        assert full_key(settings, "shared/public/") in r.json()["message"]
    sneaky = full_key(settings, "tenants/public/../other/scan.pdf")
    r = client.post("/v1/jobs", json={"source": {"key": sneaky}})
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request")
    missing = client.post(
        "/v1/jobs", json={"source": {"key": full_key(settings, "tenants/public/no.pdf")}}
    )
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")


def test_a_source_names_exactly_one_place(on_store: Any) -> None:
    client, _ = on_store()
    both = {"upload_id": "x" * 22, "url": f"https://{PUBLIC_ADDRESS}/a.pdf"}
    for source in ({}, both):
        r = client.post("/v1/jobs", json={"source": source})
        assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), source
        assert "exactly one" in r.json()["message"]
    typo = client.post("/v1/jobs", json={"source": {"path": "x"}})
    assert typo.status_code == 400 and "path" in typo.json()["message"]


def test_a_url_source_is_checked_like_a_webhook_and_left_for_the_worker(
    api: TestClient[Any], make_client: Any, sync_redis: redis.Redis
) -> None:
    for url in ("https://127.0.0.1/a.pdf", "https://10.1.2.3/a.pdf", "http://{PUBLIC_ADDRESS}/a"):
        r = api.post(
            "/v1/jobs", json={"source": {"url": url.format(PUBLIC_ADDRESS=PUBLIC_ADDRESS)}}
        )
        assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), url
        assert r.json()["message"].startswith("source.url:")
    ok = api.post("/v1/jobs", json={"source": {"url": f"https://{PUBLIC_ADDRESS}/in/a%20b.pdf"}})
    assert ok.status_code == 202, ok.text
    ref, fields = document_of(sync_redis, ok.json()["id"])
    assert ref == DocumentRef(kind="url", url=f"https://{PUBLIC_ADDRESS}/in/a%20b.pdf", owned=False)
    assert (fields[b"media_type"], fields[b"filename"]) == (b"", b"a b.pdf")
    loopback = make_client(webhook_allow_private=True)
    r = loopback.post("/v1/jobs", json={"source": {"url": "http://127.0.0.1:9/doc.pdf"}})
    assert r.status_code == 202, r.text


def test_sources_may_have_more_pages_than_inline_documents(
    on_store: Any, sync_redis: redis.Redis
) -> None:
    client, settings = on_store(default_max_pages=10, max_source_pages=50)
    put_object(settings, "tenants/public/long.pdf", small_pdf())
    source = {"key": full_key(settings, "tenants/public/long.pdf")}
    r = client.post("/v1/jobs", json={"source": source, "options": {"max_pages": 50}})
    assert r.status_code == 202, r.text
    over = client.post("/v1/jobs", json={"source": source, "options": {"max_pages": 51}})
    assert over.status_code == 400 and "OCRQ_MAX_SOURCE_PAGES" in over.json()["message"]
    inline = client.post(
        "/v1/jobs", json={"document": b64(small_pdf()), "options": {"max_pages": 11}}
    )
    assert inline.status_code == 400 and "OCRQ_DEFAULT_MAX_PAGES" in inline.json()["message"]


def test_an_output_prefix_must_lie_under_the_tenants_prefixes(
    on_store: Any, make_client: Any
) -> None:
    client, _ = on_store()
    api = make_client(blob_url="")
    document = b64(small_pdf())
    ok = client.post(
        "/v1/jobs", json={"document": document, "options": {"output_prefix": "tenants/public/out/"}}
    )
    assert ok.status_code == 202, ok.text
    out = client.post(
        "/v1/jobs", json={"document": document, "options": {"output_prefix": "tenants/x/"}}
    )
    assert (out.status_code, out.json()["code"]) == (403, "forbidden")
    dots = client.post(
        "/v1/jobs",
        json={"document": document, "options": {"output_prefix": "tenants/public/../x/"}},
    )
    assert dots.status_code == 400
    none = api.post(
        "/v1/jobs", json={"document": document, "options": {"output_prefix": "tenants/public/"}}
    )
    assert none.status_code == 400 and "OCRQ_BLOB_URL" in none.json()["message"]


def test_a_big_json_document_that_mentions_source_is_still_a_document(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    pdf = small_pdf("source") + b"%" + b'"source"' * 20_000
    r = api.post("/v1/jobs", json={"document": b64(pdf), "filename": "source.pdf"})
    assert r.status_code == 202, r.text
    small = api.post("/v1/jobs", json={"filename": "source", "document": b64(small_pdf())})
    assert small.status_code == 202, small.text
