"""`ocrq usage`: what your tenant used per UTC day (jobs, pages, engine time, bytes)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from ocrq.cli.submit import complain
from ocrq.client import ApiError, Client
from ocrq.shared.usage import UsageReport

COLUMNS = ("day", "jobs", "failed", "cancelled", "pages", "engine s", "MB in", "MB out")


def run_usage(args: argparse.Namespace) -> int:
    """Print the usage of --from..--to as a table (a terminal), lines, JSON or CSV."""
    span: dict[str, Any] = {"start": args.start, "end": args.end, "tenant": args.tenant}
    with Client(args.url, args.api_key) as client:
        try:
            if args.csv:
                sys.stdout.write(client.usage_csv(**span))
                return 0
            report = client.usage(**span)
        except ApiError as e:
            return complain("usage", str(e), 1)
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    elif sys.stdout.isatty():
        Console().print(usage_table(report))
    else:
        for row in usage_rows(report):
            print("\t".join(row))
    return 0


def usage_rows(report: UsageReport) -> list[list[str]]:
    """Each day that saw a job, then the total, as text cells in COLUMNS' order."""
    rows = [[d.day, *counts(d)] for d in report.days if d.jobs]
    return [*rows, ["total", *counts(report.totals)]]


def counts(day: Any) -> list[str]:
    """The cells of one day (or of the totals) after its name."""
    numbers = [day.jobs, day.failed, day.cancelled, day.pages, day.engine_seconds]
    sizes = [f"{day.bytes_in / 1e6:.2f}", f"{day.bytes_out / 1e6:.2f}"]
    return [*(str(n) for n in numbers), *sizes]


def usage_table(report: UsageReport) -> Table:
    """The report for a terminal: one row per day that saw a job, and the total."""
    table = Table(title=f"{report.tenant}: {report.first_day} .. {report.last_day}")
    for name in COLUMNS:
        table.add_column(name, justify="left" if name == "day" else "right")
    for row in usage_rows(report):
        table.add_row(*row)
    return table


def add_usage_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Arguments of `ocrq usage`."""
    p = commands.add_parser(
        "usage",
        parents=[parent],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="your usage per UTC day",
    )
    p.add_argument("--from", dest="start", metavar="DAY", help="first day, YYYY-MM-DD")
    p.add_argument("--to", dest="end", metavar="DAY", help="last day (default: today)")
    p.add_argument("--tenant", help="another tenant's usage (an admin credential)")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="the report as JSON")
    shape.add_argument("--csv", action="store_true", help="one CSV row per day")
