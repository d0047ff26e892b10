"""The job store: redis.asyncio client plus the registered scripts, one method per transition."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from shared import keys as scripts
from shared.errors import ErrorCode, OcrqError
from shared.keys import Keys
from shared.settings import Settings

ScriptArg = bytes | str | int | float

# Fields a poll reads: everything but the payload, which can be 10 MB.
VIEW_FIELDS: tuple[str, ...] = (
    "status", "tenant", "filename", "media_type", "size", "lane", "options", "created_at",
    "started_at", "finished_at", "attempts", "pages_total", "pages_done", "error", "result",
)  # fmt: skip


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
        self._enqueue = redis.register_script(scripts.ENQUEUE)
        self._claim = redis.register_script(scripts.CLAIM)
        self._progress = redis.register_script(scripts.PROGRESS)
        self._finish = redis.register_script(scripts.FINISH)
        self._touch = redis.register_script(scripts.TOUCH)
        self._poison = redis.register_script(scripts.POISON)
        self._release = redis.register_script(scripts.RELEASE)
        self._cancel = redis.register_script(scripts.CANCEL)

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
        return next((g for g in groups if _text(g.get("name")) == self.keys.group), None)

    async def groups_exist(self) -> bool:
        """True when every lane's stream has the workers group."""
        return all([await self.group_info(lane) is not None for lane in self.keys.lanes])

    async def enqueue(
        self, job_id: str, lane: str, fields: Mapping[str, Any], idem: str | None
    ) -> tuple[bool, str]:
        """Write the job and its stream entry in one step; (created, job_id)."""
        flat: list[ScriptArg] = []
        for name, value in fields.items():
            flat += [name, value]
        s = self.settings
        argv: list[ScriptArg] = [
            job_id, s.max_backlog, s.queued_ttl_s, s.idempotency_ttl_s, self.keys.group
        ]  # fmt: skip
        keys = [self.keys.job(job_id), self.keys.stream(lane), idem or ""]
        kind, value = await self._enqueue(keys=keys, args=argv + flat)
        kind, value = _text(kind), _text(value)
        if kind == "full":
            raise OcrqError(
                ErrorCode.QUEUE_FULL, f"the {lane} lane holds {value} jobs", retry_after=5
            )
        return kind == "ok", value

    async def read_fields(self, job_id: str, names: Sequence[str] = VIEW_FIELDS) -> dict[str, Any]:
        """HMGET the named fields (never the payload unless asked by name)."""
        values = await self.redis.hmget(self.keys.job(job_id), list(names))
        return {n: v for n, v in zip(names, values, strict=True) if v is not None}

    async def cancel(self, job_id: str, tenant: str) -> str:
        """Cancel an active job or delete a terminal one: 'cancelled' | 'deleted' | 'missing'."""
        err = msgspec.json.encode({"code": "cancelled", "message": "cancelled by the client"})
        argv: list[ScriptArg] = [
            tenant, err, now_ms(), self.settings.result_ttl_s, self.keys.events, job_id
        ]  # fmt: skip
        return _text(await self._cancel(keys=[self.keys.job(job_id)], args=argv))

    async def claim(self, job_id: str, lane: str, entry: str, me: str) -> str:
        """queued → processing for this worker: 'ok', 'skip:<status>' or 'missing'."""
        keys = [self.keys.job(job_id), self.keys.stream(lane)]
        argv: list[ScriptArg] = [me, entry, self.keys.group, now_ms(), self.settings.queued_ttl_s]
        return _text(await self._claim(keys=keys, args=argv))

    async def progress(self, job_id: str, me: str, done: int, total: int) -> bool:
        """Advance pages_done; False when this worker no longer owns the job."""
        argv: list[ScriptArg] = [me, done, total, self.keys.events, job_id]
        return _text(await self._progress(keys=[self.keys.job(job_id)], args=argv)) == "ok"

    async def finish(self, job_id: str, lane: str, entry: str, me: str, outcome: Outcome) -> bool:
        """Write the outcome, drop the payload, ACK+XDEL, publish: False when not ours."""
        keys = [self.keys.job(job_id), self.keys.stream(lane)]
        argv: list[ScriptArg] = [
            me, entry, self.keys.group, outcome.status, outcome.field, outcome.value, now_ms(),
            self.settings.result_ttl_s, self.keys.events, job_id, outcome.pages_done,
        ]  # fmt: skip
        return _text(await self._finish(keys=keys, args=argv)) == "ok"

    async def touch(self, lane: str, entry: str, me: str) -> bool:
        """Reset the entry's idle time while this worker still owns it."""
        argv: list[ScriptArg] = [me, entry, self.keys.group]
        return int(await self._touch(keys=[self.keys.stream(lane)], args=argv)) == 1

    async def release(self, job_id: str, lane: str, entry: str, me: str) -> bool:
        """Hand an unfinished job back (processing → queued) for the next reclaim to take."""
        keys = [self.keys.job(job_id), self.keys.stream(lane)]
        idle = self.settings.visibility_timeout_ms + 1
        argv: list[ScriptArg] = [me, entry, self.keys.group, idle, self.keys.events, job_id]
        return int(await self._release(keys=keys, args=argv)) == 1

    async def poison(self, job_id: str, lane: str, entry: str, me: str, deliveries: int) -> bool:
        """Fail the job as poisoned and copy it to the dead stream."""
        err = msgspec.json.encode(
            {"code": "poisoned", "message": f"delivered {deliveries} times without finishing"}
        )
        keys = [self.keys.job(job_id), self.keys.stream(lane), self.keys.dead]
        argv: list[ScriptArg] = [
            me, entry, self.keys.group, err, now_ms(), self.settings.result_ttl_s,
            self.keys.events, job_id, lane, deliveries,
        ]  # fmt: skip
        return _text(await self._poison(keys=keys, args=argv)) == "ok"

    async def drop_entry(self, lane: str, entry: str) -> None:
        """ACK and delete an entry that names no job (not ours to keep redelivering)."""
        stream = self.keys.stream(lane)
        await self.redis.xack(stream, self.keys.group, entry)
        await self.redis.xdel(stream, entry)

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

    status: str
    field: str
    value: bytes
    pages_done: int = 0

    @classmethod
    def done(cls, result_json: bytes, pages_done: int) -> Outcome:
        """A successful job."""
        return cls("done", "result", result_json, pages_done)

    @classmethod
    def failed(cls, error: OcrqError, pages_done: int = 0) -> Outcome:
        """A failed job with its catalogue code."""
        body = msgspec.json.encode({"code": error.code.value, "message": error.message})
        return cls("failed", "error", body, pages_done)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
