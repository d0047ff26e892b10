# ruff: noqa: E501 - the corpus is a table: one case a line reads best
"""A corpus of hostile and broken input: each gets its documented code, never a 500 or a dead worker.

Requests the producer must refuse are checked at ingest (status and code). Documents that
are well-formed enough to be accepted go through a real worker and must end with the job
error the README documents for them (or done, where the file is odd but readable).
"""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import zipfile
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from support.documents import (
    bomb_png,
    cyclic_pdf,
    encrypted_pdf,
    garbage_pdf,
    lying_count_pdf,
    multipage_tiff,
    png,
    sized_pdf,
    text_pdf,
    truncated_pdf,
    zero_page_pdf,
)
from support.stack import Stack

from ocrq.producer.jobs.views import new_job_id
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.schemas import JobOptions
from ocrq.shared.store import JobStore, now_ms

PDF = {"content-type": "application/pdf"}
JSON = {"content-type": "application/json"}
Send = Callable[[httpx.Client], httpx.Response]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def post(body: bytes | str, headers: dict[str, str] | None = None, query: str = "") -> Send:
    content = body.encode() if isinstance(body, str) else body
    return lambda c: c.post(f"/v1/jobs{query}", content=content, headers=headers or {})


def post_json(document: Any, **extra: Any) -> Send:
    return lambda c: c.post("/v1/jobs", json={"document": document, **extra})


def form(files: list[tuple[str, Any]], data: dict[str, str] | None = None) -> Send:
    return lambda c: c.post("/v1/jobs", files=files, data=data or {})


def deep_json(depth: int) -> bytes:
    return b'{"document": ' + b"[" * depth + b"]" * depth + b"}"


def on_a_batch(suffix: str, method: str = "get") -> Send:
    """A request to a route of a real batch whose id is followed by suffix."""

    def send(c: httpx.Client) -> httpx.Response:
        r = c.post("/v1/batches", json={"documents": [{"document": b64(text_pdf())}]})
        assert r.status_code == 202, r.text
        return c.request(method, f"/v1/batches/{r.json()['id']}{suffix}")

    return send


def on_a_forged_job_id(suffix: str, method: str = "get") -> Send:
    """A request for a job id that makes the job's key the Redis key of an Idempotency-Key
    ("ocrq:{p0}:idem:public:<key>"), a string that holds another job's id."""
    forged = "p0}:idem:public:." + "R" * 22

    def send(c: httpx.Client) -> httpx.Response:
        key = {"idempotency-key": "}:job:" + forged}
        assert c.post("/v1/jobs", content=text_pdf(), headers={**PDF, **key}).status_code in (
            200,
            202,
        )
        return c.request(method, f"/v1/jobs/{forged}{suffix}")

    return send


