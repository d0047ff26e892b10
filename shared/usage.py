"""A tenant's usage per UTC day, as GET /v1/usage answers it: the report, its days, its CSV.

The counts themselves are written by the scripts that end a job (``scripts/lib/usage.lua``),
one hash per tenant, day and partition (``Keys.usage``); ``shared/usage_store.py`` reads
them. This module holds what needs no Redis, so the client decodes the same report.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta

import msgspec

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Base

DEFAULT_DAYS = 30  # without ?from, the report covers this many days up to ?to
MAX_DAYS = 366  # one request covers at most a (leap) year
ENGINE_PREFIX = "pages:"
COUNTERS = ("jobs", "failed", "cancelled", "pages", "bytes_in", "bytes_out")


class UsageCounts(Base):
    """What a tenant used: jobs ended (of which failed, cancelled), pages, engine time, bytes."""

    jobs: int = 0
    failed: int = 0
    cancelled: int = 0
    pages: int = 0
    pages_by_engine: dict[str, int] = msgspec.field(default_factory=dict)
    engine_seconds: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0


class UsageDay(UsageCounts, kw_only=True):
    """One UTC day's usage (``day``: YYYY-MM-DD)."""

    day: str


class UsageReport(Base):
    """GET /v1/usage: every day of the range, oldest first, and their sum."""

    tenant: str
    first_day: str = msgspec.field(name="from")
    last_day: str = msgspec.field(name="to")
    days: list[UsageDay]
    totals: UsageCounts


def today() -> date:
    """The current UTC day."""
    return datetime.now(UTC).date()


def parse_day(raw: str, name: str) -> date:
    """A YYYY-MM-DD query parameter as a date; 400 invalid_request otherwise."""
    try:
        if len(raw) != 10:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{name}: a UTC day as YYYY-MM-DD") from None


def day_range(first: str | None, last: str | None, now: date | None = None) -> list[date]:
    """The days a request covers: ``to`` defaults to today, ``from`` to 29 days before it;
    400 when ``from`` follows ``to`` or the range is over MAX_DAYS days."""
    end = parse_day(last, "to") if last is not None else now or today()
    start = (
        parse_day(first, "from") if first is not None else end - timedelta(days=DEFAULT_DAYS - 1)
    )
    if start > end:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"from ({start}) is after to ({end})")
    span = (end - start).days + 1
    if span > MAX_DAYS:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"from..to covers {span} days; at most {MAX_DAYS}"
        )
    return [start + timedelta(days=n) for n in range(span)]


def key_day(day: date) -> str:
    """A day as the usage keys name it (yyyymmdd, as ``quota_store.utc_day``)."""
    return day.strftime("%Y%m%d")


def add_hash(counts: UsageCounts, raw: Mapping[bytes | str, bytes | str]) -> None:
    """Add one usage hash (HGETALL of ``Keys.usage``) to ``counts``."""
    for field, value in raw.items():
        name = field.decode() if isinstance(field, bytes) else field
        number = int(value)
        if name in COUNTERS:
            setattr(counts, name, getattr(counts, name) + number)
        elif name == "engine_ms":
            counts.engine_seconds = round(counts.engine_seconds + number / 1000, 3)
        elif name.startswith(ENGINE_PREFIX):
            engine = name[len(ENGINE_PREFIX) :]
            counts.pages_by_engine[engine] = counts.pages_by_engine.get(engine, 0) + number


def add_counts(total: UsageCounts, more: UsageCounts) -> None:
    """Add ``more`` to ``total`` in place."""
    for name in COUNTERS:
        setattr(total, name, getattr(total, name) + getattr(more, name))
    total.engine_seconds = round(total.engine_seconds + more.engine_seconds, 3)
    for engine, pages in more.pages_by_engine.items():
        total.pages_by_engine[engine] = total.pages_by_engine.get(engine, 0) + pages


def usage_report(tenant: str, days: list[UsageDay]) -> UsageReport:
    """The report of ``days`` (oldest first, at least one), totals summed."""
    totals = UsageCounts()
    for day in days:
        add_counts(totals, day)
    return UsageReport(
        tenant=tenant,
        first_day=days[0].day,
        last_day=days[-1].day,
        days=days,
        totals=totals,
    )


def usage_csv(report: UsageReport) -> str:
    """The report as CSV: a header, then one row per day; one ``pages:<engine>`` column per
    engine seen in the range."""
    engines = sorted({engine for day in report.days for engine in day.pages_by_engine})
    names = ["day", *COUNTERS[:4], *(f"{ENGINE_PREFIX}{e}" for e in engines)]
    names += ["engine_seconds", "bytes_in", "bytes_out"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(names)
    writer.writerows(csv_row(day, engines) for day in report.days)
    return out.getvalue()


def csv_row(day: UsageDay, engines: Iterable[str]) -> list[str | int | float]:
    """One day's CSV row, in usage_csv's column order."""
    head: list[str | int | float] = [day.day, day.jobs, day.failed, day.cancelled, day.pages]
    by_engine = [day.pages_by_engine.get(engine, 0) for engine in engines]
    return [*head, *by_engine, day.engine_seconds, day.bytes_in, day.bytes_out]
