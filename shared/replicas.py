"""Accepting a job only once a replica holds it: WAIT after the enqueue transaction.

Redis replicates asynchronously: a primary that dies right after answering an upload may
take the job with it, and the replica promoted in its place never saw it. With
OCRQ_REDIS_WAIT_REPLICAS=N the producer answers 202 only after N replicas acknowledged
the write (WAIT N timeout), and 503 ``unavailable`` otherwise.

WAIT counts the writes of its own connection, and the enqueue transaction's connection
goes back to the pool. So a small write follows on one connection to the same node (a key
in the job's slot), then WAIT: replication is one ordered stream per primary, so a replica
that acknowledged the later write holds the job too.
"""

from __future__ import annotations

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.nodes import NodeClients
from ocrq.shared.settings import Settings

TICK_TTL_MS = 60_000


async def confirm_replicated(
    nodes: NodeClients, settings: Settings, tick_key: str, value: str
) -> None:
    """Write ``tick_key`` then WAIT; raise unavailable when too few replicas answered."""
    wanted = settings.store.redis_wait_replicas
    if wanted <= 0:
        return
    async with nodes.for_key(tick_key).pipeline(transaction=False) as pipe:
        pipe.set(tick_key, value, px=TICK_TTL_MS)
        pipe.execute_command("WAIT", wanted, settings.store.redis_wait_timeout_ms)
        _, acked = await pipe.execute()
    if int(acked) < wanted:
        raise OcrqError(
            ErrorCode.UNAVAILABLE,
            f"the job store confirmed the upload on {acked} of {wanted} replicas: retry "
            "with the same Idempotency-Key, which cannot make a second job",
            retry_after=5,
        )
