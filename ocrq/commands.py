"""`ocrq submit | status | result`: the command-line client over ocrq.client."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ocrq.client import (
    DEFAULT_URL,
    ApiError,
    AsyncClient,
    Client,
    WaitTimeout,
    gather_or_cancel,
)
from ocrq.shared.errors import ErrorCode
from ocrq.shared.schemas import JobView, Result, Status

SUPPORTED_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp"})
SUMMARY_COLUMNS = ("file", "job_id", "status", "pages", "seconds", "error")
MAX_LONG_POLLS = 64  # concurrent long-poll connections held open on the producer


@dataclass
class FileReport:
    """What happened to one file."""

    path: Path
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


def collect_files(args: Sequence[str]) -> list[Path]:
    """Named files as given; directories walked recursively for supported extensions."""
    files: list[Path] = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            files += sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES
                and not p.name.startswith(".")
            )  # fmt: skip
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{arg}: no such file or directory")
    return list(dict.fromkeys(files))


def output_names(files: Sequence[Path], suffix: str) -> list[str]:
    """One distinct output name per file: ``<stem><suffix>``, or a path-based name on a clash."""
    stems = Counter(f.stem for f in files)
    resolved = [f.resolve() for f in files]
    root = Path(os.path.commonpath([r.parent for r in resolved])) if files else Path()
    names: list[str] = []
    taken: set[str] = set()
    for file, full in zip(files, resolved, strict=True):
        # a/x.pdf and b/x.png both want x.md: name them after their path instead.
        base = file.stem if stems[file.stem] == 1 else "__".join(full.relative_to(root).parts)
        name, n = base + suffix, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}{suffix}"
        taken.add(name)
        names.append(name)
    return names


def result_text(result: Result, fmt: str) -> str:
    """The result as Markdown or pretty JSON."""
    if fmt == "json":
        return msgspec.json.format(msgspec.json.encode(result), indent=2).decode() + "\n"
    return result.markdown if result.markdown.endswith("\n") else result.markdown + "\n"


class Board:
    """The progress bar: uploaded / done / failed counts and pages per second (TTY only)."""

    def __init__(self, console: Console, total: int, waiting: bool) -> None:
        self.total, self.waiting = total, waiting
        self.uploaded = self.done = self.failed = self.pages = 0
        self.started = time.monotonic()
        self.progress = Progress(
            TextColumn("ocrq"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,  # no redraws into a pipe or a log file
        )
        self.task = self.progress.add_task("ocr", total=total, detail="")

    def __enter__(self) -> Board:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def accepted(self) -> None:
        """One upload accepted."""
        self.uploaded += 1
        self.refresh()

    def finished(self, outcome: FileReport) -> None:
        """One file settled (done, failed or rejected)."""
        if not outcome.ok:
            self.failed += 1
        elif self.waiting:
            self.done += 1
            self.pages += outcome.pages
        self.refresh()

    def refresh(self) -> None:
        """Redraw the counters."""
        rate = self.pages / max(time.monotonic() - self.started, 1e-3)
        detail = f"uploaded {self.uploaded}/{self.total} · done {self.done} · failed {self.failed}"
        if self.waiting:
            detail += f" · {rate:.1f} pages/s"
        settled = self.done + self.failed if self.waiting else self.uploaded + self.failed
        self.progress.update(self.task, completed=settled, detail=detail)


@dataclass
class BatchRun:
    """Uploads files concurrently and, with --wait, waits for and saves each result."""

    client: AsyncClient
    board: Board
    options: dict[str, Any]
    uploads: asyncio.Semaphore
    polls: asyncio.Semaphore
    wait: bool
    timeout: float
    fmt: str

    async def one(self, path: Path, output: Path | None) -> FileReport:
        """Submit one file and, when waiting, settle it; never raises for an API error."""
        outcome, started = FileReport(path), time.monotonic()
        try:
            async with self.uploads:
                job = await self.client.submit(path, **self.options)
            outcome.job_id, outcome.status, outcome.ok = job.id, job.status, True
            self.board.accepted()
            if self.wait:
                async with self.polls:
                    view = await self.client.wait(job, timeout=self.timeout)
                await self.settle(outcome, view, output)
        except WaitTimeout as e:
            outcome.fail(e.code.value, e.message, status=e.view.status)
        except ApiError as e:
            outcome.fail(e.code.value, e.message)
        except OSError as e:  # unreadable input or unwritable output: this file only
            outcome.fail(ErrorCode.INTERNAL.value, f"{type(e).__name__}: {e}")
        outcome.seconds = time.monotonic() - started
        self.board.finished(outcome)
        return outcome

    async def settle(self, outcome: FileReport, view: JobView, output: Path | None) -> None:
        """Record a terminal view; write the result when done."""
        outcome.status = view.status
        outcome.pages = view.result.page_count if view.result else view.progress.pages_total
        if view.status != Status.DONE:
            code = view.error.code if view.error else view.status
            outcome.fail(code, view.error.message if view.error else "", status=view.status)
            return
        if output is not None:
            result = view.result or await self.client.result(view)
            await asyncio.to_thread(output.write_text, result_text(result, self.fmt), "utf-8")


def job_options(args: argparse.Namespace) -> dict[str, Any]:
    """The job options given on the command line (None: the server decides)."""
    return {
        "batch_size": args.batch_size,
        "dpi": args.dpi,
        "max_pages": args.max_pages,
        "lane": args.lane,
        "profile": args.profile,
        "text_layer": args.text_layer,
    }


async def submit_all(
    args: argparse.Namespace, files: list[Path], outputs: list[Path | None], waiting: bool
) -> list[FileReport]:
    """Run every file through one AsyncClient under the progress bar."""
    concurrency = max(1, args.concurrency)
    async with AsyncClient(args.url, args.api_key) as client:
        with Board(Console(stderr=True), len(files), waiting) as board:
            run = BatchRun(
                client=client,
                board=board,
                options=job_options(args),
                uploads=asyncio.Semaphore(concurrency),
                polls=asyncio.Semaphore(max(concurrency, MAX_LONG_POLLS)),
                wait=waiting,
                timeout=args.timeout,
                fmt=args.format,
            )
            return await gather_or_cancel(
                run.one(f, out) for f, out in zip(files, outputs, strict=True)
            )


def print_summary(outcomes: Sequence[FileReport]) -> None:
    """A table on a terminal; tab-separated lines (header first) into a pipe."""
    if sys.stdout.isatty():
        table = Table()
        # Ids must stay whole to be copied; long paths and codes wrap rather than truncate.
        for name in SUMMARY_COLUMNS:
            if name == "job_id":
                table.add_column(name, no_wrap=True, min_width=22)
            else:
                table.add_column(name, overflow="fold")
        for outcome in outcomes:
            table.add_row(*outcome.row())
        Console().print(table)
    else:
        for row in (SUMMARY_COLUMNS, *(o.row() for o in outcomes)):
            print("\t".join(row))
    failed = [o for o in outcomes if not o.ok]
    pages = sum(o.pages for o in outcomes if o.ok)
    print(
        f"{len(outcomes)} file(s): {len(outcomes) - len(failed)} ok, {len(failed)} failed, "
        f"{pages} page(s)",
        file=sys.stderr,
    )
    for outcome in failed:
        print(f"  {outcome.path}: {outcome.error}: {outcome.message}", file=sys.stderr)


def run_submit(args: argparse.Namespace) -> int:
    """`ocrq submit`: exit 0 when every file was accepted (and, with --wait, done), else 1."""
    try:
        files = collect_files(args.paths)
    except FileNotFoundError as e:
        return complain("submit", str(e), 2)
    if not files:
        return complain("submit", "no supported files found", 2)
    waiting = args.wait or args.out is not None
    outputs: list[Path | None] = [None] * len(files)
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        outputs = [out / name for name in output_names(files, f".{args.format}")]
    try:
        outcomes = asyncio.run(submit_all(args, files, outputs, waiting))
    except KeyboardInterrupt:  # accepted jobs keep running on the server
        return complain("submit", "interrupted", 130)
    print_summary(outcomes)
    return 0 if all(o.ok for o in outcomes) else 1


def run_status(args: argparse.Namespace) -> int:
    """`ocrq status JOB`: the job view as pretty JSON."""
    with Client(args.url, args.api_key) as client:
        try:
            view = client.status(args.job)
        except ApiError as e:
            return complain("status", str(e), 1)
    print(msgspec.json.format(msgspec.json.encode(view), indent=2).decode())
    return 0


def run_result(args: argparse.Namespace) -> int:
    """`ocrq result JOB`: Markdown (default) or JSON, to stdout or --out."""
    with Client(args.url, args.api_key) as client:
        try:
            if args.format == "md":
                text = client.markdown(args.job)
                text = text if text.endswith("\n") else text + "\n"
            else:
                text = result_text(client.result(args.job), "json")
        except ApiError as e:
            return complain("result", str(e), 1)
    if args.out is None:
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


def complain(command: str, message: str, code: int) -> int:
    """Print an error for a command; its exit code."""
    print(f"ocrq {command}: {message}", file=sys.stderr)
    return code


def connection_options() -> argparse.ArgumentParser:
    """--url and --api-key, defaulting to OCRQ_URL and OCRQ_API_KEY."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--url", default=os.environ.get("OCRQ_URL") or DEFAULT_URL, help="API base URL (OCRQ_URL)"
    )
    parent.add_argument(
        "--api-key", default=os.environ.get("OCRQ_API_KEY") or None, help="API key (OCRQ_API_KEY)"
    )
    return parent


