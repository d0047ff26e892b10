"""POST /v1/jobs: the three formats, limits, validation, sniffing."""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import Any

import pytest
import redis
from litestar.testing import TestClient
from support.payloads import PNG_MAGIC, b64, fake_png, small_pdf

TEN_MB = 10 * 1024 * 1024
PDF64 = b64(small_pdf())


def stored(r: redis.Redis, job_id: str, *fields: str) -> list[Any]:
    """Fields of the job hash as stored."""
    return list(r.hmget(f"ocrq:{{p0}}:job:{job_id}", list(fields)))


@pytest.mark.smoke
def test_json_submission_is_accepted_with_202_location_and_raw_payload(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    pdf = small_pdf()
    r = api.post("/v1/jobs", json={"document": b64(pdf), "filename": "a.pdf"})
    assert r.status_code == 202
    body = r.json()
    assert body["status"] == "queued" and len(body["id"]) == 22
    assert r.headers["location"] == f"/v1/jobs/{body['id']}"
    payload, media_type, status = stored(sync_redis, body["id"], "payload", "media_type", "status")
    assert payload == pdf  # raw bytes, never base64
    assert (media_type, status) == (b"application/pdf", b"queued")
    entries = sync_redis.xrange("ocrq:{p0}:stream:interactive")
    assert [e[1][b"id"].decode() for e in entries] == [body["id"]]


def test_data_uri_whitespace_and_urlsafe_base64_are_accepted(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    pdf = small_pdf("url safe")
    text = base64.urlsafe_b64encode(pdf).decode().rstrip("=")
    wrapped = "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    r = api.post("/v1/jobs", json={"document": f"data:application/pdf;base64,{wrapped}\n"})
    assert r.status_code == 202, r.text
    assert stored(sync_redis, r.json()["id"], "payload") == [pdf]


def test_multipart_submission_carries_options(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    r = api.post(
        "/v1/jobs",
        files={"file": ("scan.pdf", small_pdf(), "application/pdf")},
        data={"batch_size": "4", "dpi": "200", "lane": "batch"},
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    options, filename, lane = stored(sync_redis, job_id, "options", "filename", "lane")
    assert json.loads(options)["batch_size"] == 4 and json.loads(options)["dpi"] == 200
    assert (filename, lane) == (b"scan.pdf", b"batch")
    assert sync_redis.xlen("ocrq:{p0}:stream:batch") == 1


def test_raw_body_takes_options_from_the_query(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    r = api.post(
        "/v1/jobs?max_pages=3&text_layer=off&filename=x.pdf",
        content=small_pdf(),
        headers={"content-type": "application/pdf"},
    )
    assert r.status_code == 202, r.text
    options = json.loads(stored(sync_redis, r.json()["id"], "options")[0])
    assert options["max_pages"] == 3 and options["text_layer"] == "off"


def test_a_profile_for_the_served_model_is_accepted(make_client: Any) -> None:
    vllm = make_client(
        engine="vllm", vllm_url="http://vllm:8000", vllm_model="deepseek-ai/DeepSeek-OCR"
    )
    r = vllm.post("/v1/jobs?profile=deepseek-ocr", content=small_pdf())
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(
    ("engine", "model", "profile", "says"),
    [
        ("local", "baidu/Unlimited-OCR", "unlimited-ocr", "needs the vLLM engine"),
        ("vllm", "baidu/Unlimited-OCR", "deepseek-ocr", "the engine serves baidu/Unlimited-OCR"),
    ],
)
def test_a_profile_the_engine_cannot_run_is_refused_with_400(
    make_client: Any, engine: str, model: str, profile: str, says: str
) -> None:
    client = make_client(engine=engine, vllm_url="http://vllm:8000", vllm_model=model)
    r = client.post(f"/v1/jobs?profile={profile}", content=small_pdf())
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    assert says in r.json()["message"]


def test_languages_the_local_engine_ships_are_accepted(make_client: Any) -> None:
    r = make_client(engine="local").post("/v1/jobs?languages=eng%2Bdeu", content=small_pdf())
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(
    ("engine", "languages", "says"),
    [
        ("local", "eng+rus", "rus not available; the local engine reads deu, eng, fra"),
        ("vllm", "eng", "only the local (Tesseract) engine takes languages"),
        ("rapidocr", "eng", "only the local (Tesseract) engine takes languages"),
    ],
)
def test_languages_the_engine_cannot_use_are_refused_with_400(
    make_client: Any, engine: str, languages: str, says: str
) -> None:
    client = make_client(engine=engine, vllm_url="http://vllm:8000")
    r = client.post("/v1/jobs", params={"languages": languages}, content=small_pdf())
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    assert says in r.json()["message"]


def test_the_type_comes_from_the_bytes_not_the_declared_type(
    api: TestClient[Any], sync_redis: redis.Redis
) -> None:
    png = fake_png(64)
    r = api.post("/v1/jobs", content=png, headers={"content-type": "application/pdf"})
    assert r.status_code == 202
    assert stored(sync_redis, r.json()["id"], "media_type") == [b"image/png"]


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        ({"document": "%%%not base64%%%"}, "invalid_base64", "base64"),
        ({"document": b64(b"plain text, not a document")}, "unsupported_media_type", "PDF"),
        ({"doc": "AAAA"}, "invalid_request", "doc"),
        ({"document": "AAAA", "options": {"batch_size": 99}}, "invalid_request", "batch_size"),
        ({"document": "AAAA", "options": {"lane": "express"}}, "invalid_request", "lane"),
        ({"document": 12}, "invalid_request", "document"),
        (
            {"document": b64(small_pdf()), "options": {"profile": "ocrx"}},
            "invalid_request",
            "profile",
        ),
    ],
)
def test_bad_json_bodies_get_a_coded_error_naming_the_problem(
    api: TestClient[Any], body: dict[str, Any], code: str, needle: str
) -> None:
    r = api.post("/v1/jobs", json=body)
    expected = {"invalid_request": 400, "invalid_base64": 400, "unsupported_media_type": 415}
    assert r.status_code == expected[code], r.text
    assert r.json()["code"] == code
    assert needle in r.json()["message"]


def test_malformed_json_is_rejected_with_400(api: TestClient[Any]) -> None:
    r = api.post("/v1/jobs", content=b'{"document": ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


def test_unknown_content_type_is_rejected_with_415(api: TestClient[Any]) -> None:
    r = api.post("/v1/jobs", content=b"hello", headers={"content-type": "text/plain"})
    assert r.status_code == 415 and r.json()["code"] == "unsupported_media_type"


@pytest.mark.parametrize(
    "declared", ["application/octet-stream", "application/x-www-form-urlencoded", None]
)
def test_a_raw_body_under_a_generic_type_is_accepted_by_its_bytes(
    api: TestClient[Any], declared: str | None
) -> None:
    headers = {"content-type": declared} if declared else {}
    r = api.post("/v1/jobs", content=small_pdf(), headers=headers)
    assert r.status_code == 202, r.text
    job = api.get(f"/v1/jobs/{r.json()['id']}").json()
    assert job["media_type"] == "application/pdf"


def test_a_form_body_that_is_no_document_is_refused_with_415(api: TestClient[Any]) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    r = api.post("/v1/jobs", content=b"name=value&other=1", headers=form)
    assert r.status_code == 415 and r.json()["code"] == "unsupported_media_type"


def test_multipart_without_a_file_part_is_rejected(api: TestClient[Any]) -> None:
    r = api.post("/v1/jobs", files={"other": ("x.pdf", small_pdf(), "application/pdf")})
    assert r.status_code == 400 and "file" in r.json()["message"]


def test_a_multipart_body_over_the_parsers_limits_is_400_not_500(api: TestClient[Any]) -> None:
    many = {f"f{i}": "x" for i in range(40)}  # more parts than any real submission has
    r = api.post("/v1/jobs", files={"file": ("a.pdf", small_pdf(), "application/pdf")}, data=many)
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    long_name = "n" * 10_000  # a part header far over the parser's limit
    r = api.post("/v1/jobs", files={long_name: ("a.pdf", small_pdf(), "application/pdf")})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


def test_unknown_query_option_is_rejected_by_name(api: TestClient[Any]) -> None:
    r = api.post(
        "/v1/jobs?dpis=300", content=small_pdf(), headers={"content-type": "application/pdf"}
    )
    assert r.status_code == 400 and "dpis" in r.json()["message"]


# --- the 10 MB limit, in each format -------------------------------------------------


def submit_as(api: TestClient[Any], fmt: str, data: bytes) -> Any:
    """Submit ``data`` in one of the three formats."""
    if fmt == "json":
        return api.post("/v1/jobs", json={"document": b64(data)})
    if fmt == "multipart":
        return api.post("/v1/jobs", files={"file": ("big.png", data, "image/png")})
    return api.post("/v1/jobs", content=data, headers={"content-type": "image/png"})


@pytest.mark.parametrize("fmt", ["json", "multipart", "raw"])
def test_exactly_10_mb_is_accepted(api: TestClient[Any], sync_redis: redis.Redis, fmt: str) -> None:
    r = submit_as(api, fmt, fake_png(TEN_MB))
    assert r.status_code == 202, r.text
    assert stored(sync_redis, r.json()["id"], "size") == [str(TEN_MB).encode()]


@pytest.mark.parametrize("fmt", ["json", "multipart", "raw"])
def test_10_mb_plus_one_byte_is_rejected_with_413(
    api: TestClient[Any], sync_redis: redis.Redis, fmt: str
) -> None:
    r = submit_as(api, fmt, fake_png(TEN_MB + 1))
    assert r.status_code == 413 and r.json()["code"] == "payload_too_large"
    assert sync_redis.xlen("ocrq:{p0}:stream:interactive") == 0
    assert not sync_redis.keys("ocrq:{p0}:job:*")


def test_an_unbounded_chunked_body_is_cut_off_with_413(live_producer: str) -> None:
    host, port = live_producer.removeprefix("http://").split(":")
    chunk = PNG_MAGIC + b"\0" * (1024 * 1024 - len(PNG_MAGIC))
    sent_mb, reply = 0, b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: image/png\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.setblocking(False)
        while sent_mb < 200 and not reply:  # 200 MB if nobody stops reading
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent_mb += 1
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                pass
            reply = read_some(sock)
        sock.setblocking(True)
        reply += read_some(sock, wait=True)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert sent_mb < 40  # the server stopped reading just past the limit (plus socket buffers)


def read_some(sock: socket.socket, wait: bool = False) -> bytes:
    """Whatever the server has answered so far."""
    if wait:
        sock.settimeout(10)
    try:
        return sock.recv(65536)
    except (BlockingIOError, ConnectionResetError, TimeoutError):
        time.sleep(0.01)
        return b""


def test_a_declared_content_length_over_the_limit_is_refused_before_reading(
    api: TestClient[Any],
) -> None:
    r = api.post(
        "/v1/jobs",
        content=fake_png(TEN_MB + 100_000),
        headers={"content-type": "image/png", "content-length": str(TEN_MB + 100_000)},
    )
    assert r.status_code == 413
