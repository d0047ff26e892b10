"""The job store: redis.asyncio client plus the registered scripts, one method per transition."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

from ocrq.shared.connect import REDIS_DOWN, make_redis
from ocrq.shared.enqueue import NewJob
from ocrq.shared.enqueue import enqueue as write_new_job
from ocrq.shared.errors import ErrorCode
from ocrq.shared.event_channel import EventChannel
from ocrq.shared.fair import FairTickets, charge
from ocrq.shared.keys import SCRIPT_NAMES, Keys, load_script, tag_of
from ocrq.shared.lanes import JobLanes
from ocrq.shared.nodes import NodeClients
from ocrq.shared.outcome import Outcome, Usage
from ocrq.shared.page_count import document_pages
from ocrq.shared.quota_store import QuotaStore, utc_day
from ocrq.shared.record import (
    POLL_FIELDS,
    Field,
    JobRecord,
    decode_record,
    error_json,
    text,
)
from ocrq.shared.settings import Settings
from ocrq.shared.tracing import current_traceparent, span
from ocrq.shared.webhook_queue import WebhookQueue

ScriptArg = bytes | str | int | float
__all__ = [
    "REDIS_DOWN",
    "STORE_ERRORS",
    "JobStore",
    "Outcome",
    "Usage",
    "is_missing_group",
    "make_redis",
    "now_ms",
]
# Any failure of a store call: Redis down (REDIS_DOWN) or a command it refused. Callers
# outside shared/ catch these, never redis-py's own types.
STORE_ERRORS: tuple[type[Exception], ...] = (RedisError, OSError)


async def upload_pages(fields: Mapping[str, Any]) -> int:
    """The pages of a new job's document, for its quotas (a PDF is read off the loop)."""
    payload = fields.get(Field.PAYLOAD)
    media = text(fields.get(Field.MEDIA_TYPE, ""))
    data = payload if isinstance(payload, bytes | bytearray | memoryview) else None
    return await asyncio.to_thread(document_pages, media, bytes(data) if data else None)


def is_missing_group(error: Exception) -> bool:
    """True for NOGROUP: a stream or its group is gone (Redis lost its data); recreate them."""
    return isinstance(error, ResponseError) and "NOGROUP" in str(error)


