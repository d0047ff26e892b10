"""Live progress as Server-Sent Events, fed by the process's one pub/sub subscription.

A stream sends the current state first, then every change, with a comment every 15 s to keep
proxies from closing it, and ends after a terminal state, or with a last ``deleted`` event
(data ``{"id": …, "status": "deleted"}``) when the job or batch is deleted while followed.
Each event's id names the state it carries: a client reconnecting with ``Last-Event-ID``
gets the current state again only when it differs, so nothing that still matters is missed.
Listeners share the process's Redis pool and pub/sub connection: a listener costs no
connection of its own.

A job's stream with ``?pages=true`` also sends a ``page`` event (``{"number", "markdown",
"blocks"}``) for each page once it is read: after the progress event that finished it,
pages already read when the stream starts first; the terminal event comes after every page.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

import msgspec
import structlog
from litestar import Request, get
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from ocrq.producer.batches.views import batch_status, tenants_batch
from ocrq.producer.jobs.outputs import OFF_LOOP_BYTES
from ocrq.producer.jobs.stored import result_json
from ocrq.producer.jobs.views import SUMMARY_FIELDS, job_summary, known_job, visible
from ocrq.producer.runtime import Runtime, caller
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import Field, JobRecord
from ocrq.shared.schemas import TERMINAL, Base, BatchCounts, Status

log = structlog.get_logger("ocrq.producer")
HEARTBEAT_S = 15.0
# At most one event per COALESCE_S: the first change after a quiet spell is read at once,
# and a burst (a batch's jobs ending together) that follows it is one more event.
COALESCE_S = 0.1
# What a job's event carries, the tenant to check who may see it, and (done with an object
# store) where its result is: the page feed reads the last pages from there.
EVENT_FIELDS = (*SUMMARY_FIELDS, Field.TENANT, Field.RESULT_REF)


class BatchEvent(Base):
    """A batch's state in an event: its status and counts (pages: GET the batch)."""

    id: str
    status: str
    counts: BatchCounts


Snapshot = tuple[str, bytes, bool]  # (event id, JSON data, terminal)
Extras = Callable[[], Awaitable[list[ServerSentEventMessage]]]  # events after a state
WithPages = Annotated[
    bool, Parameter(description="also a `page` event per page, with its Markdown and blocks")
]


class PageEvent(msgspec.Struct):
    """What a ``page`` event carries of a kept page (its blocks passed through as stored)."""

    number: int
    markdown: str | None = None
    blocks: msgspec.Raw = msgspec.Raw(b"[]")


class ResultPages(msgspec.Struct):
    """The pages of a stored Result, as page events carry them."""

    pages: list[PageEvent] = msgspec.field(default_factory=list)


class PageFeed:
    """The pages of one job not yet sent on one stream, read when the job has moved.

    While the job runs they are the pages kept in Redis; once it is done with its result in
    the object store (``result_ref``: Redis then keeps no pages), the result's own pages.
    """

    def __init__(self, rt: Runtime, job_id: str) -> None:
        self.rt, self.job_id = rt, job_id
        self.sent: set[int] = set()
        self.result_ref = ""  # set by the stream's read once the job is done with one
        self._decoder = msgspec.json.Decoder(PageEvent)

    async def new_events(self) -> list[ServerSentEventMessage]:
        """A ``page`` event for each page kept since the last call, in page order."""
        pages = await (self._stored_pages() if self.result_ref else self._kept_pages())
        events = []
        for page in sorted(pages, key=lambda p: p.number):
            if page.number in self.sent:
                continue
            events.append(
                ServerSentEventMessage(data=msgspec.json.encode(page).decode(), event="page")
            )
            self.sent.add(page.number)
        return events

    async def _kept_pages(self) -> list[PageEvent]:
        kept = await self.rt.flights.read(
            f"pages:{self.job_id}", lambda: self.rt.store.finished_pages(self.job_id)
        )
        numbers = sorted(set(kept) - self.sent)
        found = await self.rt.store.read_pages(self.job_id, numbers)
        # A page gone meanwhile (the job deleted): the job's own event says so.
        return [self._decoder.decode(data) for data in found if data is not None]

    async def _stored_pages(self) -> list[PageEvent]:
        record = JobRecord(status=Status.DONE, result_ref=self.result_ref)
        try:
            stored = await self.rt.flights.read(
                f"result:{self.job_id}", lambda: result_json(self.rt, self.job_id, record)
            )
        except OcrqError as e:  # a stream ends whole: the done event still comes
            log.warning("page_events_lost", job_id=self.job_id, error=e.message)
            return []
        if len(stored) > OFF_LOOP_BYTES:
            return (await asyncio.to_thread(msgspec.json.decode, stored, type=ResultPages)).pages
        return msgspec.json.decode(stored, type=ResultPages).pages


