"""POST /v1/jobs with ``Prefer: wait=N`` (RFC 7240): the job's view when it ends in time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from litestar.testing import TestClient
from support.payloads import b64, small_pdf
from support.structured_results import finish_structured, job_queued

from ocrq.producer.jobs.prefer import preferred_wait
from ocrq.shared.store import JobStore

PDF = small_pdf()
UPLOADS: dict[str, dict[str, Any]] = {
    "json": {"json": {"document": b64(PDF)}},
    "multipart": {"files": [("file", ("a.pdf", PDF, "application/pdf"))]},
    "raw": {"content": PDF, "headers": {"content-type": "application/pdf"}},
}


def post(api: TestClient[Any], upload: str = "json", **headers: str) -> Any:
    """POST a small PDF in one of the three upload formats, with extra headers."""
    args = dict(UPLOADS[upload])
    args["headers"] = {**args.get("headers", {}), **headers}
    return api.post("/v1/jobs", **args)


async def worker_finishes_next_job(store: JobStore, after_s: float = 0.3) -> str:
    """Wait for a job to be queued, then finish it as a worker would; its id."""
    await job_queued(store)
    await asyncio.sleep(after_s)
    return await finish_structured(store)


@pytest.mark.parametrize("upload", list(UPLOADS))
async def test_a_job_that_ends_in_time_answers_200_with_its_result(
    api: TestClient[Any], store: JobStore, upload: str
) -> None:
    worker = asyncio.create_task(worker_finishes_next_job(store))
    r = await asyncio.to_thread(post, api, upload, prefer="wait=20")
    job_id = await worker
    assert r.status_code == 200, r.text
    assert r.headers["preference-applied"] == "wait=20"
    assert r.headers["location"] == f"/v1/jobs/{job_id}"
    view = r.json()
    assert view["id"] == job_id and view["status"] == "done"
    assert view["result"]["pages"][0]["blocks"][0]["label"] == "title"


async def test_a_job_still_running_after_the_wait_is_the_usual_202(api: TestClient[Any]) -> None:
    started = time.monotonic()
    r = post(api, prefer="wait=1")
    assert 0.9 <= time.monotonic() - started < 5
    assert r.status_code == 202 and r.json()["status"] == "queued"
    assert "preference-applied" not in r.headers


def test_without_the_preference_the_answer_is_immediate(api: TestClient[Any]) -> None:
    started = time.monotonic()
    assert post(api).status_code == 202
    assert time.monotonic() - started < 1


async def test_a_wait_longer_than_the_maximum_is_cut_to_it(
    make_client: Any, store: JobStore
) -> None:
    api = make_client(max_wait_s=5)
    worker = asyncio.create_task(worker_finishes_next_job(store))
    r = await asyncio.to_thread(post, api, prefer="respond-async, wait=3600")
    await worker
    assert r.status_code == 200 and r.headers["preference-applied"] == "wait=5"
    started = time.monotonic()
    assert post(api, prefer="wait=3600").status_code == 202
    assert time.monotonic() - started < 8  # 5 s, not an hour


async def test_an_idempotent_replay_waits_the_same(api: TestClient[Any], store: JobStore) -> None:
    first = post(api, **{"idempotency-key": "k-1"})
    assert first.status_code == 202
    await finish_structured(store)
    replay = post(api, prefer="wait=5", **{"idempotency-key": "k-1"})
    assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"
    assert replay.headers["preference-applied"] == "wait=5"
    assert replay.json()["id"] == first.json()["id"] and replay.json()["result"] is not None
    plain = post(api, **{"idempotency-key": "k-1"})
    assert plain.status_code == 200 and set(plain.json()) == {"id", "status", "created_at"}


def test_the_wait_preference_is_found_among_others() -> None:
    assert preferred_wait(["wait=10"], 60) == 10
    assert preferred_wait(['respond-async, WAIT="7"'], 60) == 7
    assert preferred_wait(["return=minimal", "wait=9;x=1"], 60) == 9
    assert preferred_wait(["wait=600"], 60) == 60
    assert preferred_wait(["wait=soon", "respond-async", "wait=-3"], 60) == 0
    assert preferred_wait([], 60) == 0


def test_the_openapi_document_declares_the_preference_and_its_200(api: TestClient[Any]) -> None:
    submit = api.get("/schema/openapi.json").json()["paths"]["/v1/jobs"]["post"]
    prefer = next(p for p in submit["parameters"] if p["name"] == "Prefer")
    assert prefer["in"] == "header" and "wait=N" in prefer["description"]
    ok = submit["responses"]["200"]
    assert "Preference-Applied" in ok["headers"]
    assert {"$ref": "#/components/schemas/JobView"} in ok["content"]["application/json"]["schema"][
        "anyOf"
    ]
