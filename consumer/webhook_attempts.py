"""One webhook delivery: its attempts, each bounded, until 2xx, the cap or the retry window.

Every attempt resolves the callback's host, checks each address and POSTs to the address it
checked (shared/egress.py), within one deadline (``OCRQ_WEBHOOK_TIMEOUT_S``) from the lookup
to the reply's last byte, reading at most 64 KiB of that reply. A delivery gives up after
``OCRQ_WEBHOOK_MAX_ATTEMPTS`` attempts or ``OCRQ_WEBHOOK_RETRY_S`` after its job ended,
whichever comes first; the job's (or batch's) ``webhook`` says which, and why.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx
import msgspec
import structlog

from ocrq.consumer.retry import Backoff, through_outages
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.egress import AddressPolicy, Resolver, resolve_checked, send
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import Field
from ocrq.shared.schemas import WebhookState
from ocrq.shared.settings import Settings
from ocrq.shared.store import JobStore
from ocrq.shared.tracing import span, trace_headers
from ocrq.shared.webhook_queue import WebhookEntry
from ocrq.shared.webhooks import signature

log = structlog.get_logger("ocrq.webhooks")
MAX_REPLY_BYTES = 64 * 1024  # of a receiver's reply; the rest is dropped unread


class Callback(msgspec.Struct, frozen=True):
    """What a delivery sends, and where it stood when an earlier worker left it."""

    url: str
    tenant: str
    body: bytes
    previous: WebhookState | None  # a reclaimed delivery goes on counting its attempts
    trace: str = ""  # the job's traceparent: the delivery joins the job's trace


class Egress(msgspec.Struct, frozen=True):
    """How a delivery reaches its receiver: the client, the resolver, the address policy."""

    http: httpx.AsyncClient
    resolve: Resolver | None = None  # None: getaddrinfo on egress's own thread pool
    blocked: AddressPolicy | None = None  # None: egress.blocked_address


class CallbackDelivery:
    """The attempts of one delivery, and the state it leaves on its job or batch."""

    def __init__(
        self, settings: Settings, store: JobStore, egress: Egress, keys: dict[str, bytes]
    ) -> None:
        self.settings, self.store, self.egress, self.keys = settings, store, egress, keys
        self.batches = BatchStore(store)

    async def run(
        self, hook: WebhookEntry, hold: Callable[[], Awaitable[None]], stop: asyncio.Event
    ) -> bool:
        """Attempt until delivered or given up (True: the entry is done with); False when
        stopped between attempts, leaving the entry pending for another worker.

        ``hold`` runs before each retry: it resets the entry's idle time, so that a delivery
        still being retried is not taken over by a reclaim.
        """
        found = await through_outages(lambda: self.callback(hook), "webhook summary")
        if found is None:
            log.info("webhook_skipped", kind=hook.kind, id=hook.id, reason="gone or no callback")
            return True
        if ended_before(found):  # its worker wrote the outcome, then died before the ack
            return True
        named = {"ocrq.webhook.kind": hook.kind, "ocrq.webhook.id": hook.id}
        with span("ocrq.webhook.deliver", named, parent=found.trace or None, kind="client"):
            return await self._attempts(hook, found, hold, stop)

    async def _attempts(
        self,
        hook: WebhookEntry,
        found: Callback,
        hold: Callable[[], Awaitable[None]],
        stop: asyncio.Event,
    ) -> bool:
        """The attempts of a delivery still to make, from where an earlier worker left it."""
        state = resume(found)
        key = self.keys.get(found.tenant)
        if not key:  # the tenant's secret was removed after the job was submitted
            return await self.refuse_unsigned(hook, found.tenant, state)
        window_end = (
            int(hook.entry_id.split("-")[0]) / 1000 + self.settings.webhooks.webhook_retry_s
        )
        backoff = Backoff(1.0, 300.0)
        backoff.attempt = state.attempts
        # A reclaimed delivery may have spent its attempts already; a new one tries once.
        reason = give_up_reason(state, self.settings, window_end) if state.attempts else None
        while reason is None:
            state.attempts += 1
            if await self.attempt(hook, found, key, state):
                state.status = "delivered"
                await self.finish(hook, state)
                return True
            reason = give_up_reason(state, self.settings, window_end)
            if reason is not None:
                break
            await through_outages(lambda: self.record(hook, state), "webhook state")
            delay = min(backoff.next_delay(), max(0.0, window_end - time.time()))
            if await stopped_within(stop, delay):
                return False
            await through_outages(hold, "webhook hold")
        state.status, state.last_error = "failed", reason
        await self.finish(hook, state)
        return True

    async def refuse_unsigned(self, hook: WebhookEntry, tenant: str, state: WebhookState) -> bool:
        """Fail a delivery whose tenant has no secret: nothing is sent unsigned (or empty-keyed)."""
        state.status = "failed"
        state.last_error = (
            f"no webhook secret for tenant {tenant!r} (OCRQ_WEBHOOK_SECRETS): "
            "a callback is never sent unsigned"
        )
        await self.finish(hook, state)
        return True

    async def attempt(
        self, hook: WebhookEntry, cb: Callback, key: bytes, state: WebhookState
    ) -> bool:
        """One POST, from the lookup to the reply's last byte within the attempt's deadline."""
        msg_id = f"{hook.kind}_{hook.id}"
        stamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature(key, msg_id, stamp, cb.body),
            **trace_headers(),  # a receiver that traces joins the job's trace
        }
        timeout_s = self.settings.webhooks.webhook_timeout_s
        started = time.monotonic()
        try:
            target = await resolve_checked(
                cb.url,
                allow_private=self.settings.webhooks.webhook_allow_private,
                timeout_s=min(self.settings.webhooks.webhook_resolve_timeout_s, timeout_s),
                resolve=self.egress.resolve,
                blocked=self.egress.blocked,
            )
            left = max(0.001, timeout_s - (time.monotonic() - started))
            reply = await send(
                self.egress.http,
                "POST",
                target,
                headers=headers,
                content=cb.body,
                deadline_s=left,
                max_bytes=MAX_REPLY_BYTES,
            )
        except OcrqError as e:  # refused target, no answer in time, network: one more attempt
            if e.code is ErrorCode.TIMEOUT:
                why = f"no complete answer within {timeout_s:g} s (OCRQ_WEBHOOK_TIMEOUT_S)"
            else:
                why = f"{e.code}: {e}"
            state.last_status, state.last_error = None, why[:200]
            return False
        state.last_status = reply.status
        state.last_error = None
        if 300 <= reply.status < 400:
            state.last_error = "a redirect: callbacks never follow one"
        return 200 <= reply.status < 300

    async def finish(self, hook: WebhookEntry, state: WebhookState) -> None:
        """Write the delivery's final state."""
        await through_outages(lambda: self.record(hook, state), "webhook state")
        log.info(
            "webhook",
            kind=hook.kind,
            id=hook.id,
            status=state.status,
            attempts=state.attempts,
            error=state.last_error,
        )

    async def record(self, hook: WebhookEntry, state: WebhookState) -> None:
        """Write where the delivery stands on its job or batch (if that still exists)."""
        await self.store.write_webhook_state(hook.kind, hook.id, msgspec.json.encode(state))

    async def callback(self, hook: WebhookEntry) -> Callback | None:
        """What to send for a delivery; None when its job or batch is gone or has no callback."""
        if hook.kind == "batch":
            batch = await self.batches.read(hook.id)
            if batch is None or not batch.callback:
                return None
            body = {
                "type": "batch.finished",
                "id": hook.id,
                "total": batch.total,
                "done": batch.done,
                "failed": batch.failed,
                "cancelled": batch.cancelled,
                "finished_at": batch.finished_at,
                "results": f"/v1/batches/{hook.id}/results",
            }
            return Callback(batch.callback, batch.tenant, msgspec.json.encode(body), batch.webhook)
        names = (
            Field.STATUS,
            Field.TENANT,
            Field.CALLBACK,
            Field.FILENAME,
            Field.ERROR,
            Field.PAGES_DONE,
            Field.FINISHED_AT,
            Field.BATCH,
            Field.WEBHOOK,
            Field.TRACE,
        )
        job = await self.store.read(hook.id, names)
        if job.status is None or not job.callback:
            return None
        body = {
            "type": "job.finished",
            "id": hook.id,
            "status": job.status,
            "filename": job.filename or None,
            "pages": job.pages_done,
            "error": job.error,
            "batch": job.batch or None,
            "finished_at": job.finished_at,
            "result": f"/v1/jobs/{hook.id}/result",
        }
        previous = msgspec.json.decode(job.webhook, type=WebhookState) if job.webhook else None
        return Callback(job.callback, job.tenant, msgspec.json.encode(body), previous, job.trace)