async def no_extras() -> list[ServerSentEventMessage]:
    """No events besides the state's."""
    return []


async def stream(
    rt: Runtime,
    key: str,
    kind: str,
    read: Callable[[], Awaitable[Snapshot]],
    last_id: str,
    extras: Extras = no_extras,
) -> AsyncIterator[ServerSentEventMessage]:
    """Current state, then each change, heartbeats between, until a terminal state (or a
    last ``deleted`` event: a stream ends whole, never cut off by an error). ``extras``
    gives the events that follow a state (a terminal state comes after them)."""
    with rt.events.watch(key) as changed:
        while True:
            read_at = time.monotonic()
            try:
                event_id, data, terminal = await read()
            except OcrqError as e:  # deleted while followed: a last event says so, whole
                if e.code != ErrorCode.NOT_FOUND:
                    raise
                gone = msgspec.json.encode({"id": key, "status": "deleted"}).decode()
                yield ServerSentEventMessage(data=gone, event=kind, id="deleted")
                return
            more = await extras()
            if terminal:
                for event in more:
                    yield event
            if event_id != last_id:
                yield ServerSentEventMessage(data=data.decode(), event=kind, id=event_id)
                last_id = event_id
            if terminal:
                return
            for event in more:
                yield event
            try:
                await asyncio.wait_for(changed.wait(), HEARTBEAT_S)
            except TimeoutError:
                yield ServerSentEventMessage(comment="keep-alive")
                continue
            await asyncio.sleep(read_at + COALESCE_S - time.monotonic())
            changed.clear()


@get("/v1/jobs/{job_id:str}/events", summary="A job's progress as Server-Sent Events")
async def job_events(
    request: Request[Any, Any, Any], state: State, job_id: FromPath[str], pages: WithPages = False
) -> ServerSentEvent:
    """Status and pages of one job, live, until it ends; ``pages=true``: each page read."""
    rt, tenant = caller(request, state)

    async def read() -> Snapshot:
        fetched = await rt.flights.read(
            f"job:{job_id}", lambda: rt.store.read(known_job(job_id), EVENT_FIELDS)
        )
        record = visible(job_id, fetched, tenant)
        feed.result_ref = record.result_ref
        summary = job_summary(job_id, record)
        event_id = f"{summary.status}:{summary.progress.pages_done}"
        return event_id, msgspec.json.encode(summary), record.status in TERMINAL

    feed = PageFeed(rt, job_id)
    await read()  # a job that is not there (or not the tenant's) is a 404, not a stream
    last = request.headers.get("last-event-id", "")
    extras = feed.new_events if pages else no_extras
    return ServerSentEvent(stream(rt, job_id, "job", read, last, extras))


@get("/v1/batches/{batch_id:str}/events", summary="A batch's progress as Server-Sent Events")
async def batch_events(
    request: Request[Any, Any, Any], state: State, batch_id: FromPath[str]
) -> ServerSentEvent:
    """Counts of one batch, live, until every job has ended."""
    rt, tenant = caller(request, state)

    async def read() -> Snapshot:
        fetched = await rt.flights.read(f"batch:{batch_id}", lambda: rt.batches.read(batch_id))
        record = tenants_batch(fetched, batch_id, tenant)
        status = batch_status(record)
        counts = BatchCounts(
            total=record.total,
            done=record.done,
            failed=record.failed,
            cancelled=record.cancelled,
        )
        event = BatchEvent(id=batch_id, status=status, counts=counts)
        event_id = f"{status}:{record.total}:{record.ended}"
        return event_id, msgspec.json.encode(event), status == "finished"

    await read()
    last = request.headers.get("last-event-id", "")
    return ServerSentEvent(stream(rt, batch_id, "batch", read, last))


LIVE_HANDLERS = [job_events, batch_events]
