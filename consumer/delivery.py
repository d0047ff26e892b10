"""A stream entry handed to this worker, as the loop reads it from a lane."""

from __future__ import annotations

from typing import Any

import msgspec

from ocrq.shared.record import ENTRY_BATCH, ENTRY_JOB_ID, text


class Delivery(msgspec.Struct, frozen=True):
    """One stream entry handed to this worker."""

    lane: str
    entry: str
    job_id: str  # "" for an entry that names no job (dropped, never redelivered)
    stream: str  # the stream (lane and partition) the entry is in
    deliveries: int = 1
    batch: str = ""  # the job's batch, from the entry ("" for none)


def parse_entries(reply: Any) -> list[Delivery]:
    """XREADGROUP reply → deliveries."""
    out: list[Delivery] = []
    for stream, entries in reply or []:
        name = text(stream)
        lane = name.rsplit(":", 1)[-1]
        for entry_id, fields in entries:
            fields = fields or {}
            job_id = text(fields.get(ENTRY_JOB_ID.encode(), b""))
            batch = text(fields.get(ENTRY_BATCH.encode(), b""))
            out.append(Delivery(lane, text(entry_id), job_id, name, batch=batch))
    return out
