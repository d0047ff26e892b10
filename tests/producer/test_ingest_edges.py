"""Edges of ingest: hostile headers, duplicated parts, CRLF base64 at the limit, slow clients."""

from __future__ import annotations

import base64
import random
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from litestar.testing import TestClient
from support.payloads import PNG_MAGIC, small_pdf
from support.processes import stop
from support.services import start_producer

from ocrq.shared.settings import Settings

PDF = {"content-type": "application/pdf"}


def test_a_non_utf8_request_id_is_replaced_not_a_500(api: TestClient[Any]) -> None:
    r = api.get("/healthz", headers=[(b"x-request-id", b"\xff\xfe bad")])
    assert r.status_code == 200
    assert r.headers["x-request-id"] != "" and "\ufffd" not in r.headers["x-request-id"]


def test_a_plain_request_id_is_echoed(api: TestClient[Any]) -> None:
    assert api.get("/healthz", headers={"x-request-id": "abc-123"}).headers["x-request-id"] == (
        "abc-123"
    )


def test_two_file_parts_are_refused_not_joined(api: TestClient[Any]) -> None:
    files = [("file", ("a.pdf", small_pdf(), "application/pdf"))] * 2
    r = api.post("/v1/jobs", files=files)
    assert r.status_code == 400 and "given twice" in r.json()["message"]


def test_crlf_wrapped_base64_of_a_document_at_the_limit_is_accepted(
    api: TestClient[Any], settings: Settings
) -> None:
    limit = settings.api.max_document_bytes  # 10 MB: JSON's escaped CRLFs add 736 kB
    pdf = small_pdf()
    document = pdf + b"%" * (limit - len(pdf))  # exactly at the limit; trailing comment bytes
    wrapped = base64.encodebytes(document).decode().replace("\n", "\r\n")
    r = api.post("/v1/jobs", json={"document": wrapped})
    assert r.status_code == 202, r.text[:300]


def test_max_pages_above_the_workers_limit_is_400(make_client: Any) -> None:
    api = make_client(default_max_pages=200)
    r = api.post("/v1/jobs?max_pages=500", content=small_pdf(), headers=PDF)
    assert r.status_code == 400 and "at most 200" in r.json()["message"]
    assert api.post("/v1/jobs?max_pages=200", content=small_pdf(), headers=PDF).status_code == 202


def test_a_bad_query_value_is_explained_without_python_reprs(api: TestClient[Any]) -> None:
    r = api.get("/v1/jobs/x?wait=soon")
    message = r.json()["message"]
    assert r.status_code == 400 and message.startswith("wait:")
    assert "<" not in message and "ParamType" not in message


def test_a_wrong_method_is_405_with_allow(api: TestClient[Any]) -> None:
    r = api.put("/v1/jobs")
    assert r.status_code == 405 and "POST" in r.headers["allow"]
    assert r.json()["code"] == "invalid_request"


def test_readyz_does_not_show_the_redis_error_text(make_client: Any) -> None:
    api = make_client(redis_url="redis://127.0.0.1:1/0", redis_connect_timeout_s=0.3)
    body = api.get("/readyz").json()
    assert body == {"status": "unavailable", "error": "the job store is unreachable"}


def raw_request(url: str, head: bytes, body: bytes = b"") -> tuple[bytes, float]:
    """Send a request by hand, then stall; what the server answered, and when."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(head + body)
        started = time.monotonic()
        answer = s.recv(4096)
        waited = time.monotonic() - started
        # The head and the body may come in two reads: read on until the body is whole.
        while chunk := b"" if whole_response(answer) else s.recv(4096):
            answer += chunk
        return answer, waited


def whole_response(data: bytes) -> bool:
    """Whether ``data`` holds an HTTP response's head and its Content-Length body."""
    head, sep, body = data.partition(b"\r\n\r\n")
    lengths = [ln for ln in head.lower().split(b"\r\n") if ln.startswith(b"content-length:")]
    return bool(sep) and len(body) >= (int(lengths[0].split(b":")[1]) if lengths else 0)


@pytest.mark.slow
def test_a_trickling_body_is_cut_off_with_408(settings: Settings) -> None:
    proc, url = start_producer(settings.store.redis_url, body_timeout_s="1")
    try:
        head = b"POST /v1/jobs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/pdf\r\n"
        answer, waited = raw_request(url, head + b"content-length: 1000\r\n\r\n", b"%PDF-1.4")
        assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer
        assert waited < 10
    finally:
        stop(proc)


@pytest.mark.slow
def test_headers_that_never_end_are_cut_off_with_408(live_producer: str) -> None:
    answer, waited = raw_request(live_producer, b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: ")
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer
    assert 9 < waited < 20  # HEADER_TIMEOUT_S is 10 s


def pieces(data: bytes, size: int, pause_s: float) -> Iterator[bytes]:
    """data in pieces of size bytes, a pause after each."""
    for start in range(0, len(data), size):
        yield data[start : start + size]
        time.sleep(pause_s)


@pytest.mark.parametrize(
    ("size", "pause_s"), [(100_000, 0.02), (2_000, 0.0)], ids=["paused", "back-to-back"]
)
def test_a_body_sent_in_pieces_is_stored_byte_for_byte(
    live_producer: str, sync_redis: redis.Redis, size: int, pause_s: float
) -> None:
    """Pieces the server reads one at a time, or many at once, make up the same document."""
    document = PNG_MAGIC + random.Random(7).randbytes(3 * 1024 * 1024)
    headers = {"content-type": "image/png", "content-length": str(len(document))}
    content = pieces(document, size, pause_s)
    r = httpx.post(f"{live_producer}/v1/jobs", content=content, headers=headers, timeout=60)
    assert r.status_code == 202, r.text
    job = f"ocrq:{{p0}}:job:{r.json()['id']}"
    assert sync_redis.hget(job, "payload") == document


@pytest.mark.parametrize("field", ["extract", "batch_size"])
def test_json_nested_thousands_deep_is_a_400_not_a_500(api: TestClient[Any], field: str) -> None:
    nested = b"[" * 5000 + b"]" * 5000
    body = b'{"document": "JVBERi0xLjQK", "options": {"%s": %s}}' % (field.encode(), nested)
    r = api.post("/v1/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json() == {
        "code": "invalid_request",
        "message": "the request's JSON is nested too deeply",
    }
