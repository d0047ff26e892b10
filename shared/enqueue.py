"""Writing a new job: one MULTI/EXEC, one round trip, that checks and writes everything.

A document (up to 10 MB) passed to a Lua script is copied into and through Lua (measured in
BENCHMARKS.md), so the transaction first writes the job's fields, document included, to an
incoming hash, and then runs a short script (scripts/enqueue.lua) that gets only ids and
numbers: it checks the Idempotency-Key, an id the client chose and the tenant's and the
lane's backlogs, and either RENAMEs the incoming hash into the job's (O(1), nothing copied)
and writes the stream entry, the idempotency key, the tenant index, the tenant's active set,
the batch's counters and, with fair share, the job's place in its tenant's queue
(shared/fair.py), or deletes the incoming hash and says why not. EXEC runs it all at once:
nothing can see a stream entry without its job or a job that was refused, two uploads with
one Idempotency-Key cannot both win, and a producer that dies before EXEC has written nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import ExecAbortError, NoScriptError, OutOfMemoryError, ResponseError

from ocrq.shared import resp
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
INCOMING_TTL_MS = 60_000  # an incoming hash outlives only a transaction whose script failed


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
        self.incoming = keys.incoming(job_id)  # the fields, until the script admits them
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
    nodes: NodeClients, settings: Settings, new: NewJob, idem: str | None, script: AsyncScript
) -> tuple[bool, str]:
    """Write the job unless its Idempotency-Key names a live one; (created, job id).

    ``idem`` is the client's Idempotency-Key as sent (None without one). On a cluster the
    transaction goes to the slot's master over a plain client (shared/nodes.py).
    """
    try:
        return await _enqueue(nodes, settings, new, new.idem_key(idem), script)
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
    nodes: NodeClients, settings: Settings, new: NewJob, idem: str | None, script: AsyncScript
) -> tuple[bool, str]:
    """The transaction; ``idem`` is the Idempotency-Key's Redis key (None without one)."""
    sets = new.tenant_sets() if settings.api.max_tenant_backlog > 0 else []
    elsewhere = await _active_elsewhere(nodes.redis, new, sets)
    for _ in range(2):  # again once jobs that had ended no longer hold the tenant's places
        verdict = await _transact(nodes.for_key(new.job), settings, new, idem, script, elsewhere)
        kind = text(verdict[0])
        if kind == "new":
            await confirm_replicated(nodes, settings, new.keys.replicated(new.tag), new.job_id)
            return True, new.job_id
        if kind == "replay":
            return False, text(verdict[1])
        if kind == "conflict":
            raise OcrqError(ErrorCode.CONFLICT, f"job {new.job_id} already exists")
        if kind == "lane-full":
            raise OcrqError(
                ErrorCode.QUEUE_FULL,
                f"the {new.lane} lane holds {int(verdict[1])} jobs",
                retry_after=FULL_RETRY_S,
            )
        await _check_tenant_backlog(nodes.redis, settings, new, sets, int(verdict[1]))
    raise _tenant_full(new, settings.api.max_tenant_backlog, int(verdict[1]))


async def _active_elsewhere(redis: aioredis.Redis, new: NewJob, sets: list[str]) -> int:
    """The tenant's active jobs in the other partitions (the script counts its own): one
    round trip, and only with partitions. A soft limit: a few concurrent uploads may pass
    it together, which keeps uploads from waiting on each other."""
    others = [key for key in sets if key != new.active]
    if not others:
        return 0
    async with redis.pipeline(transaction=False) as pipe:
        for key in others:
            pipe.zcard(key)
        return sum(int(n) for n in await pipe.execute())


async def _transact(
    redis: aioredis.Redis,
    settings: Settings,
    new: NewJob,
    idem: str | None,
    script: AsyncScript,
    elsewhere: int,
) -> list[Any]:
    """MULTI, the fields into the incoming hash, the enqueue script, EXEC: the script's
    reply. Redis lost its scripts (a restart, SCRIPT FLUSH): loaded, and sent again."""
    keys, argv = _script_call(settings, new, idem, elsewhere)
    fields = [part for pair in new.fields.items() for part in pair]  # str, int or bytes values
    buffers = [
        *resp.command("MULTI"),
        *resp.pack(["HSET", new.incoming, *fields]),
        *resp.command("PEXPIRE", new.incoming, INCOMING_TTL_MS),
        *resp.pack(["EVALSHA", script.sha, len(keys), *keys, *argv]),
        *resp.command("EXEC"),
    ]
    for _ in range(2):
        reply = _script_reply(await resp.exchange(redis, buffers, 5))
        if not isinstance(reply, NoScriptError):
            return list(reply)
        await redis.script_load(script.script)
    raise OcrqError(ErrorCode.UNAVAILABLE, "the job store keeps losing its scripts", retry_after=1)


def _script_call(
    settings: Settings, new: NewJob, idem: str | None, elsewhere: int
) -> tuple[list[str], list[str | int | float]]:
    """enqueue.lua's KEYS and ARGV for this job."""
    fair = settings.tenancy.fair_share
    keys = [new.incoming, new.job, new.stream, new.index, new.active]
    keys += [new.fair_queue, new.fair_tenants, *([idem] if idem else [])]
    if new.batch:
        keys += [new.keys.batch(new.batch), new.keys.batch_jobs(new.batch)]
    # Each partition holds its share of a lane: uploads without a key spread evenly, and P
    # XLENs per upload would cost more than they tell.
    lane_limit = -(-settings.api.max_backlog // new.keys.partitions)
    argv: list[str | int | float] = [
        new.job_id, new.created, lane_limit, settings.api.max_tenant_backlog, elsewhere,
        new.keys.group, int(fair), queue_item(new.job_id, new.batch, new.weight), new.tenant,
        settings.api.tenant_index_size, settings.api.result_ttl_s, int(bool(idem)),
        int(bool(new.batch)), settings.api.idempotency_ttl_s, int(new.given_id),
        new.keys.job_prefix(new.tag),
    ]  # fmt: skip
    argv += [part for pair in new.entry(fair).items() for part in pair]
    return keys, argv


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
        raise _tenant_full(new, limit, active)


def _tenant_full(new: NewJob, limit: int, active: int) -> OcrqError:
    """The 429 of a tenant holding ``active`` jobs, at its limit."""
    return OcrqError(
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


def _script_reply(replies: list[Any]) -> Any:
    """The script's reply out of MULTI's five replies, or the NoScriptError in its place.

    Redis at maxmemory refuses the whole transaction (nothing is written): a 503. A command
    refused while queued (MOVED, OOM) aborts EXEC and is raised, as redis-py raises it; any
    other error is raised too.
    """
    *queued, executed = replies
    refused = [reply for reply in queued if isinstance(reply, ResponseError)]
    if refused or isinstance(executed, ExecAbortError):
        error = refused[0] if refused else executed
        if isinstance(error, OutOfMemoryError | ExecAbortError):
            raise store_full() from error
        raise error
    if isinstance(executed, ResponseError):
        raise executed
    for result in executed:
        if isinstance(result, OutOfMemoryError):
            raise store_full() from result
        if isinstance(result, ResponseError) and not isinstance(result, NoScriptError):
            raise result
    return executed[-1]


def store_full() -> OcrqError:
    """The 503 for an upload that Redis has no memory left for."""
    return OcrqError(
        ErrorCode.UNAVAILABLE,
        "the job store is full (Redis maxmemory): retry once queued jobs have been processed",
        retry_after=30,
    )
