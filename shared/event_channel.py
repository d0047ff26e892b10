"""The events channel's pub/sub connection: subscribe, then read messages with a timeout.

A process holds one subscription (producer/events.py fans it out to its waiters); this
module owns the Redis side of it, so the hub deals in message bodies alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub


class Subscription:
    """A subscribed pub/sub connection; ``next_message`` reads what was published on it."""

    def __init__(self, pubsub: PubSub) -> None:
        self._pubsub = pubsub

    async def next_message(self, timeout_s: float) -> bytes | None:
        """The next message's data, or None when none came within timeout_s."""
        message = await self._pubsub.get_message(timeout=timeout_s)
        if message and message.get("type") == "message":
            data: bytes = message["data"]
            return data
        return None


class EventChannel:
    """The pub/sub channel where job changes are published (``Keys.events``)."""

    def __init__(self, redis: aioredis.Redis, channel: str) -> None:
        self.redis, self.channel = redis, channel

    @contextlib.asynccontextmanager
    async def subscription(self) -> AsyncIterator[Subscription]:
        """A new connection subscribed to the channel, closed on leaving."""
        async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(self.channel)
            yield Subscription(pubsub)
