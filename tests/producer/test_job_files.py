"""A job's tables as CSV, its figures, its pages as soon as read, and page events."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from typing import Any

import pytest
from litestar.testing import TestClient
from support.jobflow import finish_done
from support.payloads import b64, small_pdf
from support.structured_results import (
    FIGURE,
    done_job,
    finish_claimed,
    finish_structured,
    read_one_page,
    submit_report,
)

from ocrq.shared.store import JobStore


def served(api: TestClient[Any], job_id: str, path: str, content_type: str) -> Any:
    """GET one of the job's files, checked to be there as ``content_type``."""
    r = api.get(f"/v1/jobs/{job_id}/{path}")
    assert r.status_code == 200 and r.headers["content-type"] == content_type
    return r


async def test_each_table_is_csv_numbered_in_reading_order(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    r = served(api, job_id, "tables/1.csv", "text/csv; charset=utf-8")
    assert list(csv.reader(io.StringIO(r.text))) == [
        ["Item", "Price"],
        ["Coffee", "2.50"],
        ['Cake, "lemon"', "3.10"],
    ]
    assert api.get(f"/v1/jobs/{job_id}/tables/2.csv").text.strip() == "only cell"


@pytest.mark.parametrize("name", ["3.csv", "0.csv", "1.tsv", "one.csv", "1"])
async def test_a_table_that_is_not_there_is_404(
    api: TestClient[Any], store: JobStore, name: str
) -> None:
    job_id = await done_job(api, store)
    r = api.get(f"/v1/jobs/{job_id}/tables/{name}")
    assert r.status_code == 404 and r.json()["code"] == "not_found"


def test_tables_of_a_job_not_done_are_409(api: TestClient[Any]) -> None:
    r = api.get(f"/v1/jobs/{submit_report(api)}/tables/1.csv")
    assert r.status_code == 409 and r.headers["retry-after"] == "1"


async def test_a_figure_is_served_as_png_with_a_long_cache(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    r = served(api, job_id, "images/p1-1.png", "image/png")
    assert r.content == FIGURE
    assert "max-age=31536000" in r.headers["cache-control"]


@pytest.mark.parametrize("name", ["p1-2.png", "p1-1.jpg", "..%2Fsearchable.pdf", "p0-1.png"])
async def test_an_image_not_named_like_a_figure_or_not_kept_is_404(
    api: TestClient[Any], store: JobStore, name: str
) -> None:
    job_id = await done_job(api, store)
    r = api.get(f"/v1/jobs/{job_id}/images/{name}")
    assert r.status_code == 404 and r.json()["code"] == "not_found"


async def test_another_tenants_files_are_404(make_client: Any, store: JobStore) -> None:
    api = make_client(api_keys="acme:key-a,globex:key-b")
    r = api.post("/v1/jobs", json={"document": b64(small_pdf())}, headers={"X-API-Key": "key-a"})
    job_id = r.json()["id"]
    await finish_structured(store)
    other = {"X-API-Key": "key-b"}
    for path in ("images/p1-1.png", "tables/1.csv", "pages/1"):
        assert api.get(f"/v1/jobs/{job_id}/{path}", headers=other).status_code == 404, path
        assert api.get(f"/v1/jobs/{job_id}/{path}", headers={"X-API-Key": "key-a"}).is_success


async def test_a_page_is_readable_as_soon_as_it_is_read_and_after(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = submit_report(api)
    waiting = api.get(f"/v1/jobs/{job_id}/pages/1")
    assert waiting.status_code == 409 and waiting.headers["retry-after"] == "1"
    assert "not read yet" in waiting.json()["message"]
    _, entry = await read_one_page(store)
    page = api.get(f"/v1/jobs/{job_id}/pages/1")
    assert page.status_code == 200 and page.json()["number"] == 1
    assert page.json()["blocks"][0] == {**page.json()["blocks"][0], "label": "title"}
    assert api.get(f"/v1/jobs/{job_id}/pages/2").status_code == 409
    assert api.get(f"/v1/jobs/{job_id}/pages/3").status_code == 404  # 2 pages in all
    await finish_claimed(store, job_id, entry)
    assert (
        api.get(f"/v1/jobs/{job_id}/pages/2").json()["markdown"]
        == "Outlook stays bright.\n\n| only cell |\n| --- |"
    )


async def test_pages_outside_the_jobs_page_ranges_are_404(api: TestClient[Any]) -> None:
    job_id = submit_report(api, pages="2-3")
    assert api.get(f"/v1/jobs/{job_id}/pages/1").status_code == 404
    assert api.get(f"/v1/jobs/{job_id}/pages/0").status_code == 404
    assert api.get(f"/v1/jobs/{job_id}/pages/3").status_code == 409


async def test_a_done_job_whose_worker_kept_no_pages_serves_them_from_its_result(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = submit_report(api)
    await finish_done(store, "# Only\n")
    assert api.get(f"/v1/jobs/{job_id}/pages/1").json()["markdown"] == "# Only\n"
    assert api.get(f"/v1/jobs/{job_id}/pages/2").status_code == 404


def events_of(body: str) -> list[tuple[str, Any]]:
    """(event, data) of each event of an SSE body."""
    found = []
    for block in body.replace("\r\n", "\n").strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            found.append((fields["event"], json.loads(fields["data"])))
    return found


async def test_page_events_follow_the_progress_that_finished_them(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = submit_report(api)
    stream = asyncio.create_task(asyncio.to_thread(api.get, f"/v1/jobs/{job_id}/events?pages=true"))
    await asyncio.sleep(0.5)  # the stream is open and has sent the queued state
    _, entry = await read_one_page(store)
    await asyncio.sleep(0.5)
    await finish_claimed(store, job_id, entry)
    events = events_of((await asyncio.wait_for(stream, 20)).text)
    kinds = [(kind, data.get("status") or data["number"]) for kind, data in events]
    assert kinds[0] == ("job", "queued") and kinds[-1] == ("job", "done")
    assert [k for k in kinds if k[0] == "page"] == [("page", 1), ("page", 2)]
    assert kinds.index(("page", 1)) < kinds.index(("page", 2)) < kinds.index(("job", "done"))
    page = next(data for kind, data in events if kind == "page")
    assert set(page) == {"number", "markdown", "blocks"}
    assert (
        page["markdown"].startswith("# Quarterly Report") and page["blocks"][0]["label"] == "title"
    )


async def test_a_stream_opened_late_sends_the_pages_already_read(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    events = events_of(api.get(f"/v1/jobs/{job_id}/events?pages=true").text)
    assert [(kind, data.get("number")) for kind, data in events] == [
        ("page", 1),
        ("page", 2),
        ("job", None),
    ]


async def test_without_pages_the_stream_has_no_page_events(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    events = events_of(api.get(f"/v1/jobs/{job_id}/events").text)
    assert [kind for kind, _ in events] == ["job"]


def test_the_openapi_document_declares_the_files_routes(api: TestClient[Any]) -> None:
    paths = api.get("/schema/openapi.json").json()["paths"]
    assert (
        "text/csv" in paths["/v1/jobs/{job_id}/tables/{name}"]["get"]["responses"]["200"]["content"]
    )
    assert (
        "image/png"
        in paths["/v1/jobs/{job_id}/images/{name}"]["get"]["responses"]["200"]["content"]
    )
    page = paths["/v1/jobs/{job_id}/pages/{number}"]["get"]["responses"]
    assert page["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Page"
    }
    assert "Retry-After" in page["409"]["headers"]
    events = {p["name"] for p in paths["/v1/jobs/{job_id}/events"]["get"]["parameters"]}
    assert "pages" in events
    batch = {p["name"] for p in paths["/v1/batches/{batch_id}/results"]["get"]["parameters"]}
    assert {"formats", "chunk_tokens"} <= batch
