"""POST /v1/uploads, the PUT, then POST /v1/jobs {"source": {"upload_id"}}: one job per upload."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import msgspec
import pytest
import redis
from litestar.testing import TestClient
from support.payloads import fake_png, small_pdf

from ocrq.producer.app import create_app
from ocrq.producer.jobs.uploads import producer_upload_path
from ocrq.shared.blobs import upload_key
from ocrq.shared.blobs.opening import open_blob_store
from ocrq.shared.schemas import DocumentRef
from ocrq.shared.settings import Settings, replace_settings

BASE = "http://127.0.0.1:8000"


@pytest.fixture
def on_store(each_blob_settings: Settings) -> Iterator[Any]:
    """Factory: a TestClient over the app on a store (file://, then SeaweedFS)."""
    clients: list[TestClient[Any]] = []

    def make(**overrides: Any) -> tuple[TestClient[Any], Settings]:
        settings = replace_settings(each_blob_settings, **overrides)
        client = TestClient(create_app(settings), base_url=BASE, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client, settings

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def put(client: TestClient[Any], ticket: dict[str, Any], data: bytes) -> int:
    """PUT the file where the ticket says: the producer itself, or the store (presigned)."""
    if ticket["url"].startswith(BASE):  # a folder store: through the producer
        return client.put(ticket["url"], content=data, headers=ticket["headers"]).status_code
    return httpx.put(ticket["url"], content=data, headers=ticket["headers"]).status_code


def uploaded(client: TestClient[Any], data: bytes, **request: Any) -> str:
    """An upload id whose object holds ``data``."""
    r = client.post("/v1/uploads", json=request)
    assert r.status_code == 201, r.text
    ticket = r.json()
    assert put(client, ticket, data) == 200
    upload_id: str = ticket["upload_id"]
    return upload_id


def head(settings: Settings, key: str) -> int | None:
    """The object's size in the store (None when there is none)."""

    async def run() -> int | None:
        blobs = open_blob_store(settings)
        assert blobs is not None
        try:
            info = await blobs.head(key)
            return None if info is None else info.size
        finally:
            await blobs.aclose()

    return asyncio.run(run())


def put_object(settings: Settings, key: str, data: bytes) -> None:
    async def run() -> None:
        blobs = open_blob_store(settings)
        assert blobs is not None
        try:
            await blobs.put(key, data)
        finally:
            await blobs.aclose()

    asyncio.run(run())


def test_an_upload_is_queued_as_the_job_of_its_id(on_store: Any, sync_redis: redis.Redis) -> None:
    client, settings = on_store()
    r = client.post("/v1/uploads", json={"size": 5000, "content_type": "application/pdf"})
    assert r.status_code == 201, r.text
    ticket = r.json()
    assert ticket["method"] == "PUT" and ticket["max_bytes"] == settings.blobs.max_source_bytes
    assert ticket["headers"] == {"Content-Type": "application/pdf"}
    assert ticket["expires_at"].endswith("+00:00")
    pdf = small_pdf()
    assert put(client, ticket, pdf) == 200
    job = client.post("/v1/jobs", json={"source": {"upload_id": ticket["upload_id"]}})
    assert job.status_code == 202, job.text
    job_id = ticket["upload_id"]
    assert job.json()["id"] == job_id
    fields = sync_redis.hgetall(f"ocrq:{{p0}}:job:{job_id}")
    ref = msgspec.json.decode(fields[b"document"], type=DocumentRef)
    key = upload_key("public", job_id)
    assert ref == DocumentRef(kind="blob", key=key, size=len(pdf), checksum="", owned=True)
    assert b"payload" not in fields and fields[b"media_type"] == b"application/pdf"
    assert head(settings, key) == len(pdf)


def test_a_second_job_on_one_upload_is_a_conflict(on_store: Any) -> None:
    client, _ = on_store()
    upload_id = uploaded(client, small_pdf())
    body = {"source": {"upload_id": upload_id}}
    assert client.post("/v1/jobs", json=body).status_code == 202
    again = client.post("/v1/jobs", json=body)
    assert (again.status_code, again.json()["code"]) == (409, "conflict"), again.text
    keyed = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "k"})
    assert keyed.status_code == 409


