"""A batch's fields as CSV: one row per document, one column per top-level property."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from ocrq.shared.field_schema import top_level_names
from ocrq.shared.record import JobRecord
from ocrq.shared.schemas import Fields

FIXED_COLUMNS = ("filename", "id", "status", "error")


class FieldsOnly(msgspec.Struct):
    """The one part of a stored Result the CSV needs."""

    fields: Fields | None = None


def csv_row(cells: list[Any]) -> bytes:
    """One CSV line (RFC 4180 quoting, CRLF)."""
    out = io.StringIO()
    csv.writer(out).writerow(cells)
    return out.getvalue().encode()


def cell(value: Any) -> Any:
    """A value as a cell: scalars as they are, objects and arrays as compact JSON."""
    if isinstance(value, dict | list):
        return msgspec.json.encode(value).decode()
    return "" if value is None else value


def fields_row(job_id: str, row: JobRecord, names: list[str]) -> bytes:
    """A job's row: its file, id, status, the error code (the job's, else the fields'),
    and each property's value."""
    fields = msgspec.json.decode(row.result, type=FieldsOnly).fields if row.result else None
    values = fields.values if fields else {}
    error = row.error.code if row.error else (fields.error.code if fields and fields.error else "")
    head = [row.filename or "", job_id, row.status, error]
    return csv_row(head + [cell(values.get(name)) for name in names])


async def fields_csv(
    jobs: AsyncIterator[tuple[str, JobRecord]], schema: dict[str, Any]
) -> AsyncIterator[bytes]:
    """The CSV body: a header, then a row per ended job in submission order."""
    names = top_level_names(schema)
    yield csv_row([*FIXED_COLUMNS, *names])
    async for job_id, row in jobs:
        yield fields_row(job_id, row, names)
