"""A job with a structured result, driven through the store the way a worker does it.

The result has every kind of block the API renders: a title, a heading, a paragraph, a
table with cells (a header row), a figure with its cropped image, a page footer and a page
number; page 2 holds one more paragraph and a second table.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
from litestar.testing import TestClient

from ocrq.shared.render.markdown import document_markdown, page_markdown
from ocrq.shared.schemas import Block, Cell, EngineInfo, Page, Result, Table
from ocrq.shared.store import JobStore, Outcome
from support.documents import png
from support.jobflow import ME, take
from support.payloads import b64, small_pdf

FIGURE = png(40, 30)
SEARCHABLE_PDF = small_pdf("searchable copy")
PAGE_SIZE = (1000, 1400)


def box(x0: float, y0: float, x1: float, y1: float) -> dict[str, list[float] | list[int]]:
    """A block's 0..1 box and the same box in pixels of a 1000 x 1400 page."""
    w, h = PAGE_SIZE
    return {
        "bbox": [x0, y0, x1, y1],
        "bbox_px": [round(x0 * w), round(y0 * h), round(x1 * w), round(y1 * h)],
    }


def cell_box(row: int, col: int) -> list[float]:
    """The box of a cell of the price table."""
    return [0.1 + 0.4 * col, 0.4 + 0.05 * row, 0.5 + 0.4 * col, 0.45 + 0.05 * row]


def price_table() -> Table:
    """A 3 x 2 table: a header row (item, price) and two items."""
    rows = [("Item", "Price"), ("Coffee", "2.50"), ('Cake, "lemon"', "3.10")]
    cells = [
        Cell(row=r, col=c, text=text, header=r == 0, bbox=cell_box(r, c))
        for r, row in enumerate(rows)
        for c, text in enumerate(row)
    ]
    return Table(rows=3, cols=2, cells=cells)


def first_page() -> Page:
    """Page 1: title, heading, text, table, figure, footer, page number."""
    table = price_table()
    blocks = [
        Block(label="title", text="Quarterly Report", level=1, **box(0.1, 0.05, 0.9, 0.1)),
        Block(label="heading", text="Sales", level=2, **box(0.1, 0.15, 0.5, 0.2)),
        Block(label="text", text="Sales rose in every region.", **box(0.1, 0.22, 0.9, 0.3)),
        Block(label="table", text="", table=table, **box(0.1, 0.4, 0.9, 0.55)),
        Block(label="figure", text="", image="p1-1.png", **box(0.1, 0.6, 0.5, 0.8)),
        Block(label="page_footer", text="Confidential draft", **box(0.1, 0.95, 0.6, 0.98)),
        Block(label="page_number", text="1", **box(0.9, 0.95, 0.95, 0.98)),
    ]
    return with_markdown(Page(number=1, width=PAGE_SIZE[0], height=PAGE_SIZE[1], blocks=blocks))


def second_page() -> Page:
    """Page 2: a paragraph and a one-cell table."""
    table = Table(rows=1, cols=1, cells=[Cell(row=0, col=0, text="only cell")])
    blocks = [
        Block(label="text", text="Outlook stays bright.", **box(0.1, 0.1, 0.9, 0.2)),
        Block(label="table", text="", table=table, **box(0.1, 0.3, 0.5, 0.4)),
    ]
    return with_markdown(Page(number=2, width=PAGE_SIZE[0], height=PAGE_SIZE[1], blocks=blocks))


def with_markdown(page: Page) -> Page:
    """The page with its Markdown rendered as the worker renders it (no furniture)."""
    return msgspec.structs.replace(page, markdown=page_markdown(page))


def structured_result(job_id: str, *, searchable_pdf: bool = False) -> Result:
    """The two-page result of job_id."""
    pages = [first_page(), second_page()]
    return Result(
        id=job_id,
        status="done",
        media_type="application/pdf",
        page_count=2,
        markdown=document_markdown(pages, []),
        pages=pages,
        images=["p1-1.png"],
        searchable_pdf=searchable_pdf,
        engine=EngineInfo(name="test", model="none", profile="none"),
    )


async def job_queued(store: JobStore, lane: str = "interactive", timeout_s: float = 10) -> None:
    """Return once a job waits on the lane (a client in another task submitted it)."""
    deadline = time.monotonic() + timeout_s
    while not await store.redis.xlen(store.keys.stream(lane)):
        assert time.monotonic() < deadline, "no job was queued"
        await asyncio.sleep(0.05)


async def read_one_page(store: JobStore, lane: str = "interactive") -> tuple[str, str]:
    """Claim the next job and keep its first page as read; (job_id, entry)."""
    job_id, entry = await take(store, lane)
    page = msgspec.json.encode(first_page())
    assert await store.progress(job_id, ME, 1, 2, pages={1: page})
    return job_id, entry


async def finish_structured(
    store: JobStore, *, searchable_pdf: bool = False, lane: str = "interactive"
) -> str:
    """Claim the next job, read both pages, keep its files, finish it; its id."""
    job_id, entry = await read_one_page(store, lane)
    return await finish_claimed(store, job_id, entry, searchable_pdf=searchable_pdf, lane=lane)


async def finish_claimed(
    store: JobStore,
    job_id: str,
    entry: str,
    *,
    searchable_pdf: bool = False,
    lane: str = "interactive",
) -> str:
    """Read page 2 of a claimed job, keep its figure (and PDF), finish it; its id."""
    assert await store.progress(job_id, ME, 2, 2, pages={2: msgspec.json.encode(second_page())})
    files = {"images/p1-1.png": FIGURE}
    if searchable_pdf:
        files["searchable.pdf"] = SEARCHABLE_PDF
    assert await store.save_files(job_id, ME, files)
    result = structured_result(job_id, searchable_pdf=searchable_pdf)
    outcome = Outcome.done(msgspec.json.encode(result), 2)
    assert await store.finish(job_id, lane, entry, ME, outcome)
    return job_id


def submit_report(api: TestClient[Any], **options: Any) -> str:
    """Submit a small PDF named "Quarterly report.pdf" with these options; its id."""
    body = {"document": b64(small_pdf()), "filename": "Quarterly report.pdf", "options": options}
    r = api.post("/v1/jobs", json=body)
    assert r.status_code == 202, r.text
    job_id: str = r.json()["id"]
    return job_id


async def done_job(api: TestClient[Any], store: JobStore, **options: Any) -> str:
    """A job submitted through the API and finished with the structured two-page result."""
    job_id = submit_report(api, **options)
    await finish_structured(store, searchable_pdf=options.get("searchable_pdf", False))
    return job_id
