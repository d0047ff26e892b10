"""Batches end to end: multipart, ZIP and JSON submissions, bombs, results, cancel, SSE."""

from __future__ import annotations

import base64
import io
import json
import time
import zipfile

import httpx
import pytest
from support.documents import png, sized_pdf
from support.stack import Stack

pytestmark = pytest.mark.slow


def zip_bytes(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def assert_results(stack: Stack, batch_id: str, done: int) -> None:
    lines = httpx.get(f"{stack.api}/v1/batches/{batch_id}/results", timeout=60).text.splitlines()
    rows = [json.loads(line) for line in lines]
    assert sum(r["status"] == "done" for r in rows) == done
    assert all(r["result"]["markdown"] for r in rows if r["status"] == "done")
    r = httpx.get(f"{stack.api}/v1/batches/{batch_id}/results?format=zip", timeout=60)
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    names = archive.namelist()
    assert "index.jsonl" in names and len([n for n in names if n.endswith(".md")]) == done


def test_a_300_file_multipart_batch_accounts_for_every_file(stack: Stack) -> None:
    stack.start_worker(max_jobs=32)
    files = [("file", (f"scan-{i:03d}.png", png(100 + i, 60), "image/png")) for i in range(300)]
    files.append(("file", ("notes.txt", b"not a document", "text/plain")))
    r = httpx.post(f"{stack.api}/v1/batches?dpi=100", files=files, timeout=120)
    assert r.status_code == 202, r.text[:300]
    body = r.json()
    assert len(body["accepted"]) == 300 and [f["filename"] for f in body["rejected"]] == [
        "notes.txt"
    ]
    assert body["rejected"][0]["code"] == "unsupported_media_type"
    view = stack.wait_for_batch(body["id"], timeout_s=300)
    assert view["counts"] == {"total": 300, "queued": 0, "processing": 0, "done": 300,
                              "failed": 0, "cancelled": 0}  # fmt: skip
    assert [j["filename"] for j in view["jobs"]] == [f"scan-{i:03d}.png" for i in range(300)]
    assert view["pages"] == {"pages_done": 300, "pages_total": 300}
    assert all(job["status"] == "done" for job in view["jobs"])
    assert_results(stack, body["id"], done=300)
    stack.assert_clean()


def test_a_zip_batch_reads_its_members_and_a_bad_member_spoils_nothing(stack: Stack) -> None:
    stack.start_worker(max_jobs=32)
    members = {f"inbox/{i}.png": png(120 + i, 80) for i in range(300)}
    members["inbox/readme.txt"] = b"hello"
    members["../../escape.pdf"] = sized_pdf([(200, 300)])
    r = httpx.post(
        f"{stack.api}/v1/batches", content=zip_bytes(members),
        headers={"content-type": "application/zip"}, timeout=120,
    )  # fmt: skip
    assert r.status_code == 202, r.text[:300]
    body = r.json()
    assert len(body["accepted"]) == 301 and len(body["rejected"]) == 1
    assert "escape.pdf" in [f["filename"] for f in body["accepted"]]  # a label, not a path
    view = stack.wait_for_batch(body["id"], timeout_s=300)
    assert view["counts"]["done"] == 301
    stack.assert_clean()


def test_a_zip_bomb_is_refused_whole_and_nothing_is_enqueued(stack: Stack) -> None:
    bomb = zip_bytes({"a.pdf": b"%PDF-1.4\n" + b"0" * 50_000_000})
    r = httpx.post(
        f"{stack.api}/v1/batches", content=bomb,
        headers={"content-type": "application/zip"}, timeout=60,
    )  # fmt: skip
    assert r.status_code in (400, 413) and "bomb" in r.json()["message"], r.text
    assert httpx.get(f"{stack.api}/v1/jobs").json()["jobs"] == []


def test_a_bomb_among_multipart_parts_is_one_refused_file(stack: Stack) -> None:
    stack.start_worker()
    bomb = zip_bytes({"a.pdf": b"%PDF-1.4\n" + b"0" * 50_000_000})
    files = [("file", ("good.png", png(90, 60), "image/png")),
             ("file", ("bomb.zip", bomb, "application/zip"))]  # fmt: skip
    body = httpx.post(f"{stack.api}/v1/batches", files=files, timeout=60).json()
    assert [f["filename"] for f in body["accepted"]] == ["good.png"]
    assert body["rejected"][0]["filename"] == "bomb.zip"
    assert stack.wait_for_batch(body["id"])["counts"]["done"] == 1


@pytest.mark.topology
def test_a_json_batch_and_its_idempotency_key(stack: Stack) -> None:
    stack.start_worker()
    docs = [{"document": base64.b64encode(png(70 + i, 50)).decode(), "filename": f"{i}.png"}
            for i in range(3)]  # fmt: skip
    docs.append({"document": "not*base64", "filename": "broken.png"})
    key = {"idempotency-key": "batch-7"}
    first = httpx.post(f"{stack.api}/v1/batches", json={"documents": docs}, headers=key).json()
    assert len(first["accepted"]) == 3 and first["rejected"][0]["code"] == "invalid_base64"
    again = httpx.post(f"{stack.api}/v1/batches", json={"documents": docs}, headers=key)
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert stack.wait_for_batch(first["id"])["counts"]["done"] == 3


@pytest.mark.topology
def test_cancelling_a_batch_stops_what_has_not_finished(stack: Stack) -> None:
    stack.fake.configure(latency_s=2.0)
    stack.start_worker(max_jobs=1)
    files = [("file", (f"{i}.png", png(80 + i, 60), "image/png")) for i in range(5)]
    body = httpx.post(f"{stack.api}/v1/batches", files=files).json()
    time.sleep(0.5)
    r = httpx.post(f"{stack.api}/v1/batches/{body['id']}/cancel")
    assert r.status_code == 200 and r.json()["cancelled"] >= 4
    view = stack.wait_for_batch(body["id"])
    assert view["counts"]["cancelled"] >= 4 and view["counts"]["total"] == 5
    stack.assert_clean()


def test_deleting_a_batch_removes_it_and_its_jobs(stack: Stack) -> None:
    stack.start_worker()
    files = [("file", (f"{i}.png", png(80 + i, 60), "image/png")) for i in range(3)]
    body = httpx.post(f"{stack.api}/v1/batches", files=files).json()
    stack.wait_for_batch(body["id"])
    assert httpx.delete(f"{stack.api}/v1/batches/{body['id']}").json()["status"] == "deleted"
    assert httpx.get(f"{stack.api}/v1/batches/{body['id']}").status_code == 404
    for job in body["accepted"]:
        assert httpx.get(f"{stack.api}/v1/jobs/{job['id']}").status_code == 404
