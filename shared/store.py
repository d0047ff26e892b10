"""The job store: redis.asyncio client plus the registered scripts, one method per transition."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ocrq.shared.enqueue import NewJob
from ocrq.shared.enqueue import enqueue as write_new_job
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import SCRIPT_NAMES, Keys, load_script
from ocrq.shared.record import (
    ENTRY_BATCH,
    ENTRY_JOB_ID,
    POLL_FIELDS,
    Field,
    JobRecord,
    decode_record,
    error_json,
    text,
)
from ocrq.shared.schemas import Status
from ocrq.shared.settings import Settings

ScriptArg = bytes | str | int | float

# Redis unreachable or too slow to answer: wait and try again; never a job's outcome.
REDIS_DOWN: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)


def is_oom(error: Exception) -> bool:
    """True for Redis refusing a write at maxmemory (the noeviction policy)."""
    return isinstance(error, OutOfMemoryError)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (what the job hash stores)."""
    return int(time.time() * 1000)


def make_redis(settings: Settings) -> aioredis.Redis:
    """One client with a blocking pool and explicit socket timeouts (BLOCK stays below them)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        settings.redis_url,
        max_connections=settings.redis_max_connections,
        timeout=settings.redis_connect_timeout_s,
        socket_timeout=settings.redis_socket_timeout_s,
        socket_connect_timeout=settings.redis_connect_timeout_s,
        health_check_interval=30,
    )
    return aioredis.Redis(connection_pool=pool)


class JobStore:
    """Every Redis read and write of ocrq goes through here."""

    def __init__(self, redis: aioredis.Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self.keys = Keys(settings.prefix)
        # Registered once: redis-py sends EVALSHA and loads the script again after a flush.
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(load_script(name)) for name in SCRIPT_NAMES
        }

    async def _run(self, name: str, keys: list[str], argv: list[ScriptArg]) -> Any:
        return await self._scripts[name](keys=keys, args=argv)

    async def ensure_groups(self) -> None:
        """Create each lane's group at id 0 with MKSTREAM; BUSYGROUP means it exists."""
        for lane in self.keys.lanes:
            try:
                await self.redis.xgroup_create(
                    self.keys.stream(lane), self.keys.group, id="0", mkstream=True
                )
            except ResponseError as e:
                if "BUSYGROUP" not in str(e):
                    raise

    async def group_info(self, lane: str) -> dict[Any, Any] | None:
        """XINFO GROUPS entry of the workers group on a lane; None when it or the stream is gone."""
        try:
            groups = await self.redis.xinfo_groups(self.keys.stream(lane))
        except ResponseError:
            return None
        return next((g for g in groups if text(g.get("name")) == self.keys.group), None)

    async def groups_exist(self) -> bool:
        """True when every lane's stream has the workers group."""
        return all([await self.group_info(lane) is not None for lane in self.keys.lanes])

    async def enqueue(
        self, job_id: str, lane: str, fields: Mapping[str, Any], idem: str | None,
        batch: str = "",
    ) -> tuple[bool, str]:  # fmt: skip
        """Write the job, its stream entry, its tenant index entry (and its batch's) at once.

        Returns (created, job_id): a replayed Idempotency-Key gives (False, the first job).
        """
        new = NewJob(self.keys, job_id, lane, fields, batch)
        return await write_new_job(self.redis, self.settings, new, idem)

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
            tenant, err, now_ms(), self.settings.result_ttl_s, self.keys.events, job_id,
            "delete" if delete else "cancel",
        ]  # fmt: skip
        # A job's batch never changes: reading it first leaves no race with the script.
        batch = text(await self.redis.hget(self.keys.job(job_id), Field.BATCH) or b"")
        keys = [self.keys.job(job_id), self.keys.tenant_jobs(tenant), *self._ends(batch)]
        return text(await self._run("cancel", keys, argv))

    def _ends(self, batch: str) -> list[str]:
        """The keys a job's end touches besides the job: its batch, its list, the webhooks."""
        return [self.keys.batch(batch), self.keys.batch_jobs(batch), self.keys.webhooks]

    async def recent_jobs(
        self, tenant: str, limit: int, offset: int, names: Sequence[Field]
    ) -> list[tuple[str, JobRecord]]:
        """The tenant's jobs, newest first, with the named fields; expired ones are skipped."""
        index = self.keys.tenant_jobs(tenant)
        ids = [text(i) for i in await self.redis.zrevrange(index, offset, offset + limit - 1)]
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
        if gone:  # their hashes expired: drop them from the index as we go
            await self.redis.zrem(index, *gone)
        return found

    async def claim(self, job_id: str, lane: str, entry: str, me: str) -> str:
        """queued → processing for this worker: 'ok', 'skip:<status>' or 'missing'."""
        keys = [self.keys.job(job_id), self.keys.stream(lane)]
        argv: list[ScriptArg] = [me, entry, self.keys.group, now_ms()]
        return text(await self._run("claim", keys, argv))

    async def progress(self, job_id: str, me: str, done: int, total: int) -> bool:
        """Advance pages_done; False when this worker no longer owns the job."""
        argv: list[ScriptArg] = [me, done, total, self.keys.events, job_id]
        return text(await self._run("progress", [self.keys.job(job_id)], argv)) == "ok"

    async def finish(
        self, job_id: str, lane: str, entry: str, me: str, outcome: Outcome, batch: str = ""
    ) -> bool:
        """Write the outcome, drop the payload, ACK+XDEL, publish: False when not ours."""
        keys = [self.keys.job(job_id), self.keys.stream(lane), *self._ends(batch)]
        argv: list[ScriptArg] = [
            me, entry, self.keys.group, outcome.status, outcome.field, outcome.value, now_ms(),
            self.settings.result_ttl_s, self.keys.events, job_id, outcome.pages_done,
        ]  # fmt: skip
        return text(await self._run("finish", keys, argv)) == "ok"

    async def touch(self, lane: str, entry: str, me: str) -> bool:
        """Reset the entry's idle time while this worker still owns it."""
        argv: list[ScriptArg] = [me, entry, self.keys.group]
        return int(await self._run("touch", [self.keys.stream(lane)], argv)) == 1

    async def release(self, job_id: str, lane: str, entry: str, me: str) -> bool:
        """Hand an unfinished job back (processing → queued) for the next reclaim to take."""
        keys = [self.keys.job(job_id), self.keys.stream(lane)]
        idle = self.settings.visibility_timeout_ms + 1
        argv: list[ScriptArg] = [me, entry, self.keys.group, idle, self.keys.events, job_id]
        return int(await self._run("release", keys, argv)) == 1

    async def poison(
        self, job_id: str, lane: str, entry: str, me: str, deliveries: int, batch: str = ""
    ) -> bool:
        """Fail the job as poisoned and copy it to the dead stream."""
        err = error_json(ErrorCode.POISONED, f"delivered {deliveries} times without finishing")
        keys = [self.keys.job(job_id), self.keys.stream(lane), self.keys.dead, *self._ends(batch)]
        argv: list[ScriptArg] = [
            me, entry, self.keys.group, err, now_ms(), self.settings.result_ttl_s,
            self.keys.events, job_id, lane, deliveries,
        ]  # fmt: skip
        return text(await self._run("poison", keys, argv)) == "ok"

    async def prune_consumers(self, lane: str, me: str, min_idle_s: float) -> int:
        """Remove the lane group's consumers that own nothing and were unseen for min_idle_s."""
        argv: list[ScriptArg] = [self.keys.group, int(min_idle_s * 1000), me]
        return int(await self._run("prune", [self.keys.stream(lane)], argv))

    async def own_pending(self, lane: str, me: str, count: int) -> list[tuple[str, int]]:
        """(entry, times delivered) of the entries pending to this consumer on a lane."""
        rows = await self.redis.xpending_range(
            self.keys.stream(lane), self.keys.group, min="-", max="+", count=count, consumername=me
        )
        return [(text(row["message_id"]), int(row["times_delivered"])) for row in rows]

    async def entry_job(self, lane: str, entry: str) -> tuple[str, str]:
        """(job id, batch id) a stream entry names; "" for what it lacks or when it is gone."""
        rows = await self.redis.xrange(self.keys.stream(lane), min=entry, max=entry, count=1)
        fields = (rows[0][1] if rows else None) or {}
        job = fields.get(ENTRY_JOB_ID.encode(), b"")
        return text(job), text(fields.get(ENTRY_BATCH.encode(), b""))

    async def drop_entry(self, lane: str, entry: str) -> None:
        """ACK and delete an entry that names no job (not ours to keep redelivering)."""
        stream = self.keys.stream(lane)
        await self.redis.xack(stream, self.keys.group, entry)
        await self.redis.xdel(stream, entry)

    async def memory(self) -> tuple[int, int]:
        """(used_memory, maxmemory) in bytes; maxmemory 0 means no limit."""
        info = await self.redis.info("memory")
        return int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))

    async def lane_stats(self, lane: str) -> tuple[int, int]:
        """(lag, pending) of the workers group on a lane; lag falls back to XLEN - pending."""
        group = await self.group_info(lane)
        if group is None:
            return 0, 0
        pending = int(group.get("pending") or 0)
        lag = group.get("lag")
        if lag is None:
            lag = max(0, int(await self.redis.xlen(self.keys.stream(lane))) - pending)
        return int(lag), pending


class Outcome(msgspec.Struct, frozen=True):
    """A terminal outcome for FINISH: status plus the JSON for the result or error field."""

    status: Status
    field: Field
    value: bytes
    pages_done: int = 0

    @classmethod
    def done(cls, result_json: bytes, pages_done: int) -> Outcome:
        """A successful job."""
        return cls(Status.DONE, Field.RESULT, result_json, pages_done)

    @classmethod
    def failed(cls, error: OcrqError, pages_done: int = 0) -> Outcome:
        """A failed job with its catalogue code."""
        return cls(Status.FAILED, Field.ERROR, error_json(error.code, error.message), pages_done)