def zip_with_a_corrupt_member(method: int) -> bytes:
    """Three PDFs in a ZIP, the second with its compressed data damaged (zlib.error or
    LZMAError when read, not only a CRC mismatch)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for i in range(3):
            archive.writestr(f"scan-{i}.pdf", text_pdf(words=[f"page {i}"] * 400))
    info = zipfile.ZipFile(io.BytesIO(out.getvalue())).getinfo("scan-1.pdf")
    body = bytearray(out.getvalue())
    header = body[info.header_offset : info.header_offset + 30]
    start = info.header_offset + 30 + int.from_bytes(header[26:28], "little")
    start += int.from_bytes(header[28:30], "little")
    for i in range(start + 9, start + 25):
        body[i] ^= 0xFF
    return bytes(body)


def big_png_header_bmp() -> bytes:
    """A BMP header announcing 100000 x 100000 pixels, with almost no pixels after it."""
    import struct

    info = struct.pack("<IiiHHIIiiII", 40, 100_000, 100_000, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return (
        struct.pack("<2sIHHI", b"BM", 14 + len(info) + 16, 0, 0, 14 + len(info)) + info + b"\0" * 16
    )


def polyglot() -> bytes:
    """A PNG whose first kilobyte also holds a PDF header (sniffed as PDF, read as PDF)."""
    return png(40, 40)[:200] + b"%PDF-1.4\n" + png(40, 40)[200:]


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def jpeg_bytes() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (300, 200), (120, 30, 30)).save(out, "JPEG")
    return out.getvalue()


def webp_bytes() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (300, 200), (20, 130, 30)).save(out, "WEBP")
    return out.getvalue()


# (name, request, HTTP status, code) — refused at ingest.
INGEST: list[tuple[str, Send, int, str]] = [
    ("empty raw body", post(b"", PDF), 400, "invalid_request"),
    ("plain text", post("hello, world", {"content-type": "text/plain"}), 415, "unsupported_media_type"),
    ("text sent as a PDF", post("not a pdf at all", PDF), 415, "unsupported_media_type"),
    ("wrong magic, octet-stream", post(b"\x00\x01\x02\x03" * 64), 415, "unsupported_media_type"),
    ("malformed JSON", post('{"document": ', JSON), 400, "invalid_request"),
    ("deeply nested JSON", post(deep_json(100_000), JSON), 400, "invalid_request"),
    ("JSON with an unknown field", post_json(b64(text_pdf()), colour="red"), 400, "invalid_request"),
    ("JSON document not a string", post_json(12345), 400, "invalid_request"),
    ("JSON empty document", post_json(""), 400, "invalid_request"),
    ("base64 with junk characters", post_json("JVBE*&^%$#@!"), 400, "invalid_base64"),
    ("base64 with a dangling character", post_json("JVBERi0xLjQK" + "Q"), 400, "invalid_base64"),
    ("non-ASCII in base64", post_json("JVBERi0x\u00e9LjQK"), 400, "invalid_base64"),
    ("base64 of text", post_json(b64(b"just words")), 415, "unsupported_media_type"),
    ("raw body over 10 MB", post(b"%PDF-1.4\n" + b"0" * (10 * 2**20 + 1), PDF), 413, "payload_too_large"),
    ("JSON over 10 MB", post_json(b64(b"%PDF-1.4\n" + b"0" * (10 * 2**20))), 413, "payload_too_large"),
    ("multipart without a file part", form([("other", ("a.pdf", text_pdf()))]), 400, "invalid_request"),
    ("multipart with two file parts", form([("file", ("a.pdf", text_pdf()))] * 2), 400, "invalid_request"),
    ("multipart with an empty file", form([("file", ("a.pdf", b""))]), 400, "invalid_request"),
    ("multipart without a boundary", post(b"--x\r\n", {"content-type": "multipart/form-data"}), 400, "invalid_request"),
    ("multipart cut off", post(b"--xyz\r\nContent-Disposition: form-data; name=\"file\"", {"content-type": "multipart/form-data; boundary=xyz"}), 400, "invalid_request"),
    ("unknown option", post(text_pdf(), PDF, "?colour=red"), 400, "invalid_request"),
    ("dpi out of range", post(text_pdf(), PDF, "?dpi=4000"), 400, "invalid_request"),
    ("dpi not a number", post(text_pdf(), PDF, "?dpi=high"), 400, "invalid_request"),
    ("unknown lane", post(text_pdf(), PDF, "?lane=express"), 400, "invalid_request"),
    ("unknown profile", post(text_pdf(), PDF, "?profile=gpt-ocr"), 400, "invalid_request"),
    ("max_pages over the cap", post(text_pdf(), PDF, "?max_pages=5000"), 400, "invalid_request"),
    ("filename over 255 characters", post_json(b64(text_pdf()), filename="x" * 300), 400, "invalid_request"),
    ("Idempotency-Key over 200 characters", post(text_pdf(), {**PDF, "idempotency-key": "k" * 201}), 400, "invalid_request"),
    ("long-poll over the limit", lambda c: c.get("/v1/jobs/x?wait=999"), 400, "invalid_request"),
    ("an id with odd characters", lambda c: c.get("/v1/jobs/%2e%2e%2f%00"), 404, "not_found"),
    ("an unknown job's result", lambda c: c.get("/v1/jobs/nope/result"), 404, "not_found"),
    ("a wrong method", lambda c: c.put("/v1/jobs"), 405, "invalid_request"),
    ("a batch id naming its job list", on_a_batch(":jobs"), 404, "not_found"),
    ("a batch id naming its job list, results", on_a_batch(":jobs/results?format=zip"), 404, "not_found"),
    ("a batch id naming its job list, events", on_a_batch(":jobs/events"), 404, "not_found"),
    ("a batch id naming its job list, cancel", on_a_batch(":jobs/cancel", "post"), 404, "not_found"),
    ("a batch id naming its job list, delete", on_a_batch(":jobs", "delete"), 404, "not_found"),
    ("a job id shaped to name another key", on_a_forged_job_id(""), 404, "not_found"),
    ("a job id shaped to name another key, result", on_a_forged_job_id("/result"), 404, "not_found"),
    ("a job id shaped to name another key, cancel", on_a_forged_job_id("/cancel", "post"), 404, "not_found"),
    ("a batch id with odd characters", lambda c: c.get("/v1/batches/%2e%2e%2f%00"), 404, "not_found"),
    ("multipart filename field over 255 characters", form([("file", ("a.pdf", text_pdf()))], {"filename": "x" * 200_000}), 400, "invalid_request"),
    ("multipart file part named over 255 characters", form([("file", ("y" * 300 + ".pdf", text_pdf()))]), 400, "invalid_request"),
]  # fmt: skip

# (name, ZIP body, the code each member gets: None when accepted) — a 202 naming every file.
ZIP_BATCHES: list[tuple[str, bytes, dict[str, str | None]]] = [
    ("a ZIP member with corrupt DEFLATE data", zip_with_a_corrupt_member(zipfile.ZIP_DEFLATED), {"scan-0.pdf": None, "scan-1.pdf": "corrupt_document", "scan-2.pdf": None}),
    ("a ZIP member with corrupt LZMA data", zip_with_a_corrupt_member(zipfile.ZIP_LZMA), {"scan-0.pdf": None, "scan-1.pdf": "corrupt_document", "scan-2.pdf": None}),
]  # fmt: skip

# (name, document, the outcomes allowed: "done" or a job error code) — accepted, then run.
DOCUMENTS: list[tuple[str, bytes, set[str]]] = [
    ("truncated PDF", truncated_pdf(), {"corrupt_document"}),
    ("encrypted PDF", encrypted_pdf(), {"encrypted_document"}),
    ("zero-page PDF", zero_page_pdf(), {"corrupt_document"}),
    ("junk after a PDF header", garbage_pdf(), {"corrupt_document"}),
    ("a PDF whose page tree lists itself", cyclic_pdf(), {"done", "corrupt_document"}),
    ("a PDF that claims 100000 pages", lying_count_pdf(), {"corrupt_document", "too_many_pages"}),
    ("more pages than allowed", sized_pdf([(100, 100)] * 201), {"too_many_pages"}),
    ("PNG decompression bomb", bomb_png(), {"image_too_large"}),
    ("BMP announcing 10^10 pixels", big_png_header_bmp(), {"image_too_large", "corrupt_document"}),
    ("truncated PNG", truncated(png(400, 300)), {"corrupt_document"}),
    ("truncated JPEG", truncated(jpeg_bytes()), {"corrupt_document", "done"}),
    ("truncated WebP", truncated(webp_bytes()), {"corrupt_document"}),
    ("truncated multi-page TIFF", truncated(multipage_tiff([(300, 300)] * 3)), {"corrupt_document", "done"}),
    ("PNG with a PDF header inside (polyglot)", polyglot(), {"corrupt_document", "done"}),
    ("a path-traversal file name", text_pdf(), {"done"}),
]  # fmt: skip


def test_the_corpus_covers_at_least_40_kinds() -> None:
    # + huge headers, bad request ids, bad names; names in a results ZIP, a deleted stream,
    # an abandoned batch
    assert len(INGEST) + len(DOCUMENTS) + len(ZIP_BATCHES) + 6 >= 40


@pytest.mark.slow
def test_every_bad_request_gets_its_documented_code(live_producer: str) -> None:
    with httpx.Client(base_url=live_producer, timeout=60) as client:
        for name, send, status, code in INGEST:
            r = send(client)
            assert (r.status_code, r.json()["code"]) == (status, code), (name, r.text[:200])


@pytest.mark.slow
def test_hostile_headers_and_names_never_give_a_500(live_producer: str) -> None:
    host, port = live_producer.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:  # 1 MB of header
        s.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 2**20 + b"\r\n\r\n")
        answer = s.recv(200)
    assert answer.startswith(b"HTTP/1.1 431"), answer
    with httpx.Client(base_url=live_producer, timeout=30) as client:
        r = client.get("/healthz", headers=[(b"x-request-id", b"\xff\xfebad")])
        assert r.status_code == 200
        body = (  # a multipart file part whose name is not UTF-8
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="\xff\xfe.pdf"\r\n'
            b"Content-Type: application/pdf\r\n\r\n" + text_pdf() + b"\r\n--b--\r\n"
        )
        form_type = {"content-type": "multipart/form-data; boundary=b"}
        r = client.post("/v1/jobs", content=body, headers=form_type)
        assert r.status_code in (202, 400), r.text


@pytest.mark.slow
def test_broken_documents_fail_with_their_code_and_the_worker_lives(stack: Stack) -> None:
    worker = stack.start_worker(default_max_pages=200)
    jobs = {}
    with httpx.Client(base_url=stack.api, timeout=60) as client:
        for name, document, _ in DOCUMENTS:
            filename = "../../etc/passwd" if "traversal" in name else f"{name}.bin"
            r = client.post(f"/v1/jobs?filename={filename}", content=document)
            assert r.status_code == 202, (name, r.text[:200])
            jobs[name] = r.json()["id"]
    for name, _, allowed in DOCUMENTS:
        view = stack.wait(jobs[name], timeout_s=120)
        outcome = view["status"] if view["status"] == "done" else view["error"]["code"]
        assert outcome in allowed, (name, json.dumps(view)[:300])
    assert worker.proc.poll() is None, "the worker died"
    assert httpx.get(worker.metrics_url.replace("/metrics", "/healthz")).status_code == 200
    assert "Traceback" not in worker.log()
    stack.assert_clean()


@pytest.mark.slow
def test_a_bad_zip_member_is_refused_by_name_in_the_normal_answer(live_producer: str) -> None:
    with httpx.Client(base_url=live_producer, timeout=60) as client:
        for name, body, expected in ZIP_BATCHES:
            r = client.post(
                "/v1/batches", content=body, headers={"content-type": "application/zip"}
            )
            assert r.status_code == 202, (name, r.text[:300])
            answer = r.json()
            codes = {f["filename"]: f["code"] for f in answer["accepted"] + answer["rejected"]}
            assert codes == expected, (name, answer)
            assert client.get(f"/v1/batches/{answer['id']}").json()["counts"]["total"] == 2


@pytest.mark.slow
def test_hostile_names_come_out_of_a_results_zip_as_distinct_printable_names(stack: Stack) -> None:
    stack.start_worker()
    names = ["run.sh\0.pdf", "run.sh\0.png", "a\r\nb.pdf", "A\r\nB.pdf", "..\\..\\c.pdf"]
    documents = [{"document": b64(text_pdf()), "filename": n} for n in names]
    r = httpx.post(f"{stack.api}/v1/batches", json={"documents": documents}, timeout=60)
    assert r.status_code == 202, r.text[:300]
    stack.wait_for_batch(r.json()["id"], timeout_s=120)
    got = httpx.get(f"{stack.api}/v1/batches/{r.json()['id']}/results?format=zip", timeout=60)
    listed = zipfile.ZipFile(io.BytesIO(got.content)).namelist()
    members = [m for m in listed if "/" not in m]  # each job's figures go under <stem>/images/
    assert len(members) == len(names) + 1 and len({m.casefold() for m in members}) == len(members)
    assert all(m.isprintable() and "\\" not in m for m in listed), listed
    stems = {m.removesuffix(".md") for m in members}
    assert all(m.split("/images/")[0] in stems for m in listed if "/" in m), listed
    assert "run.sh" not in members, members
    assert got.headers["content-disposition"].isprintable()


@pytest.mark.slow
def test_a_job_deleted_while_its_events_are_followed_ends_the_stream_with_deleted(
    live_producer: str,
) -> None:
    with httpx.Client(base_url=live_producer, timeout=30) as client:
        job_id = client.post("/v1/jobs", content=text_pdf(), headers=PDF).json()["id"]
        seen, events = threading.Event(), list[dict[str, Any]]()

        def follow() -> None:
            with (
                httpx.Client(timeout=30) as c,
                connect_sse(c, "GET", f"{live_producer}/v1/jobs/{job_id}/events") as s,
            ):
                for event in s.iter_sse():
                    events.append(json.loads(event.data))
                    seen.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        assert seen.wait(20)
        assert client.delete(f"/v1/jobs/{job_id}").status_code == 200
        reader.join(20)
    assert not reader.is_alive() and events[-1] == {"id": job_id, "status": "deleted"}, events


async def test_a_batch_whose_producer_died_before_sealing_is_sealed_and_its_jobs_kept(
    store: JobStore,
) -> None:
    batches, options = BatchStore(store), JobOptions(lane="batch")
    _, batch_id = await batches.open(new_job_id(), "public", options, None)
    assert await store.redis.ttl(store.keys.batch(batch_id)) > 0  # a life from its opening
    later = now_ms() + int(batches.open_deadline_s * 1000) + 1000
    assert await batches.sweep(later) == [batch_id]
    record = await batches.read(batch_id)
    assert record is not None and record.sealed and record.finished_at is not None  # no jobs
