"""Webhook deliveries: a stream of them, sent by every worker beside its jobs, never in their way.

A job's (or a batch's) end queues one entry on ``<prefix>webhooks`` in the same script that
ends it. Workers read that stream in their own group and POST a signed summary (Standard
Webhooks headers) to the callback, retrying with backoff and jitter for
``OCRQ_WEBHOOK_RETRY_S``; where a delivery stands is written on the job or batch
(``webhook``). A delivery whose worker died is taken over after the visibility timeout.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import msgspec
import structlog
from redis.exceptions import RedisError, ResponseError

from ocrq.consumer.retry import Backoff, through_outages
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.record import Field, text
from ocrq.shared.schemas import WebhookState
from ocrq.shared.settings import Settings, parse_webhook_secrets
from ocrq.shared.store import JobStore
from ocrq.shared.webhooks import check_target, signature

log = structlog.get_logger("ocrq.webhooks")
CONCURRENCY = 8


class Delivery(msgspec.Struct, frozen=True):
    """One entry of the webhooks stream."""

    stream: str  # the partition's webhooks stream it came from
    entry: str
    kind: str  # job | batch
    id: str


class WebhookSender:
    """Reads the webhooks stream and delivers each entry in a task of its own."""

    def __init__(
        self, settings: Settings, store: JobStore, http: httpx.AsyncClient, me: str
    ) -> None:
        self.settings, self.store, self.http, self.me = settings, store, http, me
        self.batches = BatchStore(store)
        self.keys = store.keys
        self.secrets = parse_webhook_secrets(settings.webhook_secrets)
        self.slots = asyncio.Semaphore(CONCURRENCY)
        self.tasks: set[asyncio.Task[None]] = set()
        self.delivering: set[str] = set()  # entries a task of ours is on (a reclaim finds them)

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until stop; unfinished deliveries stay pending for another worker."""
        backoff = Backoff(0.5, 10.0)
        ready = False
        while not stop.is_set():
            try:
                if not ready:
                    await self.ensure_group()
                    ready = True
                await self._turn()
                backoff.reset()
            except (RedisError, OSError) as e:
                if isinstance(e, ResponseError) and "NOGROUP" in str(e):
                    await self.ensure_group()
                    continue
                log.warning("webhooks_redis_unavailable", error=str(e))
                await backoff.sleep(stop)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def ensure_group(self) -> None:
        """The workers' group on every partition's webhooks stream (created once, at id 0)."""
        for tag in self.keys.tags:
            await self.store.create_group(self.keys.webhooks(tag), self.keys.webhook_group)

    async def _turn(self) -> None:
        await self.slots.acquire()
        self.slots.release()  # a slot is free: worth reading
        # One blocking read cannot name streams of several cluster slots: each partition
        # is read in turn, and an idle turn still lasts about a second in all.
        block_ms = max(1, 1000 // self.keys.partitions)
        for stream in (self.keys.webhooks(tag) for tag in self.keys.tags):
            self._start(stream, await self._read(stream, block_ms))

    async def _read(self, stream: str, block_ms: int) -> list[Any]:
        """Stale entries of dead senders, then new ones, from one webhooks stream."""
        redis, group = self.store.redis, self.keys.webhook_group
        stale = await redis.xautoclaim(
            stream, group, self.me, self.settings.visibility_timeout_ms, count=CONCURRENCY
        )
        entries = list(stale[1])
        reply: Any = await redis.xreadgroup(
            group, self.me, {stream: ">"}, count=CONCURRENCY, block=block_ms
        )
        for _, new in reply or []:
            entries += new
        return entries

    def _start(self, stream: str, entries: list[Any]) -> None:
        """A delivery task for each entry not already being delivered."""
        for entry_id, fields in entries:
            if fields and text(entry_id) not in self.delivering:
                d = Delivery(stream, text(entry_id), text(fields[b"kind"]), text(fields[b"id"]))
                self.delivering.add(d.entry)
                task = asyncio.create_task(self._deliver(d))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _deliver(self, d: Delivery) -> None:
        async with self.slots:
            try:
                await self._attempts(d)
                await through_outages(lambda: self._ack(d), "webhook ack")
            finally:
                self.delivering.discard(d.entry)

    async def _hold(self, d: Delivery) -> None:
        """Reset the entry's idle time: a delivery still being retried is not for a reclaim."""
        await self.store.redis.xclaim(
            d.stream, self.keys.webhook_group, self.me, 0, [d.entry], justid=True
        )

    async def _ack(self, d: Delivery) -> None:
        await self.store.redis.xack(d.stream, self.keys.webhook_group, d.entry)
        await self.store.redis.xdel(d.stream, d.entry)

    async def _attempts(self, d: Delivery) -> None:
        """Send until the receiver says 2xx or the retry time is spent."""
        found = await through_outages(lambda: self.summary(d), "webhook summary")
        if found is None:
            log.info("webhook_skipped", kind=d.kind, id=d.id, reason="gone or no callback")
            return
        url, tenant, body = found
        queued_ms = int(d.entry.split("-")[0])
        deadline = queued_ms / 1000 + self.settings.webhook_retry_s
        state = WebhookState(url=url, status="pending")
        backoff = Backoff(1.0, 300.0)
        while True:
            state.attempts += 1
            delivered = await self._send(d, url, tenant, body, state)
            if delivered or time.time() + 1 > deadline:
                state.status = "delivered" if delivered else "failed"
                await through_outages(lambda: self._record(d, state), "webhook state")
                log.info("webhook", kind=d.kind, id=d.id, status=state.status,
                         attempts=state.attempts)  # fmt: skip
                return
            await through_outages(lambda: self._record(d, state), "webhook state")
            await asyncio.sleep(min(backoff.next_delay(), max(0.0, deadline - time.time())))
            await through_outages(lambda: self._hold(d), "webhook hold")

    async def _send(
        self, d: Delivery, url: str, tenant: str, body: bytes, state: WebhookState
    ) -> bool:
        msg_id = f"{d.kind}_{d.id}"
        stamp = int(time.time())
        headers = {
            "content-type": "application/json", "webhook-id": msg_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature(self.secrets.get(tenant, ""), msg_id, stamp, body),
        }  # fmt: skip
        try:
            await check_target(url, self.settings.webhook_allow_private)
            r = await self.http.post(
                url, content=body, headers=headers, timeout=self.settings.webhook_timeout_s
            )
        except Exception as e:  # refused target, network, timeout: all one more attempt
            state.last_status, state.last_error = None, str(e)[:200] or type(e).__name__
            return False
        state.last_status, state.last_error = r.status_code, None
        return r.is_success

    async def _record(self, d: Delivery, state: WebhookState) -> None:
        key = self.keys.job(d.id) if d.kind == "job" else self.keys.batch(d.id)
        await self.store._run("webhook_state", [key], [msgspec.json.encode(state)])

    async def summary(self, d: Delivery) -> tuple[str, str, bytes] | None:
        """(url, tenant, body) of a delivery; None when its job or batch is gone."""
        if d.kind == "batch":
            batch = await self.batches.read(d.id)
            if batch is None or not batch.callback:
                return None
            body = {
                "type": "batch.finished", "id": d.id, "total": batch.total, "done": batch.done,
                "failed": batch.failed, "cancelled": batch.cancelled,
                "finished_at": batch.finished_at, "results": f"/v1/batches/{d.id}/results",
            }  # fmt: skip
            return batch.callback, batch.tenant, msgspec.json.encode(body)
        names = (Field.STATUS, Field.TENANT, Field.CALLBACK, Field.FILENAME, Field.ERROR,
                 Field.PAGES_DONE, Field.FINISHED_AT, Field.BATCH)  # fmt: skip
        job = await self.store.read(d.id, names)
        if job.status is None or not job.callback:
            return None
        body = {
            "type": "job.finished", "id": d.id, "status": job.status,
            "filename": job.filename or None, "pages": job.pages_done,
            "error": job.error, "batch": job.batch or None, "finished_at": job.finished_at,
            "result": f"/v1/jobs/{d.id}/result",
        }  # fmt: skip
        return job.callback, job.tenant, msgspec.json.encode(body)
