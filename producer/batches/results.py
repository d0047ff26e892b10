"""A batch's results in one download, streamed: JSON Lines, or a ZIP of each job's files."""

from __future__ import annotations

import asyncio
import zipfile
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, get
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Stream

from ocrq.producer.batches.fields_csv import fields_csv
from ocrq.producer.batches.members import (
    job_members,
    member_stem,
    safe_name,
    same_on_disk,
    zip_formats,
)
from ocrq.producer.batches.views import visible_batch
from ocrq.producer.jobs.outputs import CHUNK_TOKENS, ChunkTokens
from ocrq.producer.jobs.stored import result_json, started
from ocrq.producer.runtime import Runtime, caller
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import Field, JobRecord
from ocrq.shared.schemas import TERMINAL, ErrorBody, Status

__all__ = ["safe_name", "same_on_disk"]
PAGE = 100  # jobs read per round trip
INDEX = "index.jsonl"
RESULT_FIELDS = (
    Field.STATUS,
    Field.FILENAME,
    Field.ERROR,
    Field.RESULT,
    Field.RESULT_REF,
    Field.OPTIONS,
)
RESULTS_AT_ONCE = 8  # results read from the object store together (and held at once)
Format = Annotated[
    Literal["jsonl", "zip", "csv"] | None,
    Parameter(
        description="jsonl (default), zip (Accept: application/zip works too), or csv: the "
        "fields of a batch submitted with options.extract, a row per document"
    ),
]
Formats = Annotated[
    str | None,
    Parameter(
        description="zip: each job's files, comma-separated: markdown (default), json, html, "
        "text, chunks, pdf (for jobs that kept one); implies format=zip unless format=jsonl"
    ),
]


async def finished_jobs(rt: Runtime, batch_id: str) -> AsyncIterator[tuple[str, JobRecord]]:
    """The batch's ended jobs in submission order, a page of them per round trip, each
    with its result (read from the object store a few at a time when it is there)."""
    start = 0
    while ids := await rt.batches.job_ids(batch_id, start, start + PAGE - 1):
        rows = await rt.batches.job_rows(ids, RESULT_FIELDS)
        ended = [
            (job_id, row) for job_id, row in zip(ids, rows, strict=True) if row.status in TERMINAL
        ]
        for at in range(0, len(ended), RESULTS_AT_ONCE):
            group = ended[at : at + RESULTS_AT_ONCE]
            filled = await asyncio.gather(*(with_result(rt, job_id, row) for job_id, row in group))
            for (job_id, _), row in zip(group, filled, strict=True):
                yield job_id, row
        start += PAGE


async def with_result(rt: Runtime, job_id: str, row: JobRecord) -> JobRecord:
    """The row with its result read from the object store when it is there; a result gone
    from the store (swept) is the row's error instead. The store unreachable raises."""
    if row.result is not None or not row.result_ref:
        return row
    try:
        return msgspec.structs.replace(row, result=await result_json(rt, job_id, row))
    except OcrqError as e:
        if e.code != ErrorCode.NOT_FOUND:
            raise
        gone = ErrorBody(code=e.code.value, message=e.message)
        return msgspec.structs.replace(row, error=gone)


def json_line(job_id: str, row: JobRecord) -> bytes:
    """One job's line: id, file, status, error, and the stored result as written."""
    head = msgspec.json.encode(
        {"id": job_id, "filename": row.filename or None, "status": row.status, "error": row.error}
    )
    return head[:-1] + b',"result":' + (row.result or b"null") + b"}\n"


async def json_lines(rt: Runtime, batch_id: str) -> AsyncIterator[bytes]:
    """The JSON Lines body."""
    async for job_id, row in finished_jobs(rt, batch_id):
        yield json_line(job_id, row)


class Drain:
    """A write-only file for zipfile that hands out what was written since the last drain."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.position = 0

    def write(self, data: bytes) -> int:
        """Keep the bytes until drained."""
        self.buffer += data
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        """Bytes written so far (zipfile records member offsets with it)."""
        return self.position

    def flush(self) -> None:
        """Nothing to flush: drain() hands the bytes out."""

    def drain(self) -> bytes:
        """The bytes written since the last call."""
        out, self.buffer = bytes(self.buffer), bytearray()
        return out


def markdown_name(row: JobRecord, job_id: str, taken: set[str]) -> str:
    """``<input stem>.md``, unique in the archive (members.member_stem)."""
    return member_stem(row, job_id, taken) + ".md"


def indexed(line: bytes, names: list[str]) -> bytes:
    """An index line with the job's files: ``file`` (the first) and ``files``."""
    return line[:-2] + b',"file":%s,"files":%s}\n' % (
        msgspec.json.encode(names[0] if names else None),
        msgspec.json.encode(names),
    )


async def zip_of_results(
    rt: Runtime, batch_id: str, formats: tuple[str, ...], tokens: int
) -> AsyncIterator[bytes]:
    """A ZIP, member by member: each done job's files, and index.jsonl of every job."""
    sink, taken = Drain(), {INDEX}
    index = bytearray()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:  # type: ignore[call-overload]
        async for job_id, row in finished_jobs(rt, batch_id):
            line = json_line(job_id, msgspec.structs.replace(row, result=None))
            if row.status == Status.DONE and row.result:
                stem = member_stem(row, job_id, taken)
                members = await job_members(rt, job_id, row, stem, formats, tokens)
                for name, data in members:
                    archive.writestr(name, data)
                line = indexed(line, [name for name, _ in members])
            index += line
            yield sink.drain()
        archive.writestr(INDEX, bytes(index))
    yield sink.drain()


@get("/v1/batches/{batch_id:str}/results", summary="The batch's results: JSON Lines or ZIP")
async def batch_results(
    request: Request[Any, Any, Any],
    state: State,
    batch_id: FromPath[str],
    format: Format = None,
    formats: Formats = None,
    chunk_tokens: ChunkTokens = CHUNK_TOKENS,
) -> Stream:
    """Every ended job's result, streamed, in submission order."""
    rt, tenant = caller(request, state)
    record = await visible_batch(rt, batch_id, tenant)
    # A formats list asks for files: a ZIP, unless format=jsonl says otherwise (it has none).
    wants_zip = format == "zip" or (
        format is None
        and (formats is not None or "application/zip" in request.headers.get("accept", ""))
    )
    if format == "csv":
        if not record.options.extract:
            message = f"batch {record.id} has no fields: submit it with options.extract"
            raise OcrqError(ErrorCode.NOT_ACCEPTABLE, message)
        disposition = f'attachment; filename="batch-{safe_name(record.id)}.csv"'
        rows = fields_csv(finished_jobs(rt, record.id), record.options.extract)
        return Stream(
            await started(rows), media_type="text/csv", headers={"Content-Disposition": disposition}
        )
    if wants_zip:
        # The stored id (the id's shape was checked), never the path as sent.
        disposition = f'attachment; filename="batch-{safe_name(record.id)}.zip"'
        # The first job read before answering: the store down is a 503, not a broken ZIP.
        return Stream(
            await started(zip_of_results(rt, record.id, zip_formats(formats), chunk_tokens)),
            media_type="application/zip",
            headers={"Content-Disposition": disposition},
        )
    return Stream(await started(json_lines(rt, batch_id)), media_type="application/x-ndjson")
