"""Hostile ids and names on the batch routes: 404 for ids that are no batch, names that stay
names (bounded, no control characters, never two files under one name in a results ZIP)."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient
from support.jobflow import ME, result_for
from support.payloads import b64, small_pdf

from ocrq.producer.batches.results import markdown_name, safe_name
from ocrq.shared.record import JobRecord
from ocrq.shared.store import JobStore, Outcome


def json_batch(api: TestClient[Any], names: list[str]) -> dict[str, Any]:
    """A JSON batch of small PDFs under these names; the 202 answer."""
    documents = [{"document": b64(small_pdf()), "filename": name} for name in names]
    r = api.post("/v1/batches", json={"documents": documents})
    assert r.status_code == 202, r.text
    body: dict[str, Any] = r.json()
    return body


async def finish_batch_jobs(store: JobStore, count: int) -> None:
    """Take and finish `count` jobs of the batch lane, as a worker would, each with a result."""
    for _ in range(count):
        reply = await store.redis.xreadgroup(
            "workers", ME, {store.keys.stream("batch"): ">"}, count=1
        )
        entry_id, fields = reply[0][1][0]
        job_id, entry = fields[b"id"].decode(), entry_id.decode()
        assert await store.claim(job_id, "batch", entry, ME) == "ok"
        outcome = Outcome.done(msgspec.json.encode(result_for(job_id, f"# {job_id}\n")), 1)
        assert await store.finish(job_id, "batch", entry, ME, outcome)


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("get", ":jobs"),
        ("get", ":jobs/results"),
        ("get", ":jobs/results?format=zip"),
        ("get", ":jobs/events"),
        ("post", ":jobs/cancel"),
        ("delete", ":jobs"),
    ],
)
def test_a_batch_id_that_names_another_key_is_404_on_every_route(
    api: TestClient[Any], method: str, suffix: str
) -> None:
    batch_id = json_batch(api, ["a.pdf"])["id"]
    r = getattr(api, method)(f"/v1/batches/{batch_id}{suffix}")
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text[:300]
    assert api.get(f"/v1/batches/{batch_id}").status_code == 200  # the batch itself is intact


def test_a_multipart_filename_field_over_255_characters_is_400_like_json(
    api: TestClient[Any], sync_redis: Any
) -> None:
    files = [("file", ("a.pdf", small_pdf(), "application/pdf"))]
    r = api.post("/v1/jobs", files=files, data={"filename": "x" * 200_000})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text[:300]
    assert "255" in r.json()["message"]
    assert not sync_redis.keys("*job:*")  # nothing was stored


def test_a_multipart_file_part_named_over_255_characters_is_400(api: TestClient[Any]) -> None:
    files = [("file", ("y" * 300 + ".pdf", small_pdf(), "application/pdf"))]
    r = api.post("/v1/jobs", files=files)
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text[:300]


def test_a_filename_of_255_characters_is_kept_whole(api: TestClient[Any]) -> None:
    name = "z" * 251 + ".pdf"
    files = [("file", ("a.pdf", small_pdf(), "application/pdf"))]
    r = api.post("/v1/jobs", files=files, data={"filename": name})
    assert r.status_code == 202, r.text[:300]
    assert api.get(f"/v1/jobs/{r.json()['id']}").json()["filename"] == name


def test_control_characters_in_a_name_are_replaced_and_the_rest_kept() -> None:
    assert safe_name("run.sh\0.pdf") == "run.sh_.pdf"
    assert safe_name("a\r\nb\x1b[31m\x7f\x85c") == "a__b_[31m__c"
    assert safe_name("Überweisung 2024 (Kopie).pdf") == "Überweisung 2024 (Kopie).pdf"


def test_markdown_names_are_unique_whatever_the_input_names() -> None:
    taken: set[str] = set()
    inputs = ["run.sh\0.pdf", "run.sh\0.png", "a.pdf", "A.pdf", "a-2.pdf", "a.png", "..\\..\\x.pdf",
              "\0", "", "index.jsonl"]  # fmt: skip
    names = [markdown_name(JobRecord(filename=n), f"job{i}", taken) for i, n in enumerate(inputs)]
    folded = [n.casefold() for n in names]
    assert len(set(folded)) == len(names), names
    assert "index.jsonl" not in folded
    assert all(n.isprintable() and "/" not in n and "\\" not in n for n in names), names
    assert names[0] == "run.sh_.md" and names[1] != "run.sh_.md"


async def test_a_results_zip_never_truncates_a_name_at_nul_nor_repeats_one(
    api: TestClient[Any], store: JobStore
) -> None:
    names = ["run.sh\0.pdf", "run.sh\0.png", "x\0a.pdf", "x\0b.pdf", "Same.pdf", "same.pdf"]
    batch_id = json_batch(api, names)["id"]
    await finish_batch_jobs(store, len(names))
    r = api.get(f"/v1/batches/{batch_id}/results?format=zip")
    assert r.status_code == 200
    members = zipfile.ZipFile(io.BytesIO(r.content)).namelist()
    markdown = [m for m in members if m != "index.jsonl"]
    assert len(markdown) == len(names), members
    assert len({m.casefold() for m in members}) == len(members), members
    assert "run.sh" not in members and "x" not in members, members
    assert all(m.isprintable() for m in members), members


def test_the_results_download_names_the_batch_in_a_plain_header(api: TestClient[Any]) -> None:
    batch_id = json_batch(api, ["a\r\nb.pdf"])["id"]
    r = api.get(f"/v1/batches/{batch_id}/results?format=zip")
    disposition = r.headers["content-disposition"]
    assert disposition == f'attachment; filename="batch-{batch_id}.zip"'
    assert disposition.isprintable()


@pytest.mark.parametrize(
    ("method", "suffix"), [("get", ""), ("get", "/result"), ("get", "/events"),
                           ("post", "/cancel"), ("delete", "")],
)  # fmt: skip
def test_a_job_id_shaped_to_name_another_key_is_404_on_every_route(
    api: TestClient[Any], method: str, suffix: str
) -> None:
    # The Idempotency-Key's Redis key is "ocrq:{p0}:idem:public:<key>": this job id makes
    # the job's key ("ocrq:{<tag>}:job:<id>", the tag being what precedes the ".") that very
    # string, which holds the id of another job.
    forged = "p0}:idem:public:." + "R" * 22
    key = "}:job:" + forged
    r = api.post("/v1/jobs", content=small_pdf(), headers={"idempotency-key": key})
    assert r.status_code == 202, r.text
    r = getattr(api, method)(f"/v1/jobs/{forged}{suffix}")
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text[:300]
