"""Batches in Redis: the batch hash, its job list, the scripts that open and seal it, and the
sweep that seals a batch whose producer died before it could."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from ocrq.shared.keys import is_known_id, tag_of
from ocrq.shared.record import BatchField, Field, JobRecord, decode_record, text
from ocrq.shared.schemas import Base, BatchFile, JobOptions, WebhookState, stored_options
from ocrq.shared.store import JobStore, ScriptArg, now_ms

# A request's body must arrive within this many OCRQ_BODY_TIMEOUT_S (POST /v1/batches).
BODY_DEADLINE_FACTOR = 10
# Past the body's deadline a request may still be enqueueing its last document: a batch
# is only taken for abandoned (its producer died) this much later again.
OPEN_MARGIN_FACTOR = 1.5
SWEEP_PAGE = 100  # abandoned batches sealed per partition and round trip


class BatchRecord(Base):
    """A batch hash decoded."""

    id: str
    tenant: str = ""
    created_at: int | None = None
    finished_at: int | None = None
    sealed: bool = False
    total: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    options: JobOptions = msgspec.field(default_factory=JobOptions)
    rejected: list[BatchFile] = msgspec.field(default_factory=list)
    callback: str = ""
    webhook: WebhookState | None = None

    @property
    def ended(self) -> int:
        """Jobs that have ended, whatever the outcome."""
        return self.done + self.failed + self.cancelled


_INTS = frozenset({"total", "done", "failed", "cancelled", "created_at", "finished_at"})


def decode_batch(raw: dict[Any, Any]) -> BatchRecord | None:
    """A batch from HGETALL; None when there is none."""
    values: dict[str, Any] = {text(k): v for k, v in raw.items()}
    if "id" not in values:
        return None
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name in _INTS:
            out[name] = int(value)
        elif name == BatchField.SEALED:
            out[name] = value == b"1"
        elif name == BatchField.OPTIONS:
            out[name] = stored_options(value)
        elif name == BatchField.REJECTED:
            out[name] = msgspec.json.decode(value, type=list[BatchFile])
        elif name == BatchField.WEBHOOK:
            out[name] = msgspec.json.decode(value, type=WebhookState)
        else:
            out[name] = text(value)
    return msgspec.convert(out, BatchRecord)


class BatchStore:
    """Every Redis read and write of batches; the scripts are the JobStore's."""

    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs
        self.keys = jobs.keys

    @property
    def open_deadline_s(self) -> float:
        """How long after it opens a batch may still be read from its request."""
        body_s = self.jobs.settings.api.body_timeout_s * BODY_DEADLINE_FACTOR
        return body_s * OPEN_MARGIN_FACTOR

    async def open(
        self, batch_id: str, tenant: str, options: JobOptions, idem: str | None
    ) -> tuple[bool, str]:
        """Create the batch before its first document; (created, id) as enqueue answers."""
        fields: dict[str, ScriptArg] = {
            BatchField.TENANT: tenant,
            BatchField.CREATED_AT: now_ms(),
            BatchField.OPTIONS: msgspec.json.encode(options),
        }
        if options.callback_url:
            fields[BatchField.CALLBACK] = options.callback_url
        flat = [item for pair in fields.items() for item in pair]
        # Without a key: an unused key of the slot, and TTL 0 (a script's keys share a slot).
        tag = tag_of(batch_id)
        idem_key = self.keys.batch_idem(tenant, idem or "", tag)
        idem_ttl = self.jobs.settings.api.idempotency_ttl_s if idem else 0
        # Never gone while its request may still add jobs (they would count in a fragment).
        ttl = max(self.jobs.settings.api.result_ttl_s, math.ceil(self.open_deadline_s) * 2)
        deadline = now_ms() + int(self.open_deadline_s * 1000)
        argv: list[ScriptArg] = [batch_id, idem_ttl, ttl, deadline, *flat]
        keys = [self.keys.batch(batch_id), idem_key, self.keys.open_batches(tag)]
        kind, value = await self.jobs._run("batch_open", keys, argv)
        if text(kind) == "dup" and not await self.jobs.redis.exists(self.keys.batch(text(value))):
            # The key names a batch deleted since: it no longer holds; start afresh.
            await self.jobs.redis.delete(idem_key)
            kind, value = await self.jobs._run("batch_open", keys, argv)
        return text(kind) == "ok", text(value)

    async def seal(self, batch_id: str, rejected: Sequence[BatchFile]) -> bool:
        """Every document has been read: True when that also finished the batch."""
        return await self._seal(batch_id, "read", msgspec.json.encode(list(rejected))) == 1

    async def _seal(self, batch_id: str, mode: str, rejected: bytes) -> int:
        tag = tag_of(batch_id)
        keys = [
            self.keys.batch(batch_id),
            self.keys.batch_jobs(batch_id),
            self.keys.webhooks(tag),
            self.keys.open_batches(tag),
        ]
        argv: list[ScriptArg] = [
            self.keys.events,
            now_ms(),
            self.jobs.settings.api.result_ttl_s,
            rejected,
            batch_id,
            mode,
        ]
        return int(await self.jobs._run("batch_seal", keys, argv))

    async def sweep(self, at_ms: int | None = None) -> list[str]:
        """Seal every batch still open past its deadline (its producer died); their ids."""
        now = now_ms() if at_ms is None else at_ms
        swept: list[str] = []
        for tag in self.keys.tags:
            while ids := await self.jobs.redis.zrangebyscore(
                self.keys.open_batches(tag), "-inf", now, start=0, num=SWEEP_PAGE
            ):
                for batch_id in map(text, ids):  # each leaves the set, sealed or not
                    if await self._seal(batch_id, "sweep", b"") >= 0:
                        swept.append(batch_id)
        return swept

    async def delete(self, batch_id: str) -> None:
        """Remove the batch hash and its job list (its jobs are the caller's business); a
        stream that follows the batch ends on the event this publishes."""
        await self.jobs.redis.delete(self.keys.batch(batch_id), self.keys.batch_jobs(batch_id))
        await self.jobs.redis.zrem(self.keys.open_batches(tag_of(batch_id)), batch_id)
        event = msgspec.json.encode({"id": batch_id, "status": "deleted", "pages_done": 0})
        await self.jobs.redis.publish(self.keys.events, event)

    async def read(self, batch_id: str) -> BatchRecord | None:
        """The batch hash, decoded; None when there is no such batch (or no such id)."""
        if not is_known_id(batch_id):
            return None
        return decode_batch(await self.jobs.redis.hgetall(self.keys.batch(batch_id)))

    async def job_ids(self, batch_id: str, start: int = 0, stop: int = -1) -> list[str]:
        """Job ids in submission order (LRANGE start..stop, inclusive)."""
        ids = await self.jobs.redis.lrange(self.keys.batch_jobs(batch_id), start, stop)
        return [text(i) for i in ids]

    async def job_rows(self, ids: Sequence[str], names: Sequence[Field]) -> list[JobRecord]:
        """The named fields of these jobs, in one round trip (per node, on a cluster)."""
        async with self.jobs.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hmget(self.keys.job(job_id), list(names))
            rows = await pipe.execute()
        return [decode_record(dict(zip(names, row, strict=True))) for row in rows]
