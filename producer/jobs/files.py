"""A job's parts by themselves: a table as CSV, a figure's image, one page as soon as it is read."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath

from ocrq.producer.jobs.outputs import decoded
from ocrq.producer.jobs.routes import ended_record
from ocrq.producer.jobs.stored import RESULT_READ_FIELDS, job_file, result_json
from ocrq.producer.runtime import Runtime, caller
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.page_ranges import parse_ranges
from ocrq.shared.record import Field, JobRecord, figure_file
from ocrq.shared.render.tables import table_csv
from ocrq.shared.schemas import ACTIVE, Status, Table

TABLE_NAME = re.compile(r"([1-9][0-9]{0,5})\.csv")
IMAGE_NAME = re.compile(r"p[1-9][0-9]{0,4}-[1-9][0-9]{0,3}\.png")
# Figures never change once written: a browser may keep them (private: they need a key).
IMAGE_CACHE = "private, max-age=31536000, immutable"
PAGE_FIELDS = (Field.STATUS, Field.TENANT, Field.OPTIONS, Field.PAGES_TOTAL)


def nth_table(tables: list[Table | None], n: int, job_id: str) -> Table:
    """The n-th (1-based) table block's grid; 404 when there is none."""
    if n > len(tables):
        raise OcrqError(ErrorCode.NOT_FOUND, f"job {job_id} has {len(tables)} table(s), not {n}")
    table = tables[n - 1]
    if table is None:
        raise OcrqError(ErrorCode.NOT_FOUND, f"table {n} of job {job_id} has no cell grid")
    return table


@get("/v1/jobs/{job_id:str}/tables/{name:str}", summary="One table of the result as CSV")
async def get_table(
    request: Request[Any, Any, Any], state: State, job_id: FromPath[str], name: FromPath[str]
) -> Response[str]:
    """``n.csv``: the n-th table block of the document (reading order, from 1) as CSV."""
    rt, tenant = caller(request, state, job_id=job_id)
    match = TABLE_NAME.fullmatch(name)
    if match is None:
        raise OcrqError(ErrorCode.NOT_FOUND, f"no table {name}: tables are named 1.csv, 2.csv…")
    record = await ended_record(rt, job_id, tenant, RESULT_READ_FIELDS)
    result = await decoded(await result_json(rt, job_id, record))
    tables = [b.table for page in result.pages for b in page.blocks if b.label == "table"]
    table = nth_table(tables, int(match[1]), job_id)
    return Response(table_csv(table), media_type="text/csv")  # Litestar adds the charset


@get("/v1/jobs/{job_id:str}/images/{name:str}", summary="One figure of the result (PNG)")
async def get_image(
    request: Request[Any, Any, Any], state: State, job_id: FromPath[str], name: FromPath[str]
) -> Response[bytes]:
    """``p<page>-<k>.png``: the k-th figure of a page, cropped at the job's DPI."""
    rt, tenant = caller(request, state, job_id=job_id)
    if IMAGE_NAME.fullmatch(name) is None:
        raise OcrqError(ErrorCode.NOT_FOUND, f"no image {name}: figures are named p1-1.png…")
    record = await ended_record(rt, job_id, tenant, (Field.STATUS, Field.TENANT, Field.RESULT_REF))
    data = await job_file(rt, job_id, record, figure_file(name))
    if data is None:
        raise OcrqError(ErrorCode.NOT_FOUND, f"job {job_id} has no image {name}")
    return Response(data, media_type="image/png", headers={"Cache-Control": IMAGE_CACHE})


PageNumber = FromPath[int]


@get("/v1/jobs/{job_id:str}/pages/{number:int}", summary="One page's result, once it is read")
async def get_page(
    request: Request[Any, Any, Any], state: State, job_id: FromPath[str], number: PageNumber
) -> Response[bytes]:
    """The Page JSON as soon as that page is read (while the job runs; once it is done, the
    result's page); 409 with Retry-After while it may still come, 404 when it never will."""
    rt, tenant = caller(request, state, job_id=job_id)
    record = await ended_record(rt, job_id, tenant, PAGE_FIELDS)
    outside_of(record, number, job_id)
    if record.status == Status.DONE:
        # The result's own page: the document-wide pass (heading levels) may have changed
        # what the page looked like when it was first read.
        page = await page_of_result(rt, job_id, tenant, number)
    else:
        (page,) = await rt.store.read_pages(job_id, [number])
    if page is not None:
        return Response(page, media_type="application/json")
    if record.status in ACTIVE:
        raise OcrqError(
            ErrorCode.CONFLICT, f"page {number} of job {job_id} is not read yet", retry_after=1
        )
    message = f"job {job_id} is {record.status}: page {number} was not read"
    raise OcrqError(ErrorCode.NOT_FOUND, message)


def outside_of(record: JobRecord, number: int, job_id: str) -> None:
    """404 for a page the job will never read: not among options.pages, past its last page."""
    spec = record.options.pages
    if spec is not None and not any(low <= number <= high for low, high in parse_ranges(spec)):
        raise OcrqError(ErrorCode.NOT_FOUND, f"job {job_id} reads pages {spec}, not {number}")
    if number < 1 or (spec is None and 0 < record.pages_total < number):
        raise OcrqError(
            ErrorCode.NOT_FOUND, f"job {job_id} has {record.pages_total} page(s), not {number}"
        )


async def page_of_result(rt: Runtime, job_id: str, tenant: str, number: int) -> bytes | None:
    """One page's JSON out of the finished result; None when the result has no such page."""
    record = await ended_record(rt, job_id, tenant, RESULT_READ_FIELDS)
    result = await decoded(await result_json(rt, job_id, record))
    found = next((p for p in result.pages if p.number == number), None)
    return None if found is None else msgspec.json.encode(found)


FILE_HANDLERS = [get_table, get_image, get_page]
