"""How pages flow through one worker: rendered ahead of the engine, sent as slots free.

Work in flight is sized by what the engine can take, not by a job count. Each page group
of a job (the pages sent in one engine request: ``batch_size``, one by default) goes
through two fair turns:

1. a render turn: one of ``renderers`` rendering slots, granted only while the pages
   rendered but not yet sent fit the render-ahead budget (bytes of /dev/shm);
2. an engine turn: one of ``slots`` engine slots (requests in flight); its rendered bytes
   leave the budget when the slot is granted.

Both turns go to the waiting job that holds the fewest, then to the one served longest
ago: a 200-page PDF gets no more than its share while one-page jobs wait beside it.

The worker takes a new job only while few page groups are waiting to be rendered, and
while it holds fewer groups than two engine-fulls (in the engine, plus as many rendered ahead to
refill every slot at once): it never holds more than it can start soon, so a burst is
shared between workers, while the rendered pages ahead keep the engine's slots full.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

# Page groups waiting to be rendered that a worker keeps per rendering process: enough to keep
# every process busy while the next job is read, inspected and queued.
QUEUED_PER_RENDERER = 2
FIRST_GROUP_BYTES = 1_000_000  # the size guessed for a page group before any was rendered


class FairSlots:
    """``size`` slots shared by owners (jobs), granted fewest-held first, then round-robin."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.used = 0
        self.held: Counter[str] = Counter()
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._served: dict[str, int] = {}  # owner → number of its latest grant
        self._grants = itertools.count()

    def has_room(self) -> bool:
        """True while a slot is free."""
        return self.used < self.size

    @property
    def waiting(self) -> int:
        """Turns asked for and not yet granted."""
        return sum(len(queue) for queue in self._waiting.values())

    async def acquire(self, owner: str) -> None:
        """Wait for a slot; a cancelled wait takes none."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(owner, deque()).append(future)
        self.wake()  # a free slot goes to the fairest waiter, maybe this one
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(owner)  # granted just as the wait was cancelled
            else:
                self._drop(owner, future)
            raise

    def release(self, owner: str) -> None:
        """Give a slot back and grant it to the next waiter."""
        self.used -= 1
        self.held[owner] -= 1
        if self.held[owner] <= 0:
            del self.held[owner]
        self.wake()

    def wake(self) -> None:
        """Grant free slots to waiters: the owner holding fewest, then the longest unserved."""
        while self.has_room() and (owner := self._next_owner()) is not None:
            future = self._waiting[owner].popleft()
            if not self._waiting[owner]:
                del self._waiting[owner]
            self._grant(owner)
            future.set_result(None)

    def _next_owner(self) -> str | None:
        for owner, queue in list(self._waiting.items()):  # a cancelled waiter leaves later
            while queue and queue[0].done():
                queue.popleft()
            if not queue:
                del self._waiting[owner]
        if not self._waiting:
            return None
        return min(self._waiting, key=lambda o: (self.held[o], self._served.get(o, -1)))

    def _grant(self, owner: str) -> None:
        self.used += 1
        self.held[owner] += 1
        self._served[owner] = next(self._grants)

    def _drop(self, owner: str, future: asyncio.Future[None]) -> None:
        queue = self._waiting.get(owner)
        if queue is not None and future in queue:
            queue.remove(future)
            if not queue:
                del self._waiting[owner]

    def forget(self, owner: str) -> None:
        """The owner is gone: no round-robin memory of it."""
        self._served.pop(owner, None)


class RenderSlots(FairSlots):
    """Rendering slots that also keep rendered-but-unsent pages within a byte budget."""

    def __init__(self, size: int, budget_bytes: int) -> None:
        super().__init__(size)
        self.budget_bytes = budget_bytes
        self.ready_bytes = 0  # rendered pages waiting for an engine slot
        self.group_bytes = float(FIRST_GROUP_BYTES)  # running estimate of one group on disk

    def has_room(self) -> bool:
        """A slot is free and one more page group fits; with nothing ahead, one always may."""
        if self.used >= self.size:
            return False
        if self.used == 0 and self.ready_bytes == 0:
            return True  # a group larger than the whole budget still goes, alone
        return self.ready_bytes + (self.used + 1) * self.group_bytes <= self.budget_bytes

    def add_ready(self, size: int) -> None:
        """A page group of ``size`` bytes was rendered: it waits for the engine."""
        self.ready_bytes += size
        self.group_bytes += (size - self.group_bytes) / 8  # a moving average of groups

    def take_ready(self, size: int) -> None:
        """A rendered group went to the engine (or was dropped): room to render more."""
        self.ready_bytes -= size
        self.wake()


@dataclass
class Rendered:
    """What a render turn produced: bytes on disk, set by the renderer when it succeeds."""

    size: int = 0
    waiting: bool = False  # rendered, not yet in the engine


class PageFlow:
    """The worker's pages: jobs admitted, page groups rendered ahead, engine slots held."""

    def __init__(self, slots: int, renderers: int, budget_bytes: int) -> None:
        self.engine = FairSlots(slots)
        self.render = RenderSlots(renderers, budget_bytes)
        self.queue_limit = QUEUED_PER_RENDERER * max(1, renderers)
        self.unrendered: dict[str, int] = {}  # job → page groups not yet rendered (1: not planned)
        self.ready = 0  # page groups rendered and waiting for an engine slot
        self.changed = asyncio.Event()  # admission may have room again

    def room(self) -> int:
        """How many more jobs to take now: what can start rendering soon, within two
        engine-fulls of page groups held (in the engine, rendered, or to render)."""
        unrendered = sum(self.unrendered.values())
        held = self.engine.used + self.ready + unrendered
        return max(0, min(self.queue_limit - unrendered, 2 * self.engine.size - held))

    def admit(self, job: str) -> None:
        """A job was dispatched; until planned it counts as one page group to render."""
        self.unrendered[job] = 1

    def plan(self, job: str, groups: int) -> None:
        """The job has this many page groups for the engine (after its text layers)."""
        if job in self.unrendered:
            self.unrendered[job] = groups
            self.changed.set()

    def forget(self, job: str) -> None:
        """The job ended (done, failed, cancelled): it holds no more room."""
        self.unrendered.pop(job, None)
        self.engine.forget(job)
        self.render.forget(job)
        self.changed.set()

    async def wait_for_room(self, timeout_s: float) -> None:
        """Return at the next change that may make room (a group rendered, a job ended)."""
        self.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout_s)

    @contextlib.asynccontextmanager
    async def render_turn(self, job: str) -> AsyncIterator[Rendered]:
        """Hold a rendering slot; the rendered bytes count as ready before it is freed."""
        await self.render.acquire(job)
        rendered = Rendered()
        try:
            yield rendered
            rendered.waiting = True
            self.ready += 1
        finally:
            if rendered.size:
                self.render.add_ready(rendered.size)
            if job in self.unrendered:
                self.unrendered[job] = max(0, self.unrendered[job] - 1)
                self.changed.set()
            self.render.release(job)

    @contextlib.asynccontextmanager
    async def engine_turn(self, job: str, rendered: Rendered) -> AsyncIterator[None]:
        """Hold an engine slot; the group leaves the render-ahead budget once it has one."""
        try:
            await self.engine.acquire(job)
        finally:
            self.render.take_ready(rendered.size)
            if rendered.waiting:
                rendered.waiting = False
                self.ready -= 1
        try:
            yield
        finally:
            self.engine.release(job)
            self.changed.set()
