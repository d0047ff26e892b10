"""Fair share between a lane's tenants: tickets in the stream, a queue per tenant beside it.

With fair share on (OCRQ_FAIR_SHARE, the default) a new job writes, in its enqueue
transaction, one stream entry marked as a *ticket* and its id at the tail of its tenant's
queue in the lane. A worker that reads a ticket asks ``take.lua`` which job it runs: the head
of the queue of the tenant that has had the least service (start-time fair queueing: each
job costs 1/weight when taken, and the rest of its pages over the weight when it ends). So:

- the stream still holds one entry per waiting job: its length, lag and pending counts,
  which KEDA and the lane backlog read, are what they were;
- the entries keep every no-loss rule: a ticket is acked by the script that ends its job,
  reclaimed like any entry, and a reclaimed ticket runs the job it was given;
- a job cancelled while it waits stays in its queue and is skipped when it comes up; the
  spare ticket takes the next job, or is acked when no job waits.

Entries without the mark (written with fair share off, or by an older producer) name their
job as before, and workers run both kinds.
"""

from __future__ import annotations

from typing import Any

import msgspec
import redis.asyncio as aioredis
import structlog

from ocrq.shared.keys import Keys, load_script
from ocrq.shared.lanes import ENTRY_TICKET, LaneEntry
from ocrq.shared.record import text

__all__ = ["ENTRY_TICKET", "FairTickets", "charge", "queue_item"]
log = structlog.get_logger("ocrq.worker")
NO_BATCH = "-"  # a queue item's batch when the job has none
MOST_HEADS = 64  # ended jobs skipped in one call before the worker asks again
MOST_CALLS = 16  # calls of one take before the ticket waits for a later turn


def queue_item(job_id: str, batch: str, weight: float) -> str:
    """A tenant queue's item: the job, its batch and what taking it costs the tenant."""
    return f"{job_id} {batch or NO_BATCH} {1 / weight:.6g}"


def charge(pages: int, weight: float) -> float:
    """What a job that ended with ``pages`` still owes: its pages past the first one."""
    return max(0, pages - 1) / weight


class FairTickets:
    """Turns a ticket into the job it runs (take.lua), for one worker."""

    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self.redis, self.keys = redis, keys
        self._take = redis.register_script(load_script("take"))

    async def take(self, entry: LaneEntry, me: str) -> LaneEntry | None:
        """The entry naming the job it runs; None when it runs none (acked, or not ours).

        A ticket met with only ended jobs ahead is asked again a few times, then comes back
        as it was (still a ticket): each call drops ended jobs, so a later one gets further.
        """
        if not entry.ticket:
            return entry
        tag = self._tag(entry)
        keys = [
            entry.stream,
            self.keys.fair_tenants(entry.lane, tag),
            self.keys.fair_taken(entry.lane, tag),
            self.keys.fair_clock(entry.lane, tag),
        ]
        argv: list[Any] = [me, entry.entry_id, self.keys.group]
        argv += [self.keys.job_prefix(tag), self._queue_prefix(entry)]
        argv.append(MOST_HEADS)
        for _ in range(MOST_CALLS):
            reply = [text(part) for part in await self._take(keys=keys, args=argv)]
            reply = log_skipped(reply)
            if reply[0] != "busy":
                return self._given(entry, reply)
        return entry

    def _given(self, entry: LaneEntry, reply: list[str]) -> LaneEntry | None:
        if reply[0] not in ("new", "again"):
            return None
        job_id, batch = reply[1].split(" ")
        deliveries = 1 if reply[0] == "new" else entry.deliveries
        return msgspec.structs.replace(
            entry,
            job_id=job_id,
            batch="" if batch == NO_BATCH else batch,
            deliveries=deliveries,
            ticket=False,
        )

    def _tag(self, entry: LaneEntry) -> str:
        """The partition of the entry's stream (its keys' hash tag)."""
        return entry.stream.split("{", 1)[1].split("}", 1)[0]

    def _queue_prefix(self, entry: LaneEntry) -> str:
        """The lane's tenant queues' key, less the tenant."""
        return self.keys.fair_queue(entry.lane, self._tag(entry), "")


def log_skipped(reply: list[str]) -> list[str]:
    """The reply less the jobs take.lua skipped, each logged as the claim path logs one."""
    given = 2 if reply[0] in ("new", "again") else 1
    for seen in reply[given:]:
        job_id, status = seen.split(" ")
        # The job's one line: no worker claims it, so none other is written.
        log.info("job", job_id=job_id, outcome="skipped", reason=f"skip:{status}")
    return reply[:given]
