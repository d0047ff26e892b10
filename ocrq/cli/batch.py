"""`ocrq submit --batch`: one batch request, one progress bar fed by its events, one download."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ocrq.cli.reports import (
    IN_VIEW,
    FileReport,
    fetch_output,
    job_options,
    out_paths,
    output_format,
    print_summary,
    result_text,
    write_result,
)
from ocrq.client import ApiError, Client
from ocrq.shared.schemas import BatchAccepted, Result


def reports_of(answer: BatchAccepted, files: list[Path]) -> list[FileReport]:
    """One report per document of the request, in request order (a ZIP: per member)."""
    one_zip = len(files) == 1 and len(answer.accepted) + len(answer.rejected) != 1
    reports: list[FileReport] = []
    for f in sorted([*answer.accepted, *answer.rejected], key=lambda f: f.index):
        path = Path(f.filename or f"document-{f.index + 1}") if one_zip else files[f.index]
        report = FileReport(path, job_id=f.id or "", status="queued" if f.id else "rejected")
        report.ok = f.id is not None
        if not report.ok:
            report.fail(f.code or "invalid_request", f.message or "")
        reports.append(report)
    return reports


def follow(client: Client, batch_id: str, total: int) -> None:
    """A progress bar fed by the batch's live events, until every job has ended."""
    columns = (
        TextColumn("ocrq batch"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    console = Console(stderr=True)
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("batch", total=total, detail="")
        for event in client.events(batch_id, batch=True):
            counts = event.data["counts"]
            ended = counts["done"] + counts["failed"] + counts["cancelled"]
            detail = f"done {counts['done']} · failed {counts['failed']}"
            bar.update(task, completed=ended, detail=detail)


def save_results(
    client: Client,
    batch_id: str,
    reports: list[FileReport],
    outputs: list[Path] | None,
    fmt: str,
) -> None:
    """Settle every report from the batch's results; write each done one's output."""
    by_job = {r.job_id: i for i, r in enumerate(reports) if r.job_id}
    for row in client.iter_batch_results(batch_id):
        i = by_job.get(row["id"])
        if i is None:
            continue
        report = reports[i]
        report.status = row["status"]
        if row["status"] != "done":
            error: dict[str, Any] = row.get("error") or {}
            report.fail(error.get("code", row["status"]), error.get("message", ""), row["status"])
            continue
        result = msgspec.convert(row["result"], Result)
        report.pages = result.page_count
        if outputs is not None:
            if fmt in IN_VIEW:
                write_result(outputs[i], result_text(result, fmt))
            else:
                write_result(outputs[i], fetch_output(client, row["id"], fmt))


def run_batch(args: argparse.Namespace, files: list[Path]) -> int:
    """Submit the files (or a ZIP) as one batch; with --wait/--out, follow and save it."""
    options = {**job_options(args), "lane": None}
    fmt = output_format(args.format)
    with Client(args.url, args.api_key, timeout=args.timeout) as client:
        try:
            answer = client.submit_batch(files, **options)
        except ApiError as e:
            print(f"ocrq submit: {e}")
            return 1
        reports = reports_of(answer, files)
        if args.wait or args.out is not None:
            follow(client, answer.id, len(answer.accepted))
            outputs = None
            if args.out is not None:
                outputs = out_paths(args, [r.path for r in reports])
            save_results(client, answer.id, reports, outputs, fmt)
    print(f"batch {answer.id}: {len(answer.accepted)} accepted, {len(answer.rejected)} refused")
    print_summary(reports)
    return 0 if all(r.ok for r in reports) else 1
