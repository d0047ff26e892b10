"""The files one done job puts in a batch's results ZIP: one per format, and its figures.

Every file of a job shares one stem, unique in the archive whatever the formats asked:
``<stem>.md``, ``.json``, ``.html``, ``.txt``, ``.chunks.jsonl``, ``.pdf`` (when the job kept
one), and its figures under ``<stem>/images/``; the Markdown and HTML link them there.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath
from urllib.parse import quote

import msgspec

from ocrq.producer.jobs.outputs import Rendering, rendered
from ocrq.producer.jobs.stored import job_file
from ocrq.producer.runtime import Runtime
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import SEARCHABLE_PDF, JobRecord, figure_file
from ocrq.shared.render.formats import SUFFIXES
from ocrq.shared.schemas import keeps_pdf

DEFAULT_FORMATS = ("markdown",)
_NAME = "(" + "|".join(SUFFIXES) + ")"
FORMATS_PATTERN = f"^{_NAME}(,{_NAME})*$"  # what zip_formats accepts, for the OpenAPI document
MAX_STEM_BYTES = 200  # a member's name within the 255 bytes file systems allow
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
_IMAGE_LINK = re.compile(r"(?<![\w/.%-])images/(p[0-9]+-[0-9]+\.png)")


class FigureList(msgspec.Struct):
    """The one field of a stored Result that says which figures it has."""

    images: list[str] = msgspec.field(default_factory=list)


def zip_formats(raw: str | None) -> tuple[str, ...]:
    """The ``formats`` list of a ZIP download, in the order given; 400 for an unknown one."""
    if raw is None:
        return DEFAULT_FORMATS
    names = raw.split(",")
    if any(name not in SUFFIXES for name in names):
        known = ",".join(SUFFIXES)
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"formats: a list of {known}, not {raw!r}")
    return tuple(dict.fromkeys(names))


def safe_name(name: str) -> str:
    """A name with every control character (C0, DEL, C1) replaced by "_", the rest kept.

    zipfile cuts a member's name at its first NUL ("run.sh\\0.pdf" would be "run.sh"), and a
    CR or LF in a name would break a header or a line of the listing.
    """
    return _CONTROLS.sub("_", name)


def same_on_disk(name: str) -> str:
    """What two names share when a file system takes them for one (case, Unicode form)."""
    return unicodedata.normalize("NFC", name).casefold()


def member_stem(row: JobRecord, job_id: str, taken: set[str]) -> str:
    """The job's stem: the input's, made unique; the input name is a label, never a path.

    Unique ignoring case, as the file systems a ZIP is unpacked on often compare names; every
    name the stem could give (each format's file, its figures' folder) is taken at once, so
    names never depend on the formats asked (``taken`` holds them as same_on_disk gives them).
    """
    segment = safe_name(row.filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = PurePosixPath(segment).stem.encode()[:MAX_STEM_BYTES].decode(errors="ignore")
    base = base or job_id
    stem, n = base, 1
    while any(same_on_disk(name) in taken for name in names_of(stem)):
        n += 1
        stem = f"{base}-{n}"
    taken.update(same_on_disk(name) for name in names_of(stem))
    return stem


def names_of(stem: str) -> list[str]:
    """Every name a stem stands for: the folder of its figures and each format's file."""
    return [stem, *(stem + suffix for suffix in SUFFIXES.values())]


def relinked(document: bytes, stem: str, figures: list[str]) -> bytes:
    """Markdown or HTML with its figure links pointing into ``<stem>/images/``."""
    kept = set(figures)
    prefix = quote(stem, safe="")

    def link(match: re.Match[str]) -> str:
        return f"{prefix}/{match[0]}" if match[1] in kept else match[0]

    return _IMAGE_LINK.sub(link, document.decode()).encode()


async def job_members(
    rt: Runtime, job_id: str, row: JobRecord, stem: str, formats: tuple[str, ...], tokens: int
) -> list[tuple[str, bytes]]:
    """(name, bytes) of each file a done job puts in the ZIP (its result read already:
    ``row.result``; its files from Redis or the object store)."""
    stored = row.result or b"{}"
    figures = msgspec.json.decode(stored, type=FigureList).images
    members: list[tuple[str, bytes]] = []
    for fmt in formats:
        if fmt == "pdf":
            pdf = (
                await job_file(rt, job_id, row, SEARCHABLE_PDF) if keeps_pdf(row.options) else None
            )
            if pdf is not None:
                members.append((stem + SUFFIXES[fmt], pdf))
            continue
        if fmt == "fields" and not row.options.extract:
            continue  # a job without the extract option has no fields to write
        how = Rendering(fmt, None, tokens)
        data = await rendered(stored, how, row.options.keep_headers_footers)
        if fmt in ("markdown", "html") and figures:
            data = relinked(data, stem, figures)
        members.append((stem + SUFFIXES[fmt], data))
    for name in figures:
        image = await job_file(rt, job_id, row, figure_file(name))
        if image is not None:
            members.append((f"{stem}/images/{name}", image))
    return members
