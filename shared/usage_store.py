"""A tenant's usage read from Redis: each day's hashes, one per partition, summed.

The script that ends a job counts it in the usage hash of its tenant, UTC day and the job's
partition (``Keys.usage``), so that the count is made in the job's own slot. A report reads
every (day, partition) hash in one pipeline; on a cluster redis-py sends each read to the
master of its slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from ocrq.shared.store import JobStore
from ocrq.shared.usage import UsageDay, UsageReport, add_hash, key_day, usage_report


class UsageStore:
    """Reads the usage hashes the ending scripts write."""

    def __init__(self, store: JobStore) -> None:
        self.redis, self.keys = store.redis, store.keys

    async def days(self, tenant: str, days: Sequence[date]) -> list[UsageDay]:
        """The tenant's usage on each of ``days``, in their order (a day with none: zeros)."""
        tags = self.keys.tags
        async with self.redis.pipeline(transaction=False) as pipe:
            for day in days:
                for tag in tags:
                    pipe.hgetall(self.keys.usage(tenant, key_day(day), tag))
            hashes: list[Any] = await pipe.execute()
        found: list[UsageDay] = []
        for n, day in enumerate(days):
            counts = UsageDay(day=day.isoformat())
            for raw in hashes[n * len(tags) : (n + 1) * len(tags)]:
                add_hash(counts, raw)
            found.append(counts)
        return found

    async def report(self, tenant: str, days: Sequence[date]) -> UsageReport:
        """The tenant's report over ``days`` (at least one), totals included."""
        return usage_report(tenant, await self.days(tenant, days))
