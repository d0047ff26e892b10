"""Webhook deliveries in-process: real Redis, real loopback receivers, the real sender.

Each job here goes through the real transitions (enqueue, claim, finish), whose end queues
its webhook entry; a WebhookSender then delivers it to a receiver that misbehaves.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable

import httpx
import msgspec
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from support.loopback_receivers import answer, drip, huge, receiving, silent, twin_receivers

from ocrq.consumer.webhooks import CONCURRENCY, WebhookSender
from ocrq.shared.record import Field, new_job_fields
from ocrq.shared.schemas import JobOptions, WebhookState
from ocrq.shared.settings import Settings, replace_settings
from ocrq.shared.store import JobStore, Outcome, now_ms

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


def hooked(settings: Settings, **changes: object) -> Settings:
    """Settings with tenant t's secret, private targets allowed (loopback receivers), and
    whatever the test changes."""
    base: dict[str, object] = {
        "webhook_secrets": f"t:{SECRET}", "webhook_allow_private": True,
        "webhook_timeout_s": 1.0,
    }  # fmt: skip
    base.update(changes)
    return replace_settings(settings, **base)


async def finished_job(store: JobStore, callback: str, tenant: str = "t") -> str:
    """A job that went queued → processing → done, with a callback: its webhook is queued."""
    job_id = secrets.token_urlsafe(16)
    fields = new_job_fields(
        job_id=job_id, tenant=tenant, filename="a.png", media_type="image/png", data=b"x",
        options=JobOptions(), created_ms=now_ms(), callback=callback,
    )  # fmt: skip
    assert (await store.enqueue(job_id, "interactive", fields, None))[0]
    stream = store._stream(job_id, "interactive")
    reply = await store.redis.xreadgroup(store.keys.group, "w", {stream: ">"}, count=1)
    entry = reply[0][1][0][0].decode()
    assert await store.claim(job_id, "interactive", entry, "w") == "ok"
    done = Outcome.done(b'{"pages": []}', 1)
    assert await store.finish(job_id, "interactive", entry, "w", done)
    return job_id


async def webhook_state(store: JobStore, job_id: str) -> WebhookState | None:
    raw = (await store.read(job_id, [Field.WEBHOOK])).webhook
    return msgspec.json.decode(raw, type=WebhookState) if raw else None


async def ended(store: JobStore, job_id: str, within_s: float) -> WebhookState:
    """The job's webhook state once delivered or failed; fails the test past within_s."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        state = await webhook_state(store, job_id)
        if state is not None and state.status != "pending":
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"not ended within {within_s} s: {await webhook_state(store, job_id)}")


class Running:
    """A WebhookSender running in a task of this test, and the stop that ends it."""

    def __init__(self, sender: WebhookSender) -> None:
        self.sender, self.stop = sender, asyncio.Event()
        self.task = asyncio.create_task(sender.run(self.stop))

    async def close(self, within_s: float = 30) -> float:
        """Stop it; the seconds it took to return."""
        started = time.monotonic()
        self.stop.set()
        await asyncio.wait_for(self.task, within_s)
        return time.monotonic() - started


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
async def start(store: JobStore, http: httpx.AsyncClient) -> AsyncIterator[Callable[..., Running]]:
    running: list[Running] = []

    def starter(settings: Settings, **egress: object) -> Running:
        sender = WebhookSender(settings, store, http, "w-test", **egress)  # type: ignore[arg-type]
        running.append(Running(sender))
        return running[-1]

    yield starter
    for r in running:
        if not r.task.done():
            await r.close()


