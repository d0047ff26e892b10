"""The client and the CLI ask for every result format, page ranges, and a synchronous submit.

A real producer process; the jobs are finished through the store as a worker would.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

import pytest
from support.payloads import small_pdf
from support.structured_results import FIGURE, SEARCHABLE_PDF, finish_structured, job_queued

from ocrq.cli.commands import main
from ocrq.client import AsyncClient, Client, Conflict, Job
from ocrq.shared.schemas import JobView, Result
from ocrq.shared.store import JobStore

PDF = small_pdf()


async def test_options_pass_through_and_every_format_comes_back(
    api_url: str, store: JobStore
) -> None:
    with Client(api_url) as client:
        job = client.submit(PDF, pages="1-2", searchable_pdf=True, keep_headers_footers=False)
        options = client.status(job).options
        assert (options.pages, options.searchable_pdf, options.keep_headers_footers) == (
            "1-2",
            True,
            False,
        )
        await finish_structured(store, searchable_pdf=True)
        assert isinstance(client.result(job), Result)
        assert client.result(job, format="markdown").startswith("# Quarterly Report")
        assert '<h1 data-page="1"' in client.result(job, format="html")
        text = client.result(job, format="text")
        chunks = client.result(job, format="chunks", chunk_tokens=32).splitlines()
        assert "".join(json.loads(c)["text"] for c in chunks) == text
        assert json.loads(client.result(job, format="json"))["page_count"] == 2
        footers = client.result(job, format="text", keep_headers_footers=True)
        assert "Confidential draft" in footers and "Confidential draft" not in text
        assert client.result(job, format="pdf") == SEARCHABLE_PDF


async def test_tables_figures_and_pages_by_themselves(api_url: str, store: JobStore) -> None:
    with Client(api_url) as client:
        job = client.submit(PDF)
        with pytest.raises(Conflict):
            client.page(job, 1)
        await finish_structured(store)
        assert next(csv.reader(io.StringIO(client.table_csv(job, 1)))) == ["Item", "Price"]
        assert client.image(job, "p1-1.png") == FIGURE
        assert client.page(job, 2).number == 2


async def test_submit_with_wait_returns_the_finished_view(api_url: str, store: JobStore) -> None:
    async with AsyncClient(api_url) as client:
        submitting = asyncio.create_task(client.submit(PDF, wait=20))
        await job_queued(store)
        await finish_structured(store)
        view = await submitting
        assert isinstance(view, JobView) and view.status == "done"
        assert view.result is not None and view.result.page_count == 2
        pending = await client.submit(PDF, wait=1)
        assert isinstance(pending, Job) and pending.status == "queued"


async def test_the_cli_writes_the_format_asked_and_pdf_asks_for_one(
    api_url: str, store: JobStore, tmp_path: Path
) -> None:
    doc = tmp_path / "in" / "report.pdf"
    doc.parent.mkdir()
    doc.write_bytes(PDF)
    out = tmp_path / "out"
    for fmt, suffix in (("html", ".html"), ("pdf", ".pdf"), ("chunks", ".chunks.jsonl")):
        argv = ["submit", str(doc), "--out", str(out), "--format", fmt, "--pages", "1-2"]
        running = asyncio.create_task(asyncio.to_thread(main, [*argv, "--url", api_url]))
        await job_queued(store)
        job_id = await finish_structured(store, searchable_pdf=fmt == "pdf")
        assert await running == 0, fmt
        written = (out / f"report{suffix}").read_bytes()
        if fmt == "pdf":
            assert written == SEARCHABLE_PDF
        else:
            assert written.startswith(b"<!DOCTYPE html>" if fmt == "html" else b'{"index":0')
        await store.redis.delete(store.keys.stream("interactive"))
        await store.ensure_groups()
    with Client(api_url) as client:
        options = client.status(job_id).options
        assert options.searchable_pdf is False and options.pages == "1-2"  # the last: chunks
    target = tmp_path / "one.txt"
    assert main(["result", job_id, "--format", "text", "--out", str(target), "--url", api_url]) == 0
    assert target.read_text().startswith("Quarterly Report\n\nSales")
