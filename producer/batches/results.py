"""A batch's results in one download, streamed: JSON Lines, or a ZIP of Markdown files."""

from __future__ import annotations

import re
import unicodedata
import zipfile
from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

import msgspec
from litestar import Request, get
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Stream

from ocrq.producer.batches.views import visible_batch
from ocrq.producer.runtime import Runtime, caller
from ocrq.shared.record import Field, JobRecord
from ocrq.shared.schemas import TERMINAL, Status

PAGE = 100  # jobs read per round trip
MAX_STEM_BYTES = 200  # a member's name within the 255 bytes file systems allow
INDEX = "index.jsonl"
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
RESULT_FIELDS = (Field.STATUS, Field.FILENAME, Field.ERROR, Field.RESULT)
Format = Annotated[
    Literal["jsonl", "zip"] | None,
    Parameter(description="jsonl (default) or zip; Accept: application/zip works too"),
]


class MarkdownOnly(msgspec.Struct):
    """The one field of a stored Result a Markdown file needs."""

    markdown: str


async def finished_jobs(rt: Runtime, batch_id: str) -> AsyncIterator[tuple[str, JobRecord]]:
    """The batch's ended jobs in submission order, a page of them per round trip."""
    start = 0
    while ids := await rt.batches.job_ids(batch_id, start, start + PAGE - 1):
        rows = await rt.batches.job_rows(ids, RESULT_FIELDS)
        for job_id, row in zip(ids, rows, strict=True):
            if row.status in TERMINAL:
                yield job_id, row
        start += PAGE


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


def safe_name(name: str) -> str:
    """A name with every control character (C0, DEL, C1) replaced by "_", the rest kept.

    zipfile cuts a member's name at its first NUL ("run.sh\\0.pdf" would be "run.sh"), and a
    CR or LF in a name would break a header or a line of the listing.
    """
    return _CONTROLS.sub("_", name)


def markdown_name(row: JobRecord, job_id: str, taken: set[str]) -> str:
    """``<input stem>.md``, made unique; the input name is a label, never a path.

    Unique ignoring case, as the file systems a ZIP is unpacked on often compare names
    (``taken`` holds the names given so far, as same_on_disk gives them).
    """
    segment = safe_name(row.filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    stem = PurePosixPath(segment).stem.encode()[:MAX_STEM_BYTES].decode(errors="ignore")
    stem = stem or job_id
    name, n = f"{stem}.md", 1
    while same_on_disk(name) in taken:
        n += 1
        name = f"{stem}-{n}.md"
    taken.add(same_on_disk(name))
    return name


def same_on_disk(name: str) -> str:
    """What two names share when a file system takes them for one (case, Unicode form)."""
    return unicodedata.normalize("NFC", name).casefold()


async def zip_of_markdown(rt: Runtime, batch_id: str) -> AsyncIterator[bytes]:
    """A ZIP, member by member: each done job's Markdown, and index.jsonl of every job."""
    sink, taken = Drain(), {INDEX}
    index = bytearray()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:  # type: ignore[call-overload]
        async for job_id, row in finished_jobs(rt, batch_id):
            line = json_line(job_id, msgspec.structs.replace(row, result=None))
            if row.status == Status.DONE and row.result:
                name = markdown_name(row, job_id, taken)
                markdown = msgspec.json.decode(row.result, type=MarkdownOnly).markdown
                archive.writestr(name, markdown)
                line = line[:-2] + b',"file":' + msgspec.json.encode(name) + b"}\n"
            index += line
            yield sink.drain()
        archive.writestr(INDEX, bytes(index))
    yield sink.drain()


@get("/v1/batches/{batch_id:str}/results", summary="The batch's results: JSON Lines or ZIP")
async def batch_results(
    request: Request[Any, Any, Any], state: State, batch_id: FromPath[str], format: Format = None
) -> Stream:
    """Every ended job's result, streamed, in submission order."""
    rt, tenant = caller(request, state)
    record = await visible_batch(rt, batch_id, tenant)
    wants_zip = format == "zip" or (
        format is None and "application/zip" in request.headers.get("accept", "")
    )
    if wants_zip:
        # The stored id (the id's shape was checked), never the path as sent.
        disposition = f'attachment; filename="batch-{safe_name(record.id)}.zip"'
        return Stream(
            zip_of_markdown(rt, record.id),
            media_type="application/zip",
            headers={"Content-Disposition": disposition},
        )
    return Stream(json_lines(rt, batch_id), media_type="application/x-ndjson")
