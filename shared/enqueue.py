"""Writing a new job: two reads that check, then one MULTI/EXEC that writes everything.

A document (up to 10 MB) passed to a Lua script is copied into and through Lua; the same
writes in MULTI/EXEC go straight to the hash (measured in BENCHMARKS.md). So the checks
(the Idempotency-Key, the tenant's and the lane's backlogs) are plain reads, and the job
hash, its stream entry, the idempotency key, the tenant index, the tenant's active set and
the batch's counters and, with fair share, the job's place in its tenant's queue
(shared/fair.py) are one transaction:
nothing can see a stream entry without its job, and a producer that dies between the reads
and EXEC has written nothing. The Idempotency-Key is WATCHed, as arq does: two uploads with
one key race to EXEC; the loser's transaction is void and it answers with the winner's job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ExecAbortError, OutOfMemoryError, ResponseError, WatchError

from ocrq.shared.connect import REDIS_DOWN
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.fair import queue_item
from ocrq.shared.keys import Keys, tag_of
from ocrq.shared.lanes import ENTRY_TICKET
from ocrq.shared.nodes import NodeClients, is_moved
from ocrq.shared.record import ENTRY_BATCH, ENTRY_JOB_ID, Field, text
from ocrq.shared.replicas import confirm_replicated
from ocrq.shared.schemas import ACTIVE
from ocrq.shared.settings import Settings

FULL_RETRY_S = 5  # Retry-After of a full lane, and of a tenant at its backlog
FORGET_SAMPLE = 32  # oldest members per partition checked when a tenant is at its backlog


class NewJob:
    """One job to write: its keys and fields, as the store composed them."""

    def __init__(
        self,
        keys: Keys,
        job_id: str,
        lane: str,
        fields: Mapping[str, Any],
        batch: str,
        *,
        given_id: bool = False,
        weight: float = 1.0,
    ) -> None:
        self.keys, self.job_id, self.lane, self.batch = keys, job_id, lane, batch
        self.weight = weight  # the tenant's fair-share weight (OCRQ_QUOTAS)
        # True: the id came from the client (an upload's): a job of that id may exist.
        self.given_id = given_id
        self.fields = fields
        self.tag = tag_of(job_id)
        self.tenant = text(fields.get(Field.TENANT, ""))
        self.job = keys.job(job_id)
        self.stream = keys.stream(lane, self.tag)
        self.index = keys.tenant_jobs(self.tenant, self.tag)
        self.active = keys.tenant_active(self.tenant, self.tag)
        self.created = int(fields.get(Field.CREATED_AT) or 0)
        self.fair_queue = keys.fair_queue(lane, self.tag, self.tenant)
        self.fair_tenants = keys.fair_tenants(lane, self.tag)

    def idem_key(self, idem: str | None) -> str | None:
        """The Idempotency-Key's Redis key, in the job's partition (None without one)."""
        return self.keys.idem(self.tenant, idem, self.tag) if idem else None

    def tenant_sets(self) -> list[str]:
        """The tenant's active set in every partition (a batch's jobs all sit in one).

        The job's own set too when its tag is no partition's (an id without one: p0).
        """
        sets = [self.keys.tenant_active(self.tenant, tag) for tag in self.keys.tags]
        return sets if self.active in sets else [*sets, self.active]

    def entry(self, ticket: bool) -> dict[str, str]:
        """The stream entry: the job id, its batch when it has one, the fair-share mark."""
        fields = {ENTRY_JOB_ID: self.job_id}
        if self.batch:
            fields[ENTRY_BATCH] = self.batch
        if ticket:
            fields[ENTRY_TICKET] = "1"
        return fields


async def enqueue(
    nodes: NodeClients, settings: Settings, new: NewJob, idem: str | None
) -> tuple[bool, str]:
    """Write the job unless its Idempotency-Key names a live one; (created, job id).

    ``idem`` is the client's Idempotency-Key as sent (None without one). On a cluster the
    transaction goes to the slot's master over a plain client (shared/nodes.py).
    """
    try:
        return await _enqueue(nodes, settings, new, new.idem_key(idem))
    except ResponseError as e:
        if not is_moved(e):
            raise
        await _refresh_quietly(nodes)  # the slot moved: the next upload goes to its new owner
        raise OcrqError(
            ErrorCode.UNAVAILABLE, "the job store is moving this job's partition", retry_after=1
        ) from e
    except REDIS_DOWN:  # the slot's master is unreachable: a failover may have replaced it
        await _refresh_quietly(nodes)
        raise


async def _refresh_quietly(nodes: NodeClients) -> None:
    """Re-read the slot map; a cluster still failing over answers later, to a later upload."""
    with contextlib.suppress(*REDIS_DOWN):
        await nodes.refresh()


async def _enqueue(
    nodes: NodeClients, settings: Settings, new: NewJob, idem: str | None
) -> tuple[bool, str]:
    """The transaction; ``idem`` is the Idempotency-Key's Redis key (None without one)."""
    redis = nodes.for_key(new.job)
    async with redis.pipeline(transaction=True) as pipe:
        while True:
            try:
                watched = [k for k in (idem, new.job if new.given_id else None) if k]
                if watched:
                    await pipe.watch(*watched)
                prior = await _prior_job(pipe, new, idem)  # immediate: the pipe is WATCHing
                if prior is not None:
                    return False, prior
                if new.given_id and await pipe.exists(new.job):
                    raise OcrqError(ErrorCode.CONFLICT, f"job {new.job_id} already exists")
                await _check_room(nodes.redis, settings, new)
                pipe.multi()  # type: ignore[no-untyped-call]
                _write(pipe, settings, new, idem)
                await _execute(pipe)
                await confirm_replicated(nodes, settings, new.keys.replicated(new.tag), new.job_id)
                return True, new.job_id
            except WatchError:  # another upload with the same key won the race: look again
                continue


