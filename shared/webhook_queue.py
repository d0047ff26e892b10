"""The webhooks streams as the workers' ``webhooks`` group reads them: one entry per delivery.

A job's (or a batch's) end adds the entry in the script that ends it; a worker takes it
(new, or stale from a sender that died), holds it while it retries, and acks it once done.
"""

from __future__ import annotations

from typing import Any

import msgspec
import redis.asyncio as aioredis

from ocrq.shared.keys import Keys
from ocrq.shared.record import text


class WebhookEntry(msgspec.Struct, frozen=True):
    """One entry of a webhooks stream: a callback to deliver for a job or a batch."""

    stream: str  # the partition's webhooks stream it came from
    entry_id: str
    kind: str  # job | batch
    id: str  # the job's or the batch's id


def webhook_entries(stream: str, entries: list[Any]) -> list[WebhookEntry]:
    """``[(id, fields), …]`` of a webhooks stream as entries; deleted ones (no fields) skipped."""
    return [
        WebhookEntry(stream, text(entry_id), text(fields[b"kind"]), text(fields[b"id"]))
        for entry_id, fields in entries
        if fields
    ]


class WebhookQueue:
    """The ``webhooks`` group's reads, holds and acks on the partitions' webhooks streams."""

    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self.redis, self.keys = redis, keys

    def streams(self) -> list[str]:
        """Every partition's webhooks stream."""
        return [self.keys.webhooks(tag) for tag in self.keys.tags]

    async def take(
        self, stream: str, me: str, min_idle_ms: int, count: int, block_ms: int
    ) -> list[WebhookEntry]:
        """Stale entries of dead senders (XAUTOCLAIM), then new ones (XREADGROUP, blocking
        up to block_ms), at most ``count`` of each, from one webhooks stream."""
        group = self.keys.webhook_group
        stale = await self.redis.xautoclaim(stream, group, me, min_idle_ms, count=count)
        entries = list(stale[1])
        reply: Any = await self.redis.xreadgroup(
            group, me, {stream: ">"}, count=count, block=block_ms
        )
        for _, new in reply or []:
            entries += new
        return webhook_entries(stream, entries)

    async def hold(self, entry: WebhookEntry, me: str) -> None:
        """Reset the entry's idle time (XCLAIM JUSTID to ourselves): not for a reclaim."""
        await self.redis.xclaim(
            entry.stream, self.keys.webhook_group, me, 0, [entry.entry_id], justid=True
        )

    async def ack(self, entry: WebhookEntry) -> None:
        """The delivery is done with: ACK and delete its entry."""
        await self.redis.xack(entry.stream, self.keys.webhook_group, entry.entry_id)
        await self.redis.xdel(entry.stream, entry.entry_id)
