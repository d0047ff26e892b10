"""The lanes' streams as the workers' group reads them: new entries, reclaims, pending ones.

Every command here names streams of one cluster slot (one partition): the worker's loop
(consumer/worker.py) decides which lanes and partitions to read, and in what order.
"""

from __future__ import annotations

from typing import Any

import msgspec
import redis.asyncio as aioredis

from ocrq.shared.keys import Keys
from ocrq.shared.record import ENTRY_BATCH, ENTRY_JOB_ID, text

ENTRY_TICKET = "fair"  # the field marking a fair-share ticket ("1"): shared/fair.py


class LaneEntry(msgspec.Struct, frozen=True):
    """One entry of a lane's stream, handed to this worker."""

    stream: str  # the stream (lane and partition) the entry is in
    entry_id: str
    lane: str
    job_id: str  # "" for an entry that names no job (dropped, never redelivered)
    batch: str = ""  # the job's batch, from the entry ("" for none)
    deliveries: int = 1  # times the group has handed it out (XPENDING), reclaims included
    # A fair-share ticket (shared/fair.py): job_id is the job that wrote it, not yet the one
    # it runs; FairTickets.take says which.
    ticket: bool = False


def lane_entries(reply: Any) -> list[LaneEntry]:
    """An XREADGROUP reply (``[(stream, [(id, fields), …]), …]``) as lane entries."""
    out: list[LaneEntry] = []
    for stream, entries in reply or []:
        name = text(stream)
        lane = name.rsplit(":", 1)[-1]
        for entry_id, fields in entries:
            fields = fields or {}
            job_id = text(fields.get(ENTRY_JOB_ID.encode(), b""))
            batch = text(fields.get(ENTRY_BATCH.encode(), b""))
            ticket = fields.get(ENTRY_TICKET.encode()) == b"1"
            out.append(LaneEntry(name, text(entry_id), lane, job_id, batch, ticket=ticket))
    return out


class JobLanes:
    """The workers group's reads and acks on the lanes' streams, one consumer at a time."""

    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self.redis, self.keys = redis, keys

    async def read_new(self, stream: str, me: str, count: int) -> list[LaneEntry]:
        """XREADGROUP of up to ``count`` entries never delivered, without blocking."""
        reply = await self.redis.xreadgroup(self.keys.group, me, {stream: ">"}, count)
        return lane_entries(reply)

    async def wait_new(self, streams: list[str], me: str, block_ms: int) -> list[LaneEntry]:
        """The first new entry of any of ``streams`` (one slot), blocking up to block_ms (≥1)."""
        every: dict[Any, Any] = {stream: ">" for stream in streams}
        reply = await self.redis.xreadgroup(self.keys.group, me, every, 1, block=max(1, block_ms))
        return lane_entries(reply)

    async def reclaim(
        self, stream: str, me: str, min_idle_ms: int, cursor: str, count: int
    ) -> tuple[str, list[LaneEntry]]:
        """XAUTOCLAIM entries idle past min_idle_ms from ``cursor``: (next cursor, entries).

        Their ``deliveries`` is not read yet: ``with_delivery_count`` does, entry by entry.
        """
        next_cursor, entries, *_ = await self.redis.xautoclaim(
            stream, self.keys.group, me, min_idle_ms, start_id=cursor, count=count
        )
        return text(next_cursor), lane_entries([(stream.encode(), entries)])

    async def with_delivery_count(self, entry: LaneEntry) -> LaneEntry:
        """The entry with the times the group has delivered it (XPENDING; 1 when not found)."""
        pending = await self.redis.xpending_range(
            entry.stream, self.keys.group, min=entry.entry_id, max=entry.entry_id, count=1
        )
        count = int(pending[0]["times_delivered"]) if pending else 1
        return msgspec.structs.replace(entry, deliveries=count)

    async def own_pending(self, stream: str, me: str, count: int) -> list[tuple[str, int]]:
        """(entry id, times delivered) of the entries pending to this consumer on a stream."""
        rows = await self.redis.xpending_range(
            stream, self.keys.group, min="-", max="+", count=count, consumername=me
        )
        return [(text(row["message_id"]), int(row["times_delivered"])) for row in rows]

    async def entry(self, stream: str, entry_id: str, deliveries: int) -> LaneEntry:
        """A pending entry read again by id; one that is gone names no job (it is dropped)."""
        rows = await self.redis.xrange(stream, min=entry_id, max=entry_id, count=1)
        if not rows:
            lane = stream.rsplit(":", 1)[-1]
            return LaneEntry(stream, entry_id, lane, "", deliveries=deliveries)
        (entry,) = lane_entries([(stream.encode(), rows)])
        return msgspec.structs.replace(entry, deliveries=deliveries)

    async def drop(self, stream: str, entry_id: str) -> None:
        """ACK and delete an entry that names no job (not ours to keep redelivering)."""
        await self.redis.xack(stream, self.keys.group, entry_id)
        await self.redis.xdel(stream, entry_id)
