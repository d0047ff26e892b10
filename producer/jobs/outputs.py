"""Result formats: which one a request asks for, and the stored result rendered in it.

``format=`` wins over ``Accept``; without either the answer is the Result JSON as the worker
wrote it. Rendering is CPU work: above ``OFF_LOOP_BYTES`` of stored JSON it runs in a
thread, so one big result never stalls the event loop's other requests.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Literal
from urllib.parse import quote

import msgspec
from litestar.params import Parameter

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.render.chunks import chunks_ndjson, document_chunks
from ocrq.shared.render.html import document_html
from ocrq.shared.render.markdown import document_markdown
from ocrq.shared.render.text import document_text
from ocrq.shared.schemas import Result

# Format → media type, in the order a tie between Accept ranges is broken.
FORMATS: dict[str, str] = {
    "json": "application/json",
    "markdown": "text/markdown",
    "html": "text/html",
    "text": "text/plain",
    "chunks": "application/x-ndjson",
    "pdf": "application/pdf",
    "fields": "application/json",  # Result.fields alone; only by format=, never by Accept
}
FormatName = Literal["json", "markdown", "html", "text", "chunks", "pdf", "fields"]
DEFAULT_FORMAT = "json"
OFF_LOOP_BYTES = 64 * 1024  # above this (about 4 ms of chunking, measured) render in a thread
CHUNK_TOKENS = 512
ChunkTokens = Annotated[
    int, Parameter(ge=32, le=8192, description="chunks: the token budget of one chunk")
]
_STEM_CONTROLS = re.compile(r'[\x00-\x1f\x7f-\x9f"\\/]')


def pdf_not_kept(job_id: str) -> OcrqError:
    """406 for a searchable PDF the job did not ask for."""
    return OcrqError(
        ErrorCode.NOT_ACCEPTABLE,
        f"job {job_id} kept no searchable PDF: submit with options.searchable_pdf=true",
    )


def no_fields(job_id: str) -> OcrqError:
    """406 for the fields of a job that asked for none."""
    return OcrqError(
        ErrorCode.NOT_ACCEPTABLE,
        f"job {job_id} has no fields: submit with options.extract (a JSON Schema)",
    )


def accept_ranges(header: str) -> list[tuple[str, float]]:
    """An Accept header's media ranges with their q-values, in the header's order."""
    ranges = []
    for item in header.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        if not media:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0  # a q-value that is not a number accepts nothing
        ranges.append((media.lower(), q))
    return ranges


def range_match(media_type: str, ranges: list[tuple[str, float]]) -> tuple[float, int] | None:
    """(q, position) of the most specific range covering media_type; None when none does."""
    kind = media_type.split("/")[0]
    best: tuple[int, float, int] | None = None
    for position, (media, q) in enumerate(ranges):
        specificity = {media_type: 3, f"{kind}/*": 2, "*/*": 1}.get(media, 0)
        if specificity and (best is None or specificity > best[0]):
            best = (specificity, q, position)
    return None if best is None else (best[1], best[2])


def negotiate(job_id: str, fmt: str | None, accept: str, pdf_kept: bool) -> str:
    """The format to answer in: ``format=`` first, else the best Accept match, else JSON."""
    if fmt is not None:
        if fmt not in FORMATS:
            names = ", ".join(FORMATS)
            raise OcrqError(ErrorCode.INVALID_REQUEST, f"format: one of {names}, not {fmt!r}")
        if fmt == "pdf" and not pdf_kept:
            raise pdf_not_kept(job_id)
        return fmt
    ranges = accept_ranges(accept)
    if not ranges:
        return DEFAULT_FORMAT
    scored = []
    for order, (name, media_type) in enumerate(FORMATS.items()):
        if name == "fields":
            continue
        match = range_match(media_type, ranges)
        if match is not None and match[0] > 0:
            scored.append((-match[0], match[1], order, name))
    available = [row for row in scored if row[3] != "pdf" or pdf_kept]
    if not available:
        if scored:  # only the PDF was acceptable
            raise pdf_not_kept(job_id)
        offered = ", ".join(FORMATS.values())
        raise OcrqError(ErrorCode.NOT_ACCEPTABLE, f"Accept: {accept}: this result is {offered}")
    return min(available)[3]


@dataclass(frozen=True)
class Rendering:
    """How to render one result: the format, furniture (None: the job's own choice), chunks."""

    fmt: str
    keep_furniture: bool | None = None
    chunk_tokens: int = CHUNK_TOKENS


class MarkdownOnly(msgspec.Struct):
    """The one field of a stored Result that the stored Markdown needs."""

    markdown: str


def as_stored_markdown(how: Rendering, job_keeps: bool) -> bool:
    """True when ``how`` asks for the Markdown exactly as the worker rendered it (the job's
    own furniture choice): the stored ``markdown`` field, or result.md in the store."""
    keep = job_keeps if how.keep_furniture is None else how.keep_furniture
    return how.fmt == "markdown" and keep == job_keeps


def render(stored: bytes, how: Rendering, job_keeps: bool) -> bytes:
    """The stored Result JSON in ``how.fmt`` (not pdf: that is a stored file)."""
    if how.fmt == "json":
        return stored
    if as_stored_markdown(how, job_keeps):  # the worker rendered it so already
        return msgspec.json.decode(stored, type=MarkdownOnly).markdown.encode()
    keep = job_keeps if how.keep_furniture is None else how.keep_furniture
    result = msgspec.json.decode(stored, type=Result)
    if how.fmt == "markdown":
        return document_markdown(result.pages, result.segments, keep_furniture=keep).encode()
    if how.fmt == "html":
        return document_html(result, keep_furniture=keep).encode()
    if how.fmt == "text":
        return document_text(result, keep_furniture=keep).encode()
    if how.fmt == "chunks":
        chunks = document_chunks(result, chunk_tokens=how.chunk_tokens, keep_furniture=keep)
        return chunks_ndjson(chunks)
    if how.fmt == "fields":
        if result.fields is None:
            raise no_fields(result.id)
        return msgspec.json.encode(result.fields)
    raise ValueError(f"no renderer for {how.fmt}")


async def rendered(stored: bytes, how: Rendering, job_keeps: bool) -> bytes:
    """``render``, in a thread when the result is big."""
    if len(stored) > OFF_LOOP_BYTES and how.fmt != "json":
        return await asyncio.to_thread(render, stored, how, job_keeps)
    return render(stored, how, job_keeps)


async def decoded(stored: bytes) -> Result:
    """The stored Result, decoded in a thread when it is big."""
    if len(stored) > OFF_LOOP_BYTES:
        return await asyncio.to_thread(msgspec.json.decode, stored, type=Result)
    return msgspec.json.decode(stored, type=Result)


def media_type_of(fmt: str) -> str:
    """The Content-Type of a format (Litestar adds the charset to text types)."""
    return FORMATS[fmt]


def download_stem(filename: str | None, job_id: str) -> str:
    """The input's stem for a download's name: no path, no control or quoting characters."""
    segment = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    stem = _STEM_CONTROLS.sub("_", PurePosixPath(segment).stem)[:200]
    return stem or job_id


def attachment(filename: str | None, job_id: str, suffix: str) -> str:
    """A Content-Disposition naming the download after the input (RFC 6266, UTF-8 too)."""
    name = download_stem(filename, job_id) + suffix
    fallback = name.encode("ascii", "replace").decode().replace("?", "_")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