def test_an_upload_over_the_source_limit_is_413_and_deleted(on_store: Any) -> None:
    client, settings = on_store(max_source_bytes=2000)
    r = client.post("/v1/uploads", json={"size": 2001})
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large")
    ticket = client.post("/v1/uploads").json()
    key = upload_key("public", ticket["upload_id"])
    put_object(settings, key, b"%PDF-1.7\n" + b"0" * 3000)  # as a presigned PUT may
    job = client.post("/v1/jobs", json={"source": {"upload_id": ticket["upload_id"]}})
    assert (job.status_code, job.json()["code"]) == (413, "payload_too_large"), job.text
    assert head(settings, key) is None


def test_an_upload_that_is_no_document_is_415(on_store: Any) -> None:
    client, _ = on_store()
    upload_id = uploaded(client, b"just some text, " * 100)
    r = client.post("/v1/jobs", json={"source": {"upload_id": upload_id}})
    assert (r.status_code, r.json()["code"]) == (415, "unsupported_media_type"), r.text


def test_an_upload_never_put_or_malformed_is_404_and_an_empty_one_400(on_store: Any) -> None:
    client, _ = on_store()
    ticket = client.post("/v1/uploads").json()
    never = client.post("/v1/jobs", json={"source": {"upload_id": ticket["upload_id"]}})
    assert (never.status_code, never.json()["code"]) == (404, "not_found")
    assert "expired or never PUT" in never.json()["message"]
    bad = client.post("/v1/jobs", json={"source": {"upload_id": "../../etc"}})
    assert bad.status_code == 404
    empty = uploaded(client, b"")
    r = client.post("/v1/jobs", json={"source": {"upload_id": empty}})
    assert (r.status_code, r.json()["code"]) == (400, "invalid_request"), r.text


def test_uploads_need_a_store(make_client: Any) -> None:
    api = make_client(blob_url="")  # even when the suite runs on a store (OCRQ_TEST_BLOB)
    r = api.post("/v1/uploads")
    assert (r.status_code, r.json()["code"]) == (409, "conflict")
    assert "OCRQ_BLOB_URL" in r.json()["message"]
    job = api.post("/v1/jobs", json={"source": {"upload_id": "x" * 22}})
    assert (job.status_code, job.json()["code"]) == (409, "conflict")


def test_uploads_need_the_callers_key(make_client: Any, tmp_path: Any) -> None:
    client = make_client(api_keys="acme:key-a", blob_url=f"file://{tmp_path / 'blobs'}")
    assert client.post("/v1/uploads").status_code == 401
    r = client.post("/v1/uploads", headers={"Authorization": "Bearer key-a"})
    assert r.status_code == 201
    assert parse_qs(urlsplit(r.json()["url"]).query)["tenant"] == ["acme"]


def test_a_put_through_the_producer_needs_a_valid_unexpired_ticket(
    make_client: Any, settings: Settings, tmp_path: Any
) -> None:
    settings = replace_settings(settings, blob_url=f"file://{tmp_path / 'blobs'}")
    client = make_client(blob_url=settings.blobs.blob_url, max_source_bytes=1000)
    ticket = client.post("/v1/uploads").json()
    upload_id = ticket["upload_id"]
    forged = ticket["url"].replace("tenant=public", "tenant=other")
    assert client.put(forged, content=b"x").status_code == 403
    stale = producer_upload_path(settings, "public", upload_id, int(time.time()) - 1)
    r = client.put(stale, content=b"x")
    assert (r.status_code, r.json()["code"]) == (403, "forbidden")
    big = client.put(ticket["url"], content=b"%PDF" + b"0" * 1000)
    assert (big.status_code, big.json()["code"]) == (413, "payload_too_large")
    assert not [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]  # nothing half-written
    ok = client.put(ticket["url"], content=fake_png(900))
    assert ok.status_code == 200 and ok.json() == {"upload_id": upload_id, "size": 900}


def test_a_put_through_the_producer_after_its_job_is_queued_is_refused(
    make_client: Any, tmp_path: Any
) -> None:
    client = make_client(blob_url=f"file://{tmp_path / 'blobs'}")
    ticket = client.post("/v1/uploads").json()
    assert client.put(ticket["url"], content=small_pdf()).status_code == 200
    body = {"source": {"upload_id": ticket["upload_id"]}}
    assert client.post("/v1/jobs", json=body).status_code == 202
    again = client.put(ticket["url"], content=b"something else")
    assert (again.status_code, again.json()["code"]) == (409, "conflict")
