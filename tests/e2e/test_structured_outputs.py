"""Structured results end to end: the local engine's blocks, figures, tables, page ranges,
pages as they finish and the searchable PDF, through a real producer, Redis and worker."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import csv
import io
from typing import Any

import httpx
import pymupdf
import pytest
from support.report_document import TABLE, report_document
from support.stack import Stack

pytestmark = pytest.mark.slow


def get(stack: Stack, path: str, **params: Any) -> httpx.Response:
    """GET a job route of the stack's producer."""
    return httpx.get(f"{stack.api}{path}", params=params, timeout=30)


def blocks_of(result: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """The result's blocks with this label, in reading order."""
    return [b for page in result["pages"] for b in page["blocks"] if b["label"] == label]


@pytest.fixture
def local_stack(stack: Stack) -> Stack:
    """The stack with one worker on the local engine (Tesseract), no vLLM."""
    stack.start_worker(engine="local", vllm_url="", engine_timeout_s=120)
    return stack


def test_a_page_range_reads_and_counts_only_the_pages_it_names(local_stack: Stack) -> None:
    job_id = local_stack.submit(report_document(4), pages="2,4", max_pages=2)
    view = local_stack.wait(job_id, timeout_s=180)
    assert view["status"] == "done", view
    result = view["result"]
    assert [p["number"] for p in result["pages"]] == [2, 4] and result["page_count"] == 2
    assert view["progress"] == {"pages_done": 2, "pages_total": 2}
    headers = [b["text"] for b in blocks_of(result, "page_header")]
    assert headers == ["Report copy 2", "Report copy 4"]  # in the JSON, not the body
    assert "Report copy" not in result["markdown"]


def test_a_born_digital_report_comes_back_with_its_structure(local_stack: Stack) -> None:
    view = local_stack.wait(local_stack.submit(report_document(1)), timeout_s=180)
    result = view["result"]
    assert [b["text"] for b in blocks_of(result, "title")] == ["Harbour Traffic Report"]
    assert result["markdown"].startswith("# Harbour Traffic Report") or (
        "\n# Harbour Traffic Report" in result["markdown"]
    )
    assert "compilation" in result["markdown"]  # "com-" + "pilation" joined again
    [table] = blocks_of(result, "table")
    cells = {(c["row"], c["col"]): c["text"] for c in table["table"]["cells"]}
    assert cells[(0, 0)] == TABLE[0][0] and cells[(3, 2)] == TABLE[3][2]
    assert "| Region |" in result["markdown"].replace("  ", " ")
    [page_number] = blocks_of(result, "page_number")
    assert page_number["text"] == "7" and "\n7\n" not in result["markdown"]


def test_tables_figures_and_pages_have_their_own_routes(local_stack: Stack) -> None:
    job_id = local_stack.submit(report_document(1))
    result = local_stack.wait(job_id, timeout_s=180)["result"]
    rows = list(csv.reader(io.StringIO(get(local_stack, f"/v1/jobs/{job_id}/tables/1.csv").text)))
    assert rows == TABLE
    [figure] = blocks_of(result, "figure")
    assert result["images"] == [figure["image"]]
    png = get(local_stack, f"/v1/jobs/{job_id}/images/{figure['image']}")
    assert png.headers["content-type"] == "image/png"
    assert pymupdf.Pixmap(png.content).width > 100  # the picture, cropped at the job's DPI
    assert f"](images/{figure['image']})" in result["markdown"]
    page = get(local_stack, f"/v1/jobs/{job_id}/pages/1").json()
    assert page["number"] == 1 and page["blocks"] == result["pages"][0]["blocks"]


def test_a_scan_comes_back_as_a_searchable_pdf_of_the_same_pages(local_stack: Stack) -> None:
    scan = pymupdf.open()
    for source in pymupdf.open(stream=report_document(2)):
        page = scan.new_page(width=source.rect.width, height=source.rect.height)
        shot = source.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY)
        page.insert_image(page.rect, stream=shot.tobytes("jpeg", jpg_quality=80))
    job_id = local_stack.submit(scan.tobytes(), searchable_pdf=True)
    result = local_stack.wait(job_id, timeout_s=240)["result"]
    assert result["searchable_pdf"] is True
    pdf = get(local_stack, f"/v1/jobs/{job_id}/result", format="pdf")
    assert pdf.headers["content-type"] == "application/pdf"
    with pymupdf.open(stream=pdf.content, filetype="pdf") as made:
        assert [p.rect for p in made] == [p.rect for p in scan]
        text = " ".join(p.get_text() for p in made)
    assert "Harbour Traffic Report" in " ".join(text.split())
    assert all(word in text for word in ("Region", "Revenue", "ferries"))


def test_every_text_format_renders_the_same_document(local_stack: Stack) -> None:
    job_id = local_stack.submit(report_document(1))
    local_stack.wait(job_id, timeout_s=180)
    html = get(local_stack, f"/v1/jobs/{job_id}/result", format="html").text
    assert "<h1" in html and 'data-bbox="' in html and "<table" in html
    text = get(local_stack, f"/v1/jobs/{job_id}/result", format="text").text
    chunks = get(local_stack, f"/v1/jobs/{job_id}/result", format="chunks", chunk_tokens=64)
    lines = [httpx.Response(200, content=line).json() for line in chunks.text.splitlines()]
    assert "".join(chunk["text"] for chunk in lines) == text
    assert all(chunk["tokens"] <= 64 and chunk["pages"] == [1] for chunk in lines)


def test_layout_off_reads_plain_text_blocks_without_the_layout_model(local_stack: Stack) -> None:
    view = local_stack.wait(local_stack.submit(report_document(1), layout=False), timeout_s=180)
    assert view["status"] == "done", view
    [page] = view["result"]["pages"]
    assert {b["label"] for b in page["blocks"]} == {"text"}
    assert "Harbour Traffic Report" in view["result"]["markdown"]
