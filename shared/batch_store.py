"""Batches in Redis: the batch hash, its job list, and the scripts that open and seal it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ocrq.shared.keys import tag_of
from ocrq.shared.record import BatchField, Field, JobRecord, decode_record, text
from ocrq.shared.schemas import Base, BatchFile, JobOptions, WebhookState, stored_options
from ocrq.shared.store import JobStore, ScriptArg, now_ms


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
        idem_key = self.keys.batch_idem(tenant, idem or "", tag_of(batch_id))
        ttl = self.jobs.settings.idempotency_ttl_s if idem else 0
        argv: list[ScriptArg] = [batch_id, ttl, *flat]
        keys = [self.keys.batch(batch_id), idem_key]
        kind, value = await self.jobs._run("batch_open", keys, argv)
        if text(kind) == "dup" and not await self.jobs.redis.exists(self.keys.batch(text(value))):
            # The key names a batch deleted since: it no longer holds; start afresh.
            await self.jobs.redis.delete(idem_key)
            kind, value = await self.jobs._run("batch_open", keys, argv)
        return text(kind) == "ok", text(value)

    async def seal(self, batch_id: str, rejected: Sequence[BatchFile]) -> bool:
        """Every document has been read: True when that also finished the batch."""
        hooks = self.keys.webhooks(tag_of(batch_id))
        keys = [self.keys.batch(batch_id), self.keys.batch_jobs(batch_id), hooks]
        argv: list[ScriptArg] = [
            self.keys.events, now_ms(), self.jobs.settings.result_ttl_s,
            msgspec.json.encode(list(rejected)),
        ]  # fmt: skip
        return int(await self.jobs._run("batch_seal", keys, argv)) == 1

    async def delete(self, batch_id: str) -> None:
        """Remove the batch hash and its job list (its jobs are the caller's business)."""
        await self.jobs.redis.delete(self.keys.batch(batch_id), self.keys.batch_jobs(batch_id))

    async def read(self, batch_id: str) -> BatchRecord | None:
        """The batch hash, decoded; None when there is no such batch."""
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