def add_submit_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Arguments of `ocrq submit`."""
    p = commands.add_parser(
        "submit",
        parents=[parent],
        help="upload files or folders",
        description="Upload documents. Folders are walked recursively for .pdf, .png, .jpg, "
        ".jpeg, .webp, .tif, .tiff and .bmp files (by extension; the server decides the type "
        "by content, and named files are sent whatever their extension).",
    )
    p.add_argument("paths", nargs="+", metavar="FILE|DIR")
    p.add_argument("--wait", action="store_true", help="wait for every job to finish")
    p.add_argument("--out", metavar="DIR", help="write each result here (implies --wait)")
    p.add_argument("--format", choices=("md", "json"), default="md", help="result format")
    p.add_argument("--batch-size", type=int, help="pages per model request (1-16)")
    p.add_argument("--dpi", type=int, help="rasterisation DPI (50-400)")
    p.add_argument("--max-pages", type=int, help="fail documents with more pages")
    p.add_argument("--lane", choices=("interactive", "batch"), help="queue lane")
    p.add_argument("--profile", help="model profile")
    p.add_argument("--text-layer", choices=("auto", "off"), help="use a PDF's text layer")
    p.add_argument("--concurrency", type=int, default=4, help="uploads at a time (4)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait per job (600)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of the three client commands."""
    parser = argparse.ArgumentParser(prog="ocrq")
    commands = parser.add_subparsers(dest="command", required=True)
    parent = connection_options()
    add_submit_parser(commands, parent)
    status = commands.add_parser("status", parents=[parent], help="show a job as JSON")
    status.add_argument("job", metavar="JOB")
    result = commands.add_parser("result", parents=[parent], help="print a job's result")
    result.add_argument("job", metavar="JOB")
    result.add_argument("--format", choices=("md", "json"), default="md")
    result.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    return parser


RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "submit": run_submit,
    "status": run_status,
    "result": run_result,
}


def main(argv: list[str]) -> int:
    """Run ``argv[0]`` (submit | status | result) with its arguments; the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help or a usage error: argparse already printed
        return e.code if isinstance(e.code, int) else 2
    return RUNNERS[args.command](args)
