"""The command-line client: `ocrq submit | status | wait | result | cancel | rm | ls | usage`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from ocrq.cli.reports import FORMAT_CHOICES, fetch_output, output_format, result_text
from ocrq.cli.submit import complain, run_submit
from ocrq.cli.usage import add_usage_parser, run_usage
from ocrq.client import DEFAULT_URL, ApiError, Client, WaitTimeout
from ocrq.shared.profiles import PROFILES
from ocrq.shared.schemas import JobSummary, JobView, Status

Defaults = argparse.ArgumentDefaultsHelpFormatter


def status_line(view: JobView | JobSummary) -> str:
    """One line for a person: id, status, pages, file, and the error when there is one."""
    progress = view.progress
    pages = f"{progress.pages_done}/{progress.pages_total} pages" if progress.pages_total else ""
    parts = [view.id, view.status, pages, view.filename or ""]
    if view.error is not None:
        parts.append(f"{view.error.code}: {view.error.message}")
    return "  ".join(part for part in parts if part)


def pretty_json(value: Any) -> str:
    """Indented JSON of a msgspec value."""
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def run_status(args: argparse.Namespace) -> int:
    """`ocrq status JOB`: one line, or the whole view with --json."""
    with Client(args.url, args.api_key) as client:
        try:
            view = client.status(args.job)
        except ApiError as e:
            return complain("status", str(e), 1)
    print(pretty_json(view) if args.json else status_line(view))
    return 0


def run_wait(args: argparse.Namespace) -> int:
    """`ocrq wait JOB…`: block until each job ends; exit 0 only when every one is done."""
    code = 0
    with Client(args.url, args.api_key) as client:
        for job in args.jobs:
            try:
                view = client.wait(job, timeout=args.timeout)
            except WaitTimeout as e:
                print(f"{status_line(e.view)}  (still {e.view.status} after {args.timeout:g} s)")
                code = 1
                continue
            except ApiError as e:
                code = complain("wait", f"{job}: {e}", 1)
                continue
            print(status_line(view))
            code = code or int(view.status != Status.DONE)
    return code


def schema_file(path: str) -> dict[str, Any]:
    """--extract's file: a JSON object (the server checks it is a usable JSON Schema)."""
    try:
        schema = msgspec.json.decode(Path(path).read_bytes())
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror}") from e
    except msgspec.DecodeError as e:
        raise argparse.ArgumentTypeError(f"{path} is not JSON: {e}") from e
    if not isinstance(schema, dict):
        raise argparse.ArgumentTypeError(f"{path}: a JSON Schema is an object")
    return schema


def run_result(args: argparse.Namespace) -> int:
    """`ocrq result JOB`: Markdown (default), JSON, HTML, text, chunks or the searchable PDF,
    to stdout or --out."""
    fmt = output_format(args.format)
    with Client(args.url, args.api_key) as client:
        try:
            content = fetch_result(client, args.job, fmt)
        except ApiError as e:
            return complain("result", str(e), 1)
    data = content if isinstance(content, bytes) else content.encode()
    if args.out is not None:
        Path(args.out).write_bytes(data)
    elif fmt == "pdf" and sys.stdout.isatty():
        return complain("result", "a PDF is not for a terminal: --out FILE, or a pipe", 2)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def fetch_result(client: Client, job: str, fmt: str) -> str | bytes:
    """The job's result in ``fmt`` as `ocrq result` writes it."""
    if fmt == "markdown":
        text = client.markdown(job)
        return text if text.endswith("\n") else text + "\n"
    if fmt == "json":
        return result_text(client.result(job), "json")
    return fetch_output(client, job, fmt)


def run_cancel(args: argparse.Namespace) -> int:
    """`ocrq cancel JOB…`: cancel active jobs (they stay, as cancelled)."""
    code = 0
    with Client(args.url, args.api_key) as client:
        for job in args.jobs:
            try:
                print(f"{job}  {client.cancel(job)}")
            except ApiError as e:
                code = complain("cancel", f"{job}: {e}", 1)
    return code


