"""One pub/sub subscription per process, fanned out to the requests waiting on a job."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator

import msgspec
import structlog

from ocrq.shared.event_channel import EventChannel
from ocrq.shared.record import JobEvent

log = structlog.get_logger("ocrq.events")


class EventHub:
    """Subscribes once to the events channel; ``wait(job_id, timeout)`` wakes on that job."""

    def __init__(self, channel: EventChannel) -> None:
        self.channel = channel
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._decoder = msgspec.json.Decoder(JobEvent)

    async def start(self) -> None:
        """Start the listener task."""
        self._task = asyncio.create_task(self._listen(), name="ocrq-events")

    async def stop(self) -> None:
        """Stop listening and wake every waiter."""
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.wake_all()

    def wake_all(self) -> None:
        """Wake every waiter (they re-read their job's state)."""
        for events in self._waiters.values():
            for event in events:
                event.set()

    @contextlib.contextmanager
    def watch(self, job_id: str) -> Iterator[asyncio.Event]:
        """An Event set on the next change of job_id; register before reading the state."""
        event = asyncio.Event()
        self._waiters[job_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[job_id]

    def _dispatch(self, data: bytes) -> None:
        try:
            job_id = self._decoder.decode(data).id
        except msgspec.DecodeError:
            return
        for event in self._waiters.get(job_id, ()):
            event.set()

    async def _listen(self) -> None:
        # Reconnect with a pause: a Redis restart must not end long-polling for good.
        while True:
            try:
                async with self.channel.subscription() as subscription:
                    # Events published while we were not subscribed are gone: every waiter
                    # reads the job again rather than sleeping out its whole wait.
                    self.wake_all()
                    while True:
                        data = await subscription.next_message(timeout_s=1.0)
                        if data is not None:
                            self._dispatch(data)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("events_subscription_lost", error=str(e))
                await asyncio.sleep(1.0)