def is_oom(error: Exception) -> bool:
    """True for Redis refusing a write at maxmemory (the noeviction policy)."""
    return isinstance(error, OutOfMemoryError)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (what the job hash stores)."""
    return int(time.time() * 1000)


class JobStore:
    """Every Redis read and write of ocrq goes through here (or the parts it holds: the
    lanes' reads, the webhook queue, the events channel)."""

    def __init__(self, redis: aioredis.Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self.keys = Keys(settings.store.prefix, settings.store.partitions)
        self.nodes = NodeClients(redis)  # on a cluster: plain clients of its masters
        self.lanes = JobLanes(redis, self.keys)
        self.webhook_queue = WebhookQueue(redis, self.keys)
        self.event_channel = EventChannel(redis, self.keys.events)
        self.fair = FairTickets(redis, self.keys)
        self.quotas = QuotaStore(redis, self.keys, settings.tenancy.quota_table)
        # Called with (tenant, status, pages) once a script has ended a job (worker metrics).
        self.on_end: Callable[[str, str, int], None] | None = None
        # Registered once: redis-py sends EVALSHA and loads the script again after a flush.
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(load_script(name)) for name in SCRIPT_NAMES
        }

    async def _run(self, name: str, keys: list[str], argv: list[ScriptArg]) -> Any:
        return await self._scripts[name](keys=keys, args=argv)

    async def ensure_groups(self) -> None:
        """Create the group of every lane in every partition at id 0 with MKSTREAM."""
        for _, stream in self.keys.lane_streams():
            await self.create_group(stream, self.keys.group)

    async def create_group(self, stream: str, group: str) -> None:
        """XGROUP CREATE … 0 MKSTREAM; BUSYGROUP (it exists) is fine."""
        try:
            await self.redis.xgroup_create(stream, group, id="0", mkstream=True)
        except ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise

    async def group_info(self, stream: str) -> dict[Any, Any] | None:
        """The workers group's XINFO GROUPS entry; None when it or the stream is gone."""
        try:
            groups = await self.redis.xinfo_groups(stream)
        except ResponseError:
            return None
        return next((g for g in groups if text(g.get("name")) == self.keys.group), None)

    async def groups_exist(self) -> bool:
        """True when every lane's stream in every partition has the workers group."""
        streams = self.keys.lane_streams()
        return all([await self.group_info(stream) is not None for _, stream in streams])

    async def enqueue(
        self,
        job_id: str,
        lane: str,
        fields: Mapping[str, Any],
        idem: str | None,
        batch: str = "",
        *,
        given_id: bool = False,
    ) -> tuple[bool, str]:
        """Write the job, its stream entry, its tenant index entry (and its batch's) at once.

        ``idem`` is the client's Idempotency-Key as sent. Returns (created, job_id): a
        replayed Idempotency-Key gives (False, the first job). ``given_id``: the id is not a
        fresh one (an upload's), so a job of that id is refused (409), never overwritten.
        With tracing on, the job keeps the enqueue span's traceparent for its worker.
        """
        with span("ocrq.enqueue", {"ocrq.job_id": job_id, "ocrq.lane": lane}, kind="producer"):
            if traceparent := current_traceparent():
                fields = {**fields, Field.TRACE: traceparent}
            return await self._enqueue(job_id, lane, fields, idem, batch, given_id=given_id)

    async def _enqueue(
        self,
        job_id: str,
        lane: str,
        fields: Mapping[str, Any],
        idem: str | None,
        batch: str,
        *,
        given_id: bool,
    ) -> tuple[bool, str]:
        weight = self.quotas.table.of(text(fields.get(Field.TENANT, ""))).weight
        new = NewJob(self.keys, job_id, lane, fields, batch, given_id=given_id, weight=weight)
        if not self.quotas.counts_jobs(new.tenant):
            return await write_new_job(
                self.nodes, self.settings, new, idem, self._scripts["enqueue"]
            )
        if prior := await self._replayed(new, idem):  # a replay is its first upload's job
            return False, prior
        await self.quotas.admit(new.tenant, job_id, await upload_pages(fields))
        try:
            created, named = await write_new_job(
                self.nodes, self.settings, new, idem, self._scripts["enqueue"]
            )
        except BaseException:
            with contextlib.suppress(*STORE_ERRORS):  # else found ended at the limit
                await self.quotas.release(new.tenant, job_id, refund=True)
            raise
        if not created:  # a replay: the first upload's job is the one counted
            await self.quotas.release(new.tenant, job_id, refund=True)
        return created, named

    async def _replayed(self, new: NewJob, idem: str | None) -> str | None:
        """The live job an Idempotency-Key already names (the write checks again)."""
        key = new.idem_key(idem)
        prior = await self.redis.get(key) if key else None
        if prior is None or not await self.redis.exists(self.keys.job(text(prior))):
            return None
        return text(prior)

    async def take_lease(self, name: str, me: str, seconds: float) -> bool:
        """Hold the named lease for ``seconds`` unless another process holds it."""
        ms = max(1, int(seconds * 1000))
        return int(await self._run("lease", [self.keys.lease(name)], [me, ms])) == 1

    async def jobs_exist(self, job_ids: Sequence[str]) -> list[bool]:
        """Whether each job's hash still exists (the sweeper's question), in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.exists(self.keys.job(job_id))
            return [bool(n) for n in await pipe.execute()]

    async def check_reachable(self) -> None:
        """PING Redis: raises when it does not answer (readiness)."""
        await self.redis.ping()

    async def aclose(self) -> None:
        """Close the client and any per-node clients of the store."""
        await self.nodes.aclose()
        await self.redis.aclose()

    async def read(self, job_id: str, names: Sequence[Field] = POLL_FIELDS) -> JobRecord:
        """HMGET the named fields (never the payload unless asked by name), decoded."""
        values = await self.redis.hmget(self.keys.job(job_id), list(names))
        return decode_record(dict(zip(names, values, strict=True)))

    async def status(self, job_id: str) -> str | None:
        """The job's status field alone; None when the job is gone."""
        value = await self.redis.hget(self.keys.job(job_id), Field.STATUS)
        return None if value is None else text(value)

    async def cancel(self, job_id: str, tenant: str, *, delete: bool = False) -> str:
        """Cancel an active job ('cancelled', or the status of one that had ended), or
        delete a job, cancelling it first when active ('deleted'); 'missing' when not found.
        """
        err = error_json(ErrorCode.CANCELLED, "cancelled by the client")
        argv: list[ScriptArg] = [
            tenant,
            err,
            now_ms(),
            self.result_ttl(tenant),
            self.keys.events,
            job_id,
            "delete" if delete else "cancel",
            self.usage_ttl_s,
        ]
        # A job's batch never changes: reading it first leaves no race with the script.
        batch = text(await self.redis.hget(self.keys.job(job_id), Field.BATCH) or b"")
        index = self.keys.tenant_jobs(tenant, tag_of(job_id))
        keys = [self.keys.job(job_id), index, *self._ends(job_id, batch, tenant)]
        keys += [self.keys.job_pages(job_id), self.keys.job_files(job_id)]
        keys.append(self._usage(tenant, job_id))
        reply = text(await self._run("cancel", keys, argv))
        if reply in ("cancelled", "deleted"):
            await self._ended(tenant, job_id, "cancelled", 0)
        return reply

    def _ends(self, job_id: str, batch: str, tenant: str) -> list[str]:
        """The keys a job's end touches besides the job: its batch, its list, the webhooks,
        its tenant's active set.
        """
        tag = tag_of(job_id)
        hooks, active = self.keys.webhooks(tag), self.keys.tenant_active(tenant, tag)
        if not batch:
            return [*self.keys.no_batch(tag), hooks, active]
        return [self.keys.batch(batch), self.keys.batch_jobs(batch), hooks, active]

    async def _ended(self, tenant: str, job_id: str, status: str, pages: int) -> None:
        """What follows a job's end outside its script: its quota place, the callback."""
        await self.quotas.release(tenant, job_id)
        if self.on_end is not None:
            self.on_end(tenant, status, pages)

    def _usage(self, tenant: str, job_id: str) -> str:
        """The tenant's usage of today in the job's partition."""
        return self.keys.usage(tenant, utc_day(now_ms()), tag_of(job_id))

    @property
    def usage_ttl_s(self) -> int:
        """How long a day's usage is kept (OCRQ_USAGE_RETENTION_DAYS)."""
        return self.settings.tenancy.usage_retention_days * 86_400

    def result_ttl(self, tenant: str) -> int:
        """How long the tenant's ended jobs are kept (OCRQ_RESULT_TTLS, else OCRQ_RESULT_TTL_S)."""
        return self.settings.blobs.result_ttl_of(tenant, self.settings.api.result_ttl_s)

    async def _tenant(self, job_id: str) -> str:
        """The job's tenant ("" when the job is gone): it never changes, so reading it
        before the script that ends the job leaves no race."""
        return text(await self.redis.hget(self.keys.job(job_id), Field.TENANT) or b"")

    def _stream(self, job_id: str, lane: str) -> str:
        """The stream (lane and partition) that holds the job's entry."""
        return self.keys.stream(lane, tag_of(job_id))

    async def recent_jobs(
        self, tenant: str, limit: int, offset: int, names: Sequence[Field]
    ) -> list[tuple[str, JobRecord]]:
        """The tenant's jobs, newest first, with the named fields; expired ones are skipped."""
        ids = await self._recent_ids(tenant, offset + limit)
        ids = ids[offset : offset + limit]
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hmget(self.keys.job(job_id), list(names))
            rows = await pipe.execute()
        found: list[tuple[str, JobRecord]] = []
        gone: list[str] = []
        for job_id, values in zip(ids, rows, strict=True):
            record = decode_record(dict(zip(names, values, strict=True)))
            if record.status is None:
                gone.append(job_id)
            else:
                found.append((job_id, record))
        for job_id in gone:  # their hashes expired: drop them from the index as we go
            await self.redis.zrem(self.keys.tenant_jobs(tenant, tag_of(job_id)), job_id)
        return found

    async def _recent_ids(self, tenant: str, count: int) -> list[str]:
        """The tenant's newest ``count`` job ids over every partition, newest first."""
        scored: list[tuple[float, str]] = []
        for tag in self.keys.tags:
            index = self.keys.tenant_jobs(tenant, tag)
            rows: Any = await self.redis.zrevrange(index, 0, count - 1, withscores=True)
            scored += [(float(score), text(member)) for member, score in rows]
        scored.sort(key=lambda row: row[0], reverse=True)
        return [job_id for _, job_id in scored[:count]]

    async def claim(self, job_id: str, lane: str, entry: str, me: str) -> str:
        """queued → processing for this worker: 'ok', 'skip:<status>' or 'missing'."""
        tag = tag_of(job_id)
        keys = [self.keys.job(job_id), self._stream(job_id, lane), self.keys.fair_taken(lane, tag)]
        argv: list[ScriptArg] = [me, entry, self.keys.group, now_ms()]
        return text(await self._run("claim", keys, argv))

    async def progress(
        self, job_id: str, me: str, done: int, total: int, pages: Mapping[int, bytes] | None = None
    ) -> bool:
        """Advance pages_done and keep the pages just finished (number → Page JSON);
        False when this worker no longer owns the job."""
        ttl = self.settings.api.result_ttl_s
        argv: list[ScriptArg] = [me, done, total, self.keys.events, job_id, ttl]
        for number, page_json in sorted((pages or {}).items()):
            argv += [number, page_json]
        keys = [self.keys.job(job_id), self.keys.job_pages(job_id)]
        return text(await self._run("progress", keys, argv)) == "ok"

    async def save_files(self, job_id: str, me: str, files: Mapping[str, bytes]) -> bool:
        """Keep the job's files (figures, searchable PDF) while this worker owns it."""
        if not files:
            return True
        argv: list[ScriptArg] = [me, self.settings.api.result_ttl_s]
        for name, data in sorted(files.items()):
            argv += [name, data]
        keys = [self.keys.job(job_id), self.keys.job_files(job_id)]
        return text(await self._run("save_files", keys, argv)) == "ok"

    async def read_pages(self, job_id: str, numbers: Sequence[int]) -> list[bytes | None]:
        """The finished pages' JSON, None for a page not (or no longer) kept."""
        if not numbers:
            return []
        values: Any = await self.redis.hmget(self.keys.job_pages(job_id), [str(n) for n in numbers])
        return list(values)

    async def finished_pages(self, job_id: str) -> list[int]:
        """The numbers of the pages kept so far (read_pages has them), in no set order."""
        names: list[bytes | str] = await self.redis.hkeys(self.keys.job_pages(job_id))
        return [int(name) for name in names]

    async def read_file(self, job_id: str, name: str) -> bytes | None:
        """One of the job's files ("images/p1-1.png", "searchable.pdf"), None when absent."""
        value: Any = await self.redis.hget(self.keys.job_files(job_id), name)
        return None if value is None else bytes(value)

    async def finish(
        self, job_id: str, lane: str, entry: str, me: str, outcome: Outcome, batch: str = ""
    ) -> bool:
        """Write the outcome, drop the payload, ACK+XDEL, publish: False when not ours."""
        tenant = await self._tenant(job_id)
        ends = self._ends(job_id, batch, tenant)
        keys = [self.keys.job(job_id), self._stream(job_id, lane), *ends]
        keys += [self.keys.job_pages(job_id), self.keys.job_files(job_id)]
        tag, usage = tag_of(job_id), outcome.usage or Usage()
        keys += [self.keys.fair_taken(lane, tag), self.keys.fair_tenants(lane, tag)]
        keys.append(self._usage(tenant, job_id))
        weight = self.quotas.table.of(tenant).weight
        argv: list[ScriptArg] = [
            me,
            entry,
            self.keys.group,
            outcome.status,
            outcome.field,
            outcome.value,
            now_ms(),
            self.result_ttl(tenant),
            self.keys.events,
            job_id,
            outcome.pages_done,
            tenant,
            charge(outcome.pages_done, weight),
            usage.engine,
            usage.engine_ms,
            usage.bytes_out,
            self.usage_ttl_s,
        ]
        ended = text(await self._run("finish", keys, argv)) == "ok"
        if ended:
            await self._ended(tenant, job_id, outcome.status, outcome.pages_done)
        return ended

    async def touch(self, job_id: str, lane: str, entry: str, me: str) -> bool:
        """Reset the entry's idle time while this worker still owns it."""
        argv: list[ScriptArg] = [me, entry, self.keys.group]
        return int(await self._run("touch", [self._stream(job_id, lane)], argv)) == 1

    async def release(self, job_id: str, lane: str, entry: str, me: str) -> bool:
        """Hand an unfinished job back (processing → queued) for the next reclaim to take."""
        keys = [self.keys.job(job_id), self._stream(job_id, lane)]
        idle = self.settings.worker.visibility_timeout_ms + 1
        argv: list[ScriptArg] = [me, entry, self.keys.group, idle, self.keys.events, job_id]
        return int(await self._run("release", keys, argv)) == 1

    async def poison(
        self, job_id: str, lane: str, entry: str, me: str, deliveries: int, batch: str = ""
    ) -> bool:
        """Fail the job as poisoned and copy it to the dead stream."""
        err = error_json(ErrorCode.POISONED, f"delivered {deliveries} times without finishing")
        tag = tag_of(job_id)
        keys = [self.keys.job(job_id), self.keys.stream(lane, tag), self.keys.dead(tag)]
        tenant = await self._tenant(job_id)
        keys += self._ends(job_id, batch, tenant)
        keys += [self.keys.fair_taken(lane, tag), self._usage(tenant, job_id)]
        argv: list[ScriptArg] = [
            me,
            entry,
            self.keys.group,
            err,
            now_ms(),
            self.result_ttl(tenant),
            self.keys.events,
            job_id,
            lane,
            deliveries,
            self.usage_ttl_s,
        ]
        poisoned = text(await self._run("poison", keys, argv)) == "ok"
        if poisoned:
            await self._ended(tenant, job_id, "failed", 0)
        return poisoned

    async def prune_consumers(self, stream: str, me: str, min_idle_s: float) -> int:
        """Remove the group's consumers on a stream that own nothing, unseen for min_idle_s."""
        argv: list[ScriptArg] = [self.keys.group, int(min_idle_s * 1000), me]
        return int(await self._run("prune", [stream], argv))

    async def write_webhook_state(self, kind: str, some_id: str, state_json: bytes) -> None:
        """Write where a webhook delivery stands on its job (kind "job") or batch, if it exists."""
        key = self.keys.job(some_id) if kind == "job" else self.keys.batch(some_id)
        await self._run("webhook_state", [key], [state_json])

    async def memory(self) -> tuple[int, int]:
        """(used_memory, maxmemory) in bytes, of the fullest master of a cluster."""
        info: Any = await self.redis.info("memory")
        if info and all(isinstance(v, dict) for v in info.values()):  # a cluster: per node
            nodes = list(info.values())
            fullest = max(nodes, key=lambda n: int(n.get("used_memory", 0)))
            return int(fullest.get("used_memory", 0)), int(fullest.get("maxmemory", 0))
        return int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))

    async def lane_stats(self, lane: str) -> tuple[int, int]:
        """(lag, pending) of the workers group on a lane, summed over its partitions."""
        lag = pending = 0
        for stream in self.keys.streams(lane):
            stream_lag, stream_pending = await self._stream_stats(stream)
            lag, pending = lag + stream_lag, pending + stream_pending
        return lag, pending

    async def _stream_stats(self, stream: str) -> tuple[int, int]:
        """(lag, pending) of the workers group on a stream; lag falls back to XLEN - pending."""
        group = await self.group_info(stream)
        if group is None:
            return 0, 0
        pending = int(group.get("pending") or 0)
        lag = group.get("lag")
        if lag is None:
            lag = max(0, int(await self.redis.xlen(stream)) - pending)
        return int(lag), pending
