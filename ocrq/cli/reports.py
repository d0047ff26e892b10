"""What `ocrq submit` reports and writes, with or without --batch: one row per file."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import msgspec
from rich.console import Console
from rich.table import Table

from ocrq.client import Client
from ocrq.client.calls import TextFormat
from ocrq.shared.render.formats import SUFFIXES
from ocrq.shared.schemas import Fields, Result

SUMMARY_COLUMNS = ("file", "job_id", "status", "pages", "seconds", "error")
FORMAT_CHOICES = (*SUFFIXES, "md")  # the formats a file can be written in ("md": markdown)
# Formats the job's view already holds (its Result); the others are one more request.
IN_VIEW = frozenset({"markdown", "json"})
TEXT_FORMATS: dict[str, TextFormat] = {
    "json": "json",
    "markdown": "markdown",
    "html": "html",
    "text": "text",
    "chunks": "chunks",
}


@dataclass
class FileReport:
    """What happened to one file."""

    path: Path | str  # a file, or a document by reference (s3://…, https://…)
    job_id: str = ""
    status: str = "pending"
    pages: int = 0
    seconds: float = 0.0
    error: str = ""
    message: str = ""
    ok: bool = False

    def fail(self, code: str, message: str, status: str | None = None) -> None:
        """Record a failure: rejected at upload when no job exists, else the given status."""
        self.status = status or ("rejected" if not self.job_id else "error")
        self.error, self.message, self.ok = code, message, False

    def row(self) -> tuple[str, ...]:
        """The summary columns."""
        pages = str(self.pages) if self.pages else ""
        return (str(self.path), self.job_id, self.status, pages, f"{self.seconds:.1f}", self.error)


def output_paths(files: Sequence[Path], out: Path, suffix: str) -> list[Path]:
    """Where each file's result goes: the input tree mirrored under ``out``.

    Paths are taken relative to the deepest folder holding every input, and ``page.pdf``
    becomes ``page.md``; when two inputs of one folder share a stem (``x.pdf``, ``x.png``),
    both keep their whole name (``x.pdf.md``, ``x.png.md``).
    """
    resolved = [f.resolve() for f in files]
    root = Path(os.path.commonpath([r.parent for r in resolved])) if files else Path()
    stems = Counter((r.parent, r.stem) for r in resolved)
    names = [(r.stem if stems[r.parent, r.stem] == 1 else r.name) + suffix for r in resolved]
    return [out / r.parent.relative_to(root) / n for r, n in zip(resolved, names, strict=True)]


def out_paths(args: argparse.Namespace, items: Sequence[Path | str]) -> list[Path]:
    """Where each input's result goes under --out, named with the suffix of the format asked:
    files mirror their tree; a reference (s3://…, https://…) is named after its last part."""
    out, suffix = Path(args.out), SUFFIXES[output_format(args.format)]
    files = [item for item in items if isinstance(item, Path)]
    mirrored = iter(output_paths(files, out, suffix))
    return [
        next(mirrored) if isinstance(item, Path) else out / (reference_name(item) + suffix)
        for item in items
    ]


def reference_name(reference: str) -> str:
    """The file name a reference's result takes: its key's or path's last part, sans suffix."""
    name = PurePosixPath(urlsplit(reference).path).name
    return PurePosixPath(name).stem or "document"


def output_format(fmt: str) -> str:
    """The format's own name ("md" is markdown)."""
    return "markdown" if fmt == "md" else fmt


def result_text(result: Result, fmt: str) -> str:
    """The result as Markdown or pretty JSON."""
    if fmt == "json":
        return msgspec.json.format(msgspec.json.encode(result), indent=2).decode() + "\n"
    return result.markdown if result.markdown.endswith("\n") else result.markdown + "\n"


def fields_text(fields: Fields) -> str:
    """A job's fields as pretty JSON."""
    return msgspec.json.format(msgspec.json.encode(fields), indent=2).decode() + "\n"


def fetch_output(client: Client, job: str, fmt: str) -> str | bytes:
    """A done job's result in a format its view does not hold (one more request)."""
    if fmt == "pdf":
        return client.result(job, format="pdf")
    if fmt == "fields":
        return fields_text(client.fields(job))
    return client.result(job, format=TEXT_FORMATS[fmt])


def write_result(path: Path, content: str | bytes) -> None:
    """Write one result file, creating its folder (the mirrored input tree)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, "utf-8")


def job_options(args: argparse.Namespace) -> dict[str, Any]:
    """The job options given on the command line (None: the server decides)."""
    return {
        "batch_size": args.batch_size,
        "dpi": args.dpi,
        "max_pages": args.max_pages,
        "lane": args.lane,
        "profile": args.profile,
        "text_layer": args.text_layer,
        "pages": args.pages,
        "keep_headers_footers": args.keep_headers_footers or None,
        "extract": getattr(args, "extract", None),
        "redact": redact_option(args),
        "redact_countries": getattr(args, "redact_countries", None),
        # A searchable PDF is kept only when asked for: writing one asks for it.
        "searchable_pdf": output_format(args.format) == "pdf" or None,
    }


def redact_option(args: argparse.Namespace) -> list[Any] | None:
    """--redact's kinds and each --redact-pattern, as the redact option lists them."""
    kinds: list[Any] = [k.strip() for k in (getattr(args, "redact", None) or "").split(",")]
    kinds = [k for k in kinds if k]
    kinds += [{"pattern": p} for p in getattr(args, "redact_pattern", None) or []]
    return kinds or None


def summary_table(reports: Sequence[FileReport]) -> Table:
    """The summary for a terminal: ids whole, paths folded; codes are listed below it."""
    table = Table()
    table.add_column("file", overflow="fold", ratio=1)
    table.add_column("job_id", no_wrap=True, min_width=22)
    table.add_column("status", no_wrap=True)
    table.add_column("pages", justify="right", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    for report in reports:
        table.add_row(*report.row()[:-1])
    return table


def print_summary(reports: Sequence[FileReport]) -> None:
    """A table on a terminal; tab-separated lines (header first) into a pipe."""
    if sys.stdout.isatty():
        Console().print(summary_table(reports))
    else:
        for row in (SUMMARY_COLUMNS, *(r.row() for r in reports)):
            print("\t".join(row))
    failed = [r for r in reports if not r.ok]
    pages = sum(r.pages for r in reports if r.ok)
    print(
        f"{len(reports)} file(s): {len(reports) - len(failed)} ok, {len(failed)} failed, "
        f"{pages} page(s)",
        file=sys.stderr,
    )
    for report in failed:
        print(f"  {report.path}: {report.error}: {report.message}", file=sys.stderr)
