"""`ocrq submit`: upload files and folders, show progress, optionally wait and save results."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.filesize import decimal
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ocrq.cli.batch import run_batch
from ocrq.cli.reports import (
    IN_VIEW,
    TEXT_FORMATS,
    FileReport,
    fields_text,
    job_options,
    out_paths,
    output_format,
    print_summary,
    result_text,
    write_result,
)
from ocrq.client import (
    SNIFF_BYTES,
    ApiError,
    AsyncClient,
    Job,
    ProgressCallback,
    WaitTimeout,
    gather_or_cancel,
)
from ocrq.shared.errors import ErrorCode
from ocrq.shared.schemas import JobView, Status
from ocrq.shared.sniff import sniff_media_type

MAX_LONG_POLLS = 64  # concurrent long-poll connections held open on the producer
SOURCE_SCHEMES = ("s3://", "https://", "http://")
# One input of `ocrq submit`: a file here, or a document by reference (an s3:// key, a URL).
Item = Path | str


def is_document(path: Path) -> bool:
    """True when the file's first bytes announce a type the API accepts (as the API decides)."""
    try:
        with path.open("rb") as f:
            return sniff_media_type(f.read(SNIFF_BYTES)) is not None
    except OSError:
        return False


def visible_document(path: Path, root: Path) -> bool:
    """A document file under root, in no hidden folder and not hidden itself."""
    hidden = any(part.startswith(".") for part in path.relative_to(root).parts)
    return not hidden and path.is_file() and is_document(path)


def collect_files(args: Sequence[str]) -> list[Path]:
    """Named files as given; folders walked recursively for documents (by content, not name)."""
    files: list[Path] = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if visible_document(p, path))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{arg}: no such file or directory")
    return list(dict.fromkeys(files))


class Board:
    """The progress bars (TTY only): uploaded / done / failed counts and pages per second, and
    the bytes sent, which move through a big file's upload too."""

    def __init__(self, console: Console, total: int, waiting: bool, total_bytes: int = 0) -> None:
        self.total, self.waiting, self.total_bytes = total, waiting, total_bytes
        self.uploaded = self.done = self.failed = self.pages = 0
        self.sent_bytes = 0
        self.sent: dict[Item, int] = {}
        self.started = time.monotonic()
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[amount]}"),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,  # no redraws into a pipe or a log file
        )
        self.task = self.progress.add_task("ocrq", total=total, amount=f"0/{total}", detail="")
        self.bytes_task = None
        if total_bytes:
            self.bytes_task = self.progress.add_task(
                "sent", total=total_bytes, amount=self.byte_amount(), detail=""
            )

    def __enter__(self) -> Board:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def byte_amount(self) -> str:
        """ "12.3/500.0 MB · 40.1 MB/s"."""
        total = decimal(self.total_bytes)
        rate = self.sent_bytes / max(time.monotonic() - self.started, 1e-3)
        return f"{decimal(self.sent_bytes)}/{total} · {decimal(int(rate))}/s"

    def sending(self, item: Item) -> ProgressCallback:
        """The client's progress callback for one file (a retry starts it from 0 again)."""

        def sent(count: int, _size: int) -> None:
            self.sent_bytes += count - self.sent.get(item, 0)
            self.sent[item] = count
            if self.bytes_task is not None:
                amount = self.byte_amount()
                self.progress.update(self.bytes_task, completed=self.sent_bytes, amount=amount)

        return sent

    def accepted(self) -> None:
        """One upload accepted."""
        self.uploaded += 1
        self.refresh()

    def finished(self, report: FileReport) -> None:
        """One file settled (done, failed or rejected)."""
        if not report.ok:
            self.failed += 1
        elif self.waiting:
            self.done += 1
            self.pages += report.pages
        self.refresh()

    def refresh(self) -> None:
        """Redraw the counters."""
        rate = self.pages / max(time.monotonic() - self.started, 1e-3)
        detail = f"uploaded {self.uploaded}/{self.total} · done {self.done} · failed {self.failed}"
        if self.waiting:
            detail += f" · {rate:.1f} pages/s"
        settled = self.done + self.failed if self.waiting else self.uploaded + self.failed
        amount = f"{settled}/{self.total}"
        self.progress.update(self.task, completed=settled, amount=amount, detail=detail)


