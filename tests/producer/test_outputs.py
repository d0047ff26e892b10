"""GET /v1/jobs/{id}/result in every format, by ``format=`` or ``Accept``; batch ZIPs too."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pymupdf
import pytest
from litestar.testing import TestClient
from support.payloads import b64, small_pdf
from support.structured_results import (
    FIGURE,
    SEARCHABLE_PDF,
    done_job,
    finish_structured,
    submit_report,
)

from ocrq.producer.jobs.outputs import negotiate
from ocrq.shared.errors import OcrqError
from ocrq.shared.store import JobStore


def result(api: TestClient[Any], job_id: str, query: str = "", **headers: str) -> Any:
    """GET the job's result with a query string and headers."""
    return api.get(f"/v1/jobs/{job_id}/result{query}", headers=headers)


async def rendered(api: TestClient[Any], store: JobStore, fmt: str, content_type: str) -> Any:
    """A newly done job's result asked for in ``fmt``, checked to come as ``content_type``."""
    r = result(api, await done_job(api, store), f"?format={fmt}")
    assert r.headers["content-type"] == content_type
    return r


async def test_json_is_the_default_and_the_stored_result_unchanged(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    r = result(api, job_id)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert [b["label"] for b in body["pages"][0]["blocks"]][:2] == ["title", "heading"]
    assert body["images"] == ["p1-1.png"]
    assert result(api, job_id, "?format=json").content == r.content


async def test_markdown_has_headings_a_table_and_a_figure_link_but_no_footer(
    api: TestClient[Any], store: JobStore
) -> None:
    r = await rendered(api, store, "markdown", "text/markdown; charset=utf-8")
    assert r.text.startswith("# Quarterly Report\n\n## Sales\n")
    assert "| Item | Price |" in r.text and "![figure 1](images/p1-1.png)" in r.text
    assert "Confidential draft" not in r.text


async def test_html_marks_every_element_with_its_page_and_box(
    api: TestClient[Any], store: JobStore
) -> None:
    r = await rendered(api, store, "html", "text/html; charset=utf-8")
    assert '<h1 data-page="1" data-bbox="0.1000 0.0500 0.9000 0.1000">Quarterly Report</h1>' in (
        r.text
    )
    assert "<table" in r.text and 'src="images/p1-1.png"' in r.text
    assert "Confidential draft" not in r.text


async def test_text_is_the_body_alone(api: TestClient[Any], store: JobStore) -> None:
    r = await rendered(api, store, "text", "text/plain; charset=utf-8")
    assert r.text.startswith("Quarterly Report\n\nSales\n\nSales rose in every region.")
    assert "Item\tPrice" in r.text and "Confidential" not in r.text and "#" not in r.text


async def test_chunks_are_json_lines_within_the_token_budget_tiling_the_text(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    r = result(api, job_id, "?format=chunks&chunk_tokens=32")
    assert r.headers["content-type"] == "application/x-ndjson"
    chunks = [json.loads(line) for line in r.text.splitlines()]
    assert len(chunks) > 1 and all(c["tokens"] <= 32 for c in chunks)
    text = result(api, job_id, "?format=text").text
    assert "".join(c["text"] for c in chunks) == text
    assert all(box["page"] in c["pages"] for c in chunks for box in c["boxes"])
    assert chunks[0]["headings"] == ["Quarterly Report"]
    default = result(api, job_id, "?format=chunks").text.splitlines()
    assert len(default) < len(chunks)  # 512 tokens by default


@pytest.mark.parametrize("tokens", ["31", "8193", "many"])
async def test_a_chunk_budget_out_of_range_is_400(
    api: TestClient[Any], store: JobStore, tokens: str
) -> None:
    job_id = await done_job(api, store)
    r = result(api, job_id, f"?format=chunks&chunk_tokens={tokens}")
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


async def test_the_searchable_pdf_is_served_named_after_the_input(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store, searchable_pdf=True)
    r = result(api, job_id, "?format=pdf")
    assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
    assert r.content == SEARCHABLE_PDF
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"Quarterly report.pdf\"; filename*=UTF-8''Quarterly%20report.pdf"
    )
    assert pymupdf.open(stream=r.content).page_count == 1


async def test_a_pdf_the_job_did_not_ask_for_is_406_saying_how_to_get_one(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    for r in (result(api, job_id, "?format=pdf"), result(api, job_id, accept="application/pdf")):
        assert r.status_code == 406 and r.json()["code"] == "not_acceptable"
        assert "options.searchable_pdf=true" in r.json()["message"]


async def test_the_accept_header_picks_the_format_with_q_values(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store, searchable_pdf=True)
    cases = {
        "text/markdown": "text/markdown; charset=utf-8",
        "text/html": "text/html; charset=utf-8",
        "text/plain": "text/plain; charset=utf-8",
        "application/x-ndjson": "application/x-ndjson",
        "application/pdf": "application/pdf",
        "text/html;q=0.5, text/markdown;q=0.9": "text/markdown; charset=utf-8",
        "application/json;q=0, */*": "text/markdown; charset=utf-8",
        "*/*": "application/json",
        "image/png, text/plain;q=0.1": "text/plain; charset=utf-8",
    }
    for accept, content_type in cases.items():
        r = result(api, job_id, accept=accept)
        assert r.status_code == 200 and r.headers["content-type"] == content_type, accept
        assert r.headers["vary"] == "Accept"


async def test_format_wins_over_accept(api: TestClient[Any], store: JobStore) -> None:
    job_id = await done_job(api, store)
    r = result(api, job_id, "?format=text", accept="text/html")
    assert r.headers["content-type"] == "text/plain; charset=utf-8"


async def test_an_unknown_format_is_400_naming_the_formats(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    r = result(api, job_id, "?format=docx")
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    assert "json, markdown, html, text, chunks, pdf" in r.json()["message"]


async def test_an_accept_no_format_matches_is_406(api: TestClient[Any], store: JobStore) -> None:
    job_id = await done_job(api, store)
    r = result(api, job_id, accept="image/png, application/msword")
    assert r.status_code == 406 and r.json()["code"] == "not_acceptable"
    assert "text/markdown" in r.json()["message"]


async def test_a_query_can_keep_the_furniture_the_job_left_out_and_back(
    api: TestClient[Any], store: JobStore
) -> None:
    job_id = await done_job(api, store)
    for fmt in ("markdown", "html", "text"):
        kept = result(api, job_id, f"?format={fmt}&keep_headers_footers=true").text
        assert "Confidential draft" in kept, fmt
    chunks = result(api, job_id, "?format=chunks&keep_headers_footers=true").text
    assert "Confidential draft" in chunks
    kept_job = await done_job(api, store, keep_headers_footers=True)
    assert "Confidential draft" in result(api, kept_job, "?format=html").text
    left = result(api, kept_job, "?format=text&keep_headers_footers=false").text
    assert "Confidential draft" not in left


def test_a_job_not_done_keeps_its_409_in_every_format(api: TestClient[Any]) -> None:
    job_id = submit_report(api)
    for fmt in ("json", "markdown", "html", "chunks"):
        r = result(api, job_id, f"?format={fmt}")
        assert r.status_code == 409 and r.headers["retry-after"] == "1", fmt
    assert result(api, "nosuchjob", "?format=html").status_code == 404


def test_negotiation_breaks_ties_by_the_order_of_the_formats() -> None:
    assert negotiate("j", None, "", pdf_kept=False) == "json"
    assert negotiate("j", None, "text/*", pdf_kept=False) == "markdown"
    assert negotiate("j", None, "application/*", pdf_kept=True) == "json"
    assert negotiate("j", None, "text/plain, text/html", pdf_kept=False) == "text"
    assert negotiate("j", None, "application/pdf, */*;q=0.1", pdf_kept=False) == "json"
    with pytest.raises(OcrqError):
        negotiate("j", None, "text/*;q=0", pdf_kept=False)


def zip_members(api: TestClient[Any], batch_id: str, query: str) -> zipfile.ZipFile:
    """The batch's results ZIP."""
    r = api.get(f"/v1/batches/{batch_id}/results?format=zip{query}")
    assert r.status_code == 200, r.text
    return zipfile.ZipFile(io.BytesIO(r.content))


async def structured_batch(api: TestClient[Any], store: JobStore, options: str = "") -> str:
    """A batch of two documents named alike, both finished with the structured result."""
    documents = [{"document": b64(small_pdf()), "filename": "Report.pdf"}] * 2
    r = api.post(f"/v1/batches{options}", json={"documents": documents})
    assert r.status_code == 202, r.text
    for _ in range(2):
        await finish_structured(store, searchable_pdf="searchable_pdf" in options, lane="batch")
    batch_id: str = r.json()["id"]
    return batch_id


async def test_a_batch_zip_holds_markdown_and_figures_by_default(
    api: TestClient[Any], store: JobStore
) -> None:
    archive = zip_members(api, await structured_batch(api, store), "")
    names = set(archive.namelist())
    assert names == {
        "Report.md",
        "Report/images/p1-1.png",
        "Report-2.md",
        "Report-2/images/p1-1.png",
        "index.jsonl",
    }
    assert archive.read("Report/images/p1-1.png") == FIGURE
    assert "![figure 1](Report/images/p1-1.png)" in archive.read("Report.md").decode()
    lines = [json.loads(line) for line in archive.read("index.jsonl").splitlines()]
    assert lines[1]["file"] == "Report-2.md"
    assert lines[1]["files"] == ["Report-2.md", "Report-2/images/p1-1.png"]


async def test_a_batch_zip_holds_every_format_asked(api: TestClient[Any], store: JobStore) -> None:
    batch_id = await structured_batch(api, store, "?searchable_pdf=true")
    archive = zip_members(api, batch_id, "&formats=json,html,text,chunks,pdf")
    names = set(archive.namelist())
    for suffix in (".json", ".html", ".txt", ".chunks.jsonl", ".pdf", "/images/p1-1.png"):
        assert {f"Report{suffix}", f"Report-2{suffix}"} <= names, suffix
    assert "Report.md" not in names
    assert json.loads(archive.read("Report.json"))["page_count"] == 2
    assert 'src="Report/images/p1-1.png"' in archive.read("Report.html").decode()
    assert archive.read("Report.pdf") == SEARCHABLE_PDF
    chunks = archive.read("Report.chunks.jsonl").decode().splitlines()
    assert "".join(json.loads(c)["text"] for c in chunks) == archive.read("Report.txt").decode()


async def test_a_batch_zip_leaves_out_the_pdf_of_jobs_that_kept_none(
    api: TestClient[Any], store: JobStore
) -> None:
    archive = zip_members(api, await structured_batch(api, store), "&formats=markdown,pdf")
    assert not [name for name in archive.namelist() if name.endswith(".pdf")]


async def test_batch_formats_are_checked(api: TestClient[Any], store: JobStore) -> None:
    batch_id = await structured_batch(api, store)
    r = api.get(f"/v1/batches/{batch_id}/results?format=zip&formats=markdown,docx")
    assert r.status_code == 400 and "docx" in r.json()["message"]
    r = api.get(f"/v1/batches/{batch_id}/results?format=zip&formats=markdown, json")
    assert r.status_code == 400


async def test_a_formats_list_alone_asks_for_a_zip(api: TestClient[Any], store: JobStore) -> None:
    batch_id = await structured_batch(api, store)
    r = api.get(f"/v1/batches/{batch_id}/results?formats=text")
    assert r.headers["content-type"] == "application/zip"
    assert "Report.txt" in zipfile.ZipFile(io.BytesIO(r.content)).namelist()
    lines = api.get(f"/v1/batches/{batch_id}/results?format=jsonl&formats=text")
    assert lines.headers["content-type"] == "application/x-ndjson"


def test_the_openapi_document_lists_every_format_and_its_query(api: TestClient[Any]) -> None:
    operation = api.get("/schema/openapi.json").json()["paths"]["/v1/jobs/{job_id}/result"]["get"]
    content = operation["responses"]["200"]["content"]
    assert set(content) == {
        "application/json",
        "text/markdown",
        "text/html",
        "text/plain",
        "application/x-ndjson",
        "application/pdf",
    }
    parameters = {p["name"]: p["schema"] for p in operation["parameters"]}
    assert parameters["format"]["enum"] == [
        "json", "markdown", "html", "text", "chunks", "pdf", "fields",
    ]  # fmt: skip
    assert (
        parameters["chunk_tokens"]["minimum"] == 32
        and parameters["chunk_tokens"]["maximum"] == 8192
    )
    assert "keep_headers_footers" in parameters
    assert "406" in operation["responses"]
