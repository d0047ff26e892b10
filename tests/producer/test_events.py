"""One pub/sub subscription per process; a resubscribe wakes every waiter (no lost wake-ups)."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from ocrq.producer.events import EventHub
from ocrq.shared.store import JobStore


async def test_a_published_event_wakes_the_waiters_of_that_job_only(store: JobStore) -> None:
    hub = EventHub(store.event_channel)
    await hub.start()
    await asyncio.sleep(0.3)  # subscribed (a subscription wakes whoever already waits)
    try:
        with hub.watch("a") as a, hub.watch("b") as b:
            await store.redis.publish(store.keys.events, b'{"id": "a", "status": "done"}')
            await asyncio.wait_for(a.wait(), 5)
            assert not b.is_set()
    finally:
        await hub.stop()


async def test_every_waiter_wakes_after_the_subscription_is_restored(
    store: JobStore, aredis: aioredis.Redis
) -> None:
    hub = EventHub(store.event_channel)
    await hub.start()
    await asyncio.sleep(0.3)
    try:
        with hub.watch("a") as a:
            # Events published while the hub reconnects are lost: the waiter must re-read.
            await aredis.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            await asyncio.wait_for(a.wait(), 10)
    finally:
        await hub.stop()