@dataclass
class UploadRun:
    """Each file's own upload and, with --wait, its wait and save; files go concurrently."""

    client: AsyncClient
    board: Board
    options: dict[str, Any]
    uploads: asyncio.Semaphore
    polls: asyncio.Semaphore
    wait: bool
    timeout: float
    fmt: str

    async def one(self, item: Item, output: Path | None) -> FileReport:
        """Submit one file (or reference) and, when waiting, settle it; never raises for an
        API error."""
        report, started = FileReport(item), time.monotonic()
        try:
            async with self.uploads:
                job = await self.submit(item)
            report.job_id, report.status, report.ok = job.id, job.status, True
            self.board.accepted()
            if self.wait:
                async with self.polls:
                    view = await self.client.wait(job, timeout=self.timeout)
                await self.settle(report, view, output)
        except WaitTimeout as e:
            report.fail(e.code.value, e.message, status=e.view.status)
        except ApiError as e:
            report.fail(e.code.value, e.message)
        except OSError as e:  # unreadable input or unwritable output: this file only
            report.fail(ErrorCode.INTERNAL.value, f"{type(e).__name__}: {e}")
        report.seconds = time.monotonic() - started
        self.board.finished(report)
        return report

    async def submit(self, item: Item) -> Job | JobView:
        """A file goes by upload or inline (the client decides); a reference by reference."""
        if isinstance(item, Path):
            progress = self.board.sending(item)
            return await self.client.submit(item, progress=progress, **self.options)
        if item.startswith("s3://"):
            return await self.client.submit_source(key=item, **self.options)
        return await self.client.submit_source(url=item, **self.options)

    async def settle(self, report: FileReport, view: JobView, output: Path | None) -> None:
        """Record a terminal view; write the result when done."""
        report.status = view.status
        report.pages = view.result.page_count if view.result else view.progress.pages_total
        if view.status != Status.DONE:
            code = view.error.code if view.error else view.status
            report.fail(code, view.error.message if view.error else "", status=view.status)
            return
        if output is not None:
            await asyncio.to_thread(write_result, output, await self.output(view))

    async def output(self, view: JobView) -> str | bytes:
        """A done job's result in the format asked (Markdown and JSON are in its view)."""
        if self.fmt in IN_VIEW:
            return result_text(view.result or await self.client.result(view), self.fmt)
        if self.fmt == "pdf":
            return await self.client.result(view, format="pdf")
        if self.fmt == "fields":
            return fields_text(await self.client.fields(view))
        return await self.client.result(view, format=TEXT_FORMATS[self.fmt])


async def submit_all(
    args: argparse.Namespace, items: list[Item], outputs: list[Path | None], waiting: bool
) -> list[FileReport]:
    """Run every input through one AsyncClient under the progress bars."""
    concurrency = max(1, args.concurrency)
    total_bytes = sum(item.stat().st_size for item in items if isinstance(item, Path))
    async with AsyncClient(args.url, args.api_key) as client:
        with Board(Console(stderr=True), len(items), waiting, total_bytes) as board:
            run = UploadRun(
                client=client,
                board=board,
                options=job_options(args),
                uploads=asyncio.Semaphore(concurrency),
                polls=asyncio.Semaphore(max(concurrency, MAX_LONG_POLLS)),
                wait=waiting,
                timeout=args.timeout,
                fmt=output_format(args.format),
            )
            return await gather_or_cancel(
                run.one(item, out) for item, out in zip(items, outputs, strict=True)
            )


def collect_items(args: argparse.Namespace) -> list[Item]:
    """The files (folders walked) and the --source references, in that order."""
    sources: list[str] = args.source or []
    for source in sources:
        if not source.startswith(SOURCE_SCHEMES):
            raise ValueError(f"--source {source!r}: an s3://bucket/key or an https:// URL")
    return [*collect_files(args.paths), *sources]


def run_submit(args: argparse.Namespace) -> int:
    """`ocrq submit`: exit 0 when every input was accepted (and, with --wait, done), else 1."""
    try:
        items = collect_items(args)
    except (FileNotFoundError, ValueError) as e:
        return complain("submit", str(e), 2)
    if not items:
        return complain("submit", "no documents found (PDF, PNG, JPEG, WebP, TIFF, BMP)", 2)
    if args.batch:
        files = [item for item in items if isinstance(item, Path)]
        if len(files) != len(items):
            return complain("submit", "--batch takes files, not --source references", 2)
        return run_batch(args, files)
    waiting = args.wait or args.out is not None
    outputs: list[Path | None] = [None] * len(items)
    if args.out is not None:
        outputs = list(out_paths(args, items))
    try:
        reports = asyncio.run(submit_all(args, items, outputs, waiting))
    except KeyboardInterrupt:  # accepted jobs keep running on the server
        return complain("submit", "interrupted", 130)
    print_summary(reports)
    return 0 if all(r.ok for r in reports) else 1


def complain(command: str, message: str, code: int) -> int:
    """Print an error for a command; its exit code."""
    print(f"ocrq {command}: {message}", file=sys.stderr)
    return code