def run_rm(args: argparse.Namespace) -> int:
    """`ocrq rm JOB…`: delete jobs and their results (cancelling active ones)."""
    code = 0
    with Client(args.url, args.api_key) as client:
        for job in args.jobs:
            try:
                client.delete(job)
                print(f"{job}  deleted")
            except ApiError as e:
                code = complain("rm", f"{job}: {e}", 1)
    return code


def run_ls(args: argparse.Namespace) -> int:
    """`ocrq ls`: your recent jobs, newest first."""
    with Client(args.url, args.api_key) as client:
        try:
            page = client.jobs(limit=args.limit, offset=args.offset)
        except ApiError as e:
            return complain("ls", str(e), 1)
    if args.json:
        print(pretty_json(page))
    elif sys.stdout.isatty():
        Console().print(jobs_table(page.jobs))
    else:
        for job in page.jobs:
            print(status_line(job))
    if page.next_offset is not None and not args.json:
        print(f"more: ocrq ls --offset {page.next_offset}", file=sys.stderr)
    return 0


def jobs_table(jobs: list[JobSummary]) -> Table:
    """The job list for a terminal."""
    table = Table()
    for name in ("job_id", "status", "pages", "created", "file"):
        table.add_column(name, no_wrap=name != "file", overflow="fold")
    for job in jobs:
        progress = job.progress
        pages = f"{progress.pages_done}/{progress.pages_total}" if progress.pages_total else ""
        created = (job.created_at or "")[:19].replace("T", " ")
        table.add_row(job.id, job.status, pages, created, job.filename or "")
    return table


def connection_options() -> argparse.ArgumentParser:
    """--url and --api-key, defaulting to OCRQ_URL and OCRQ_API_KEY."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--url",
        default=os.environ.get("OCRQ_URL") or DEFAULT_URL,
        help="the producer's base URL (env OCRQ_URL)",
    )
    parent.add_argument(
        "--api-key",
        default=os.environ.get("OCRQ_API_KEY") or None,
        help="API key, when the producer requires one (env OCRQ_API_KEY)",
    )
    return parent


def add_submit_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Arguments of `ocrq submit`."""
    p = commands.add_parser(
        "submit",
        parents=[parent],
        formatter_class=Defaults,
        help="upload files or folders",
        description="Upload documents. Folders are walked recursively; a file is sent when "
        "its first bytes say PDF, PNG, JPEG, WebP, TIFF or BMP (the server decides by content "
        "too), whatever its name. Named files are always sent. When the producer has an object "
        "store, files over its inline limit go there by upload (POST /v1/uploads), the "
        "progress bar counting their bytes.",
    )
    p.add_argument("paths", nargs="*", metavar="FILE|DIR")
    p.add_argument(
        "--source",
        action="append",
        metavar="REF",
        help="a document by reference, which the producer never carries: an s3://bucket/key "
        "under your tenant's prefix, or an https:// URL a worker fetches (repeatable; with "
        "files or instead of them)",
    )
    p.add_argument("--wait", action="store_true", help="wait for every job to finish")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write each result here, mirroring the input folders (implies --wait)",
    )
    p.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default="markdown",
        help="result format written by --out (md: markdown; pdf: a searchable PDF, which "
        "the job then keeps)",
    )
    p.add_argument(
        "--pages", metavar="RANGES", help='pages to read, e.g. "1-3,7" (server: every page)'
    )
    p.add_argument(
        "--keep-headers-footers",
        action="store_true",
        help="keep page headers, footers and numbers in the body (they stay in the JSON)",
    )
    p.add_argument(
        "--extract",
        metavar="SCHEMA.json",
        type=schema_file,
        help="a JSON Schema of the fields to read (Result.fields; --format fields writes them)",
    )
    p.add_argument(
        "--redact",
        metavar="KINDS",
        help="mask personal data in every output: email, phone, iban, credit_card, national_id, "
        "date_of_birth (comma-separated); the PDF has them burnt black",
    )
    p.add_argument(
        "--redact-pattern",
        metavar="REGEX",
        action="append",
        help="also mask what this regular expression matches, as [REDACTED] (repeatable)",
    )
    p.add_argument(
        "--redact-countries",
        metavar="CC,CC",
        help="countries of national ids and national phone numbers (server: us,gb,de,fr,nl,es,it)",
    )
    p.add_argument(
        "--batch-size", type=int, help="pages per engine request (a page group), 1-16 (server: 1)"
    )
    p.add_argument("--dpi", type=int, help="rasterisation DPI, 50-400 (server: 150)")
    p.add_argument("--max-pages", type=int, help="fail documents with more pages (server: 200)")
    p.add_argument(
        "--lane", choices=("interactive", "batch"), help="queue lane (server: interactive)"
    )
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        help="model profile, vLLM engine only (server: its OCRQ_PROFILE)",
    )
    p.add_argument(
        "--text-layer",
        choices=("auto", "off"),
        help="use a PDF's own text where it is good (server: auto on the local engine)",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="send everything (files, or one ZIP) as one batch: one handle, one progress bar "
        "fed by its live events, the results in one download",
    )
    p.add_argument("--concurrency", type=int, default=4, help="uploads at a time")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait per job")