async def test_a_dripping_receiver_ends_the_attempt_within_the_deadline(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(drip(every_s=0.1)) as receiver:
        job_id = await finished_job(store, receiver.url())
        started = time.monotonic()
        start(hooked(settings, webhook_timeout_s=1.0, webhook_max_attempts=1))
        state = await ended(store, job_id, within_s=15)
        took = time.monotonic() - started
    assert state.status == "failed" and state.attempts == 1
    assert took < 1.0 + 1.0, took  # the deadline, plus a second for everything else
    assert state.last_error and "within 1 s (OCRQ_WEBHOOK_TIMEOUT_S)" in state.last_error


def rss_bytes() -> int:
    """This process's resident set, from /proc (the sender runs in this process)."""
    with open("/proc/self/status") as f:
        line = next(ln for ln in f if ln.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


class PeakRss:
    """The highest RSS this process reaches while the block runs (sampled every 5 ms)."""

    def __enter__(self) -> PeakRss:
        self.base = self.peak = rss_bytes()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


async def test_a_400_mib_reply_raises_the_senders_rss_by_less_than_20_mib(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(huge(400 * 1024 * 1024)) as receiver:
        job_id = await finished_job(store, receiver.url())
        with PeakRss() as rss:
            start(hooked(settings, webhook_timeout_s=60.0))
            state = await ended(store, job_id, within_s=90)
    assert state.status == "delivered" and state.last_status == 200
    assert rss.peak - rss.base < 20 * 1024 * 1024, (rss.base, rss.peak)


async def test_a_receiver_that_never_answers_is_given_up_after_the_attempt_cap(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(silent) as receiver:
        job_id = await finished_job(store, receiver.url())
        start(hooked(settings, webhook_timeout_s=0.5, webhook_max_attempts=3))
        state = await ended(store, job_id, within_s=30)
    assert state.status == "failed" and state.attempts == 3
    assert len(receiver.requests) == 3
    assert state.last_error and state.last_error.startswith("gave up after 3 attempts")
    assert "no complete answer within 0.5 s" in state.last_error


async def test_a_receiver_answering_500_is_given_up_after_the_cap_with_its_status(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(answer(500)) as receiver:
        job_id = await finished_job(store, receiver.url())
        start(hooked(settings, webhook_max_attempts=2))
        state = await ended(store, job_id, within_s=30)
    assert state.status == "failed" and state.attempts == 2 and state.last_status == 500
    assert state.last_error == (
        "gave up after 2 attempts (OCRQ_WEBHOOK_MAX_ATTEMPTS): the receiver answered HTTP 500"
    )


async def test_a_taken_over_delivery_counts_the_attempts_made_before_it(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(answer(503)) as receiver:
        job_id = await finished_job(store, receiver.url())
        # A worker that died after two attempts left this on the job.
        before = WebhookState(url=receiver.url(), status="pending", attempts=2, last_status=503)
        await store._run("webhook_state", [store.keys.job(job_id)], [msgspec.json.encode(before)])
        start(hooked(settings, webhook_max_attempts=3))
        state = await ended(store, job_id, within_s=15)
    assert state.status == "failed" and state.attempts == 3 and len(receiver.requests) == 1
    assert state.last_error and state.last_error.startswith("gave up after 3 attempts")


async def test_a_rebinding_resolver_never_gets_the_post_to_the_blocked_address(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    # 127.0.0.2 stands for a public address, 127.0.0.1 for a private one: the policy blocks
    # only the latter. The resolver answers the "public" address once, then the other.
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.2"] if len(lookups) == 1 else ["127.0.0.1"]

    twins = twin_receivers(("127.0.0.2", answer(204)), ("127.0.0.1", answer(204)))
    with twins as (public, private):
        job_id = await finished_job(store, public.url(host="hooks.example"))
        on = hooked(settings, webhook_allow_private=False)
        start(on, resolve=rebinding, blocked=lambda address: address == "127.0.0.1")
        state = await ended(store, job_id, within_s=15)
    assert state.status == "delivered" and state.attempts == 1
    assert [r.address for r in public.requests] == ["127.0.0.2"]
    assert public.requests[0].head["host"] == f"hooks.example:{public.port}"
    assert private.requests == []


async def test_an_address_the_policy_blocks_is_never_posted_to(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    async def private_only(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    with receiving(answer(204)) as receiver:
        job_id = await finished_job(store, receiver.url(host="hooks.example"))
        on = hooked(settings, webhook_allow_private=False, webhook_max_attempts=1)
        start(on, resolve=private_only)
        state = await ended(store, job_id, within_s=15)
    assert state.status == "failed" and receiver.requests == []
    assert state.last_error and "private, loopback or link-local" in state.last_error


async def test_a_delivery_verifies_with_the_standardwebhooks_library(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(answer(204)) as receiver:
        job_id = await finished_job(store, receiver.url())
        start(hooked(settings))
        state = await ended(store, job_id, within_s=15)
    assert state.status == "delivered"
    sent = receiver.requests[0]
    payload = Webhook(SECRET).verify(sent.body, sent.head)
    assert payload["type"] == "job.finished" and payload["id"] == job_id
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + base64.b64encode(b"another key, 32 bytes long......").decode()).verify(
            sent.body, sent.head
        )


async def test_a_tenant_whose_secret_is_gone_fails_its_delivery_unsent(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(answer(204)) as receiver:
        job_id = await finished_job(store, receiver.url(), tenant="gone")
        start(hooked(settings))  # only tenant t has a secret
        state = await ended(store, job_id, within_s=15)
    assert state.status == "failed" and state.attempts == 0 and receiver.requests == []
    assert state.last_error and "no webhook secret for tenant 'gone'" in state.last_error


async def test_a_redirect_is_not_followed(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(answer(204)) as elsewhere:
        with receiving(answer(307, f"location: {elsewhere.url()}\r\n")) as receiver:
            job_id = await finished_job(store, receiver.url())
            start(hooked(settings, webhook_max_attempts=1))
            state = await ended(store, job_id, within_s=15)
    assert state.status == "failed" and state.last_status == 307
    assert elsewhere.requests == [] and len(receiver.requests) == 1


async def test_stop_never_waits_on_a_delivery_longer_than_its_deadline(
    store: JobStore, settings: Settings, start: Callable[..., Running]
) -> None:
    with receiving(drip(every_s=0.1)) as receiver:
        jobs = [await finished_job(store, receiver.url()) for _ in range(CONCURRENCY + 2)]
        running = start(hooked(settings, webhook_timeout_s=2.0))
        deadline = time.monotonic() + 15
        while len(receiver.requests) < CONCURRENCY:  # every delivery slot held by the drip
            assert time.monotonic() < deadline, len(receiver.requests)
            await asyncio.sleep(0.05)
        took = await running.close()
    assert took < 2.0 + 2.0, took
    states = [await webhook_state(store, job_id) for job_id in jobs]
    assert all(s is None or s.status == "pending" for s in states)  # for the next worker
    streams = [store.keys.webhooks(tag) for tag in store.keys.tags]
    assert sum([await store.redis.xlen(s) for s in streams]) == len(jobs)  # none acked