async def _prior_job(pipe: Any, new: NewJob, idem: str | None) -> str | None:
    """The live job an Idempotency-Key already names, if any."""
    if not idem:
        return None
    prior = await pipe.get(idem)
    if prior is None or not await pipe.exists(new.keys.job(text(prior))):
        return None
    return text(prior)


async def _check_room(redis: aioredis.Redis, settings: Settings, new: NewJob) -> None:
    """Refuse a tenant at its backlog (429), then a full lane (503): reads, one round trip.

    Reads outside the transaction: the limits are soft ones (a few concurrent uploads may
    pass them together), which keeps uploads from aborting each other's transactions.
    """
    sets = new.tenant_sets() if settings.api.max_tenant_backlog > 0 else []
    async with redis.pipeline(transaction=False) as pipe:
        pipe.xlen(new.stream)
        for key in sets:
            pipe.zcard(key)
        lane, *tenant = [int(n) for n in await pipe.execute()]
    if sets and sum(tenant) >= settings.api.max_tenant_backlog:
        await _check_tenant_backlog(redis, settings, new, sets, sum(tenant))
    # Each partition holds its share of a lane: uploads without a key spread evenly, and P
    # XLENs per upload would cost more than they tell.
    if lane >= -(-settings.api.max_backlog // new.keys.partitions):
        raise OcrqError(
            ErrorCode.QUEUE_FULL, f"the {new.lane} lane holds {lane} jobs", retry_after=FULL_RETRY_S
        )


async def _check_tenant_backlog(
    redis: aioredis.Redis, settings: Settings, new: NewJob, sets: list[str], active: int
) -> None:
    """The tenant counts ``active`` jobs, at its limit: refuse, unless some had ended.

    The sets are exact while every end runs through a script; one that did not (a hash
    deleted by hand, evicted) would hold a place for ever, so the oldest members are
    checked here, where it matters, and those whose job ended or vanished are dropped.
    """
    active -= await _forget_ended(redis, new.keys, sets)
    limit = settings.api.max_tenant_backlog
    if active >= limit:
        raise OcrqError(
            ErrorCode.QUOTA_EXCEEDED,
            f"tenant {new.tenant} has {active} jobs waiting or running "
            f"(OCRQ_MAX_TENANT_BACKLOG={limit}): retry once some have ended",
            retry_after=FULL_RETRY_S,
        )


async def _forget_ended(redis: aioredis.Redis, keys: Keys, sets: list[str]) -> int:
    """Drop the oldest members whose job is no longer queued or processing; how many.

    No race with a live job: its hash and its member are written in one transaction, and
    a job that ended never becomes active again.
    """
    async with redis.pipeline(transaction=False) as pipe:
        for key in sets:
            pipe.zrange(key, 0, FORGET_SAMPLE - 1)
        rows = await pipe.execute()
    members = [(key, text(m)) for key, row in zip(sets, rows, strict=True) for m in row]
    async with redis.pipeline(transaction=False) as pipe:
        for _, job_id in members:
            pipe.hget(keys.job(job_id), Field.STATUS)
        statuses = await pipe.execute()
    ended = [
        (key, job_id)
        for (key, job_id), status in zip(members, statuses, strict=True)
        if status is None or text(status) not in ACTIVE
    ]
    async with redis.pipeline(transaction=False) as pipe:
        for key, job_id in ended:
            pipe.zrem(key, job_id)
        await pipe.execute()
    return len(ended)


def _write(pipe: Any, settings: Settings, new: NewJob, idem: str | None) -> None:
    """Queue every write of the transaction."""
    pipe.hset(new.job, mapping=dict(new.fields))
    # The group must exist at id 0 before the first entry, or KEDA reads a missing lag;
    # BUSYGROUP (it exists) is the usual answer and is ignored.
    pipe.xgroup_create(new.stream, new.keys.group, id="0", mkstream=True)
    fair = settings.tenancy.fair_share
    pipe.xadd(new.stream, new.entry(fair))
    if fair:  # the ticket's job waits in its tenant's queue (shared/fair.py)
        pipe.rpush(new.fair_queue, queue_item(new.job_id, new.batch, new.weight))
        pipe.zadd(new.fair_tenants, {new.tenant: 0}, nx=True)
    if idem:
        pipe.set(idem, new.job_id, ex=settings.api.idempotency_ttl_s)
    pipe.zadd(new.index, {new.job_id: new.created})
    pipe.zremrangebyrank(new.index, 0, -settings.api.tenant_index_size - 1)
    pipe.expire(new.index, settings.api.result_ttl_s)
    # No TTL: the set lives while its jobs do, and the last one's end removes it.
    pipe.zadd(new.active, {new.job_id: new.created})
    if new.batch:
        pipe.hincrby(new.keys.batch(new.batch), "total", 1)
        pipe.rpush(new.keys.batch_jobs(new.batch), new.job_id)


async def _execute(pipe: Any) -> None:
    """EXEC; Redis at maxmemory refuses the whole transaction (nothing is written)."""
    try:
        results = await pipe.execute(raise_on_error=False)
    except (ExecAbortError, OutOfMemoryError) as e:
        raise store_full() from e
    for result in results:
        if isinstance(result, ResponseError) and "BUSYGROUP" not in str(result):
            if isinstance(result, OutOfMemoryError):
                raise store_full() from result
            raise result


def store_full() -> OcrqError:
    """The 503 for an upload that Redis has no memory left for."""
    return OcrqError(
        ErrorCode.UNAVAILABLE,
        "the job store is full (Redis maxmemory): retry once queued jobs have been processed",
        retry_after=30,
    )