def ended_before(cb: Callback) -> bool:
    """True when an earlier worker already delivered this callback or gave it up."""
    before = cb.previous
    return before is not None and before.url == cb.url and before.status != "pending"


def resume(cb: Callback) -> WebhookState:
    """The state a delivery starts from: a reclaimed one goes on from its attempts."""
    before = cb.previous
    if before is not None and before.url == cb.url and before.status == "pending":
        return msgspec.structs.replace(before)  # a copy: this delivery's own to count on
    return WebhookState(url=cb.url, status="pending")


def give_up_reason(state: WebhookState, settings: Settings, window_end: float) -> str | None:
    """Why a delivery stops after a failed attempt; None while it goes on."""
    attempts = f"{state.attempts} attempt{'s' if state.attempts != 1 else ''}"
    if state.attempts >= settings.webhooks.webhook_max_attempts:
        spent = f"after {attempts} (OCRQ_WEBHOOK_MAX_ATTEMPTS)"
    elif time.time() + 1 > window_end:
        spent = (
            f"after {attempts} in {settings.webhooks.webhook_retry_s:g} s (OCRQ_WEBHOOK_RETRY_S)"
        )
    else:
        return None
    if state.last_error:
        last = state.last_error
    else:
        last = f"the receiver answered HTTP {state.last_status}"
    return f"gave up {spent}: {last}"[:300]


async def stopped_within(stop: asyncio.Event, delay_s: float) -> bool:
    """Wait delay_s, or less if stop is set first; True when stopped."""
    try:
        await asyncio.wait_for(stop.wait(), delay_s)
    except TimeoutError:
        return False
    return True