def add_job_parsers(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Arguments of the commands that act on jobs by id."""
    status = commands.add_parser(
        "status", parents=[parent], formatter_class=Defaults, help="show a job's status"
    )
    status.add_argument("job", metavar="JOB")
    status.add_argument("--json", action="store_true", help="the whole job view as JSON")
    wait = commands.add_parser(
        "wait", parents=[parent], formatter_class=Defaults, help="wait until jobs end"
    )
    wait.add_argument("jobs", nargs="+", metavar="JOB")
    wait.add_argument("--timeout", type=float, default=600.0, help="seconds to wait per job")
    result = commands.add_parser(
        "result", parents=[parent], formatter_class=Defaults, help="print a job's result"
    )
    result.add_argument("job", metavar="JOB")
    result.add_argument(
        "--format", choices=FORMAT_CHOICES, default="markdown", help="result format (md: markdown)"
    )
    result.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    cancel = commands.add_parser(
        "cancel",
        parents=[parent],
        formatter_class=Defaults,
        help="cancel active jobs (they stay, as cancelled)",
    )
    cancel.add_argument("jobs", nargs="+", metavar="JOB")
    rm = commands.add_parser(
        "rm",
        parents=[parent],
        formatter_class=Defaults,
        help="delete jobs and their results (cancelling active ones)",
    )
    rm.add_argument("jobs", nargs="+", metavar="JOB")
    ls = commands.add_parser(
        "ls", parents=[parent], formatter_class=Defaults, help="list your recent jobs"
    )
    ls.add_argument("--limit", type=int, default=20, help="jobs to show (1-100)")
    ls.add_argument("--offset", type=int, default=0, help="jobs to skip, newest first")
    ls.add_argument("--json", action="store_true", help="the page as JSON")


def build_parser() -> argparse.ArgumentParser:
    """The parser of the client commands."""
    parser = argparse.ArgumentParser(prog="ocrq")
    commands = parser.add_subparsers(dest="command", required=True)
    parent = connection_options()
    add_submit_parser(commands, parent)
    add_job_parsers(commands, parent)
    add_usage_parser(commands, parent)
    return parser


RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "submit": run_submit,
    "status": run_status,
    "wait": run_wait,
    "result": run_result,
    "cancel": run_cancel,
    "rm": run_rm,
    "ls": run_ls,
    "usage": run_usage,
}


def main(argv: list[str]) -> int:
    """Run ``argv[0]`` (one of RUNNERS) with its arguments; the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help or a usage error: argparse already printed
        return e.code if isinstance(e.code, int) else 2
    return RUNNERS[args.command](args)
