"""Webhook deliveries: a stream of them, sent by every worker beside its jobs, never in their way.

A job's (or a batch's) end queues one entry on ``<prefix>webhooks`` in the same script that
ends it. Workers read that stream in their own group and POST a signed summary (Standard
Webhooks headers) to the callback (consumer/webhook_attempts.py: each attempt bounded in
time and in the bytes it reads, retried with backoff and jitter up to a cap of attempts and
``OCRQ_WEBHOOK_RETRY_S``); where a delivery stands is written on the job or batch
(``webhook``). A delivery whose worker died is taken over after the visibility timeout.
Webhooks have an HTTP client of their own: a slow receiver never holds the engine's pool.
"""

from __future__ import annotations

import asyncio

import httpx
import structlog

from ocrq.consumer.retry import Backoff, through_outages
from ocrq.consumer.webhook_attempts import CallbackDelivery, Egress
from ocrq.shared.egress import AddressPolicy, Resolver, pinned_client
from ocrq.shared.settings import Settings, parse_webhook_secrets
from ocrq.shared.store import STORE_ERRORS, JobStore, is_missing_group
from ocrq.shared.webhook_queue import WebhookEntry

log = structlog.get_logger("ocrq.webhooks")
CONCURRENCY = 8


def webhook_client(settings: Settings) -> httpx.AsyncClient:
    """The webhooks' own HTTP client (never the engine's): CONCURRENCY pinned connections."""
    return pinned_client(CONCURRENCY, settings.webhooks.webhook_timeout_s)


class WebhookSender:
    """Reads the webhooks stream and delivers each entry in a task of its own.

    ``resolve`` and ``blocked`` replace the lookup and the address policy (tests); None:
    getaddrinfo on its own threads, and no loopback, private or link-local address.
    """

    def __init__(
        self,
        settings: Settings,
        store: JobStore,
        http: httpx.AsyncClient,
        me: str,
        *,
        resolve: Resolver | None = None,
        blocked: AddressPolicy | None = None,
    ) -> None:
        self.settings, self.store, self.me = settings, store, me
        self.keys, self.queue = store.keys, store.webhook_queue
        keys = parse_webhook_secrets(settings.webhooks.webhook_secrets)
        self.delivery = CallbackDelivery(settings, store, Egress(http, resolve, blocked), keys)
        self.slots = asyncio.Semaphore(CONCURRENCY)
        self.tasks: set[asyncio.Task[None]] = set()
        self.delivering: set[str] = set()  # entries a task of ours is on (a reclaim finds them)
        self.stop = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until stop; unfinished deliveries stay pending for another worker.

        After stop, an attempt under way may end (each ends within OCRQ_WEBHOOK_TIMEOUT_S);
        a delivery waiting to retry leaves at once. Nothing is waited on longer than that.
        """
        self.stop = stop
        backoff = Backoff(0.5, 10.0)
        ready = False
        while not stop.is_set():
            try:
                if not ready:
                    await self.ensure_group()
                    ready = True
                await self._turn()
                backoff.reset()
            except STORE_ERRORS as e:
                if is_missing_group(e):
                    await self.ensure_group()
                    continue
                log.warning("webhooks_redis_unavailable", error=str(e))
                await backoff.sleep(stop)
        await self._wind_down()

    async def _wind_down(self) -> None:
        """Let attempts under way end (their deadline bounds them), then cancel what is left."""
        if self.tasks:
            await asyncio.wait(
                set(self.tasks), timeout=self.settings.webhooks.webhook_timeout_s + 1
            )
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def ensure_group(self) -> None:
        """The workers' group on every partition's webhooks stream (created once, at id 0)."""
        for stream in self.queue.streams():
            await self.store.create_group(stream, self.keys.webhook_group)

    async def _turn(self) -> None:
        # A slot is free (worth reading), or stop came while every slot was taken.
        acquiring = asyncio.ensure_future(self.slots.acquire())
        stopping = asyncio.ensure_future(self.stop.wait())
        await asyncio.wait({acquiring, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not acquiring.cancel():
            self.slots.release()
        if self.stop.is_set():
            return
        # One blocking read cannot name streams of several cluster slots: each partition
        # is read in turn, and an idle turn still lasts about a second in all.
        block_ms = max(1, 1000 // self.keys.partitions)
        visibility_ms = self.settings.worker.visibility_timeout_ms
        for stream in self.queue.streams():  # stale entries of dead senders, then new ones
            taken = await self.queue.take(stream, self.me, visibility_ms, CONCURRENCY, block_ms)
            self._start(taken)

    def _start(self, entries: list[WebhookEntry]) -> None:
        """A delivery task for each entry not already being delivered."""
        for entry in entries:
            if entry.entry_id not in self.delivering:
                self.delivering.add(entry.entry_id)
                task = asyncio.create_task(self._deliver(entry))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _deliver(self, entry: WebhookEntry) -> None:
        async with self.slots:
            try:
                if await self.delivery.run(entry, lambda: self._hold(entry), self.stop):
                    await through_outages(lambda: self.queue.ack(entry), "webhook ack")
            finally:
                self.delivering.discard(entry.entry_id)

    async def _hold(self, entry: WebhookEntry) -> None:
        """Reset the entry's idle time: a delivery still being retried is not for a reclaim."""
        await self.queue.hold(entry, self.me)
