"""Process exactly one job: claim, rasterise, recognise in micro-batches, write the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import structlog
from redis.exceptions import RedisError

from consumer.assemble import assemble
from consumer.engines.base import Engine, EngineOutput
from consumer.metrics import WorkerMetrics
from consumer.raster import Rasteriser
from consumer.retry import with_retries
from consumer.workspace import job_workspace
from shared.errors import ErrorCode, OcrqError
from shared.schemas import EngineInfo, JobOptions, Page, Result, Timings, stored_options
from shared.settings import Settings
from shared.store import JobStore, Outcome, now_ms

log = structlog.get_logger("ocrq.worker")
Watch = Callable[[Coroutine[Any, Any, Result]], Awaitable[Result]]


def remove_files(paths: list[str]) -> None:
    """Delete rendered pages as soon as the engine has them."""
    for path in paths:
        Path(path).unlink(missing_ok=True)


class Delivery(msgspec.Struct, frozen=True):
    """One stream entry handed to this worker."""

    lane: str
    entry: str
    job_id: str
    deliveries: int = 1


class Abandoned(Exception):
    """The job was cancelled, or another worker took it over: stop without an outcome."""


@dataclass
class JobClock:
    """Stage times of one job, in seconds."""

    raster_s: float = 0.0
    infer_s: float = 0.0
    started: float = field(default_factory=time.monotonic)


@dataclass
class JobRunner:
    """Everything process() needs; one instance per worker process."""

    settings: Settings
    store: JobStore
    engine: Engine
    rasteriser: Rasteriser
    metrics: WorkerMetrics
    me: str
    shm: Path
    engine_slots: asyncio.Semaphore

    async def process(self, d: Delivery) -> None:
        """Handle one delivery end to end; never raises (a bad job must not kill the worker)."""
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(
            worker=self.me, job_id=d.job_id, lane=d.lane, entry=d.entry
        )
        try:
            await self._process(d)
        except (RedisError, OSError) as e:  # the entry stays pending: a reclaim retries it
            log.error("job", outcome="interrupted", error=str(e))

    async def _process(self, d: Delivery) -> None:
        if d.deliveries > self.settings.max_deliveries:
            await self.store.poison(d.job_id, d.lane, d.entry, self.me, d.deliveries)
            self.metrics.jobs.labels("poisoned").inc()
            log.error("job", outcome="poisoned", deliveries=d.deliveries)
            return
        claimed = await self.store.claim(d.job_id, d.lane, d.entry, self.me)
        if claimed != "ok":
            log.info("job", outcome="skipped", reason=claimed)
            return
        self.metrics.in_flight.inc()
        try:
            await self._run_claimed(d)
        finally:
            self.metrics.in_flight.dec()

    async def _run_claimed(self, d: Delivery) -> None:
        clock, pages_done = JobClock(), [0]
        try:
            async with self._heartbeat(d) as watch:
                result = await watch(self._recognise(d, clock, pages_done))
            outcome = Outcome.done(msgspec.json.encode(result), result.page_count)
            summary = {"pages": result.page_count, **msgspec.structs.asdict(result.timings)}
        except Abandoned as e:
            await self.store.finish(
                d.job_id,
                d.lane,
                d.entry,
                self.me,
                Outcome.failed(OcrqError(ErrorCode.CANCELLED, str(e))),
            )  # only ACKs: the job is not ours
            self.metrics.jobs.labels("abandoned").inc()
            log.info("job", outcome="abandoned", reason=str(e))
            return
        except OcrqError as e:
            outcome, summary = Outcome.failed(e, pages_done[0]), {"code": e.code.value}
        except Exception as e:  # a bug must fail this job, not the worker
            log.exception("job_crashed", error=repr(e))
            err = OcrqError(ErrorCode.INTERNAL, f"worker error: {type(e).__name__}")
            outcome, summary = Outcome.failed(err, pages_done[0]), {"code": err.code.value}
        written = await self.store.finish(d.job_id, d.lane, d.entry, self.me, outcome)
        status = outcome.status if written else "lost"
        self.metrics.jobs.labels(status).inc()
        log.info(
            "job", outcome=status, total_s=round(time.monotonic() - clock.started, 3), **summary
        )

    @contextlib.asynccontextmanager
    async def _heartbeat(self, d: Delivery) -> AsyncIterator[Watch]:
        """Refresh the entry's idle time and watch for cancellation while the job runs."""
        interval = max(0.2, min(1.0, self.settings.visibility_timeout_ms / 3000))
        reason: list[str] = []

        async def beat() -> None:
            me = asyncio.current_task()
            while me is None or not me.cancelling():
                await asyncio.sleep(interval)
                try:
                    owned = await self.store.touch(d.lane, d.entry, self.me)
                    status = await self.store.redis.hget(self.store.keys.job(d.job_id), "status")
                except (RedisError, OSError) as e:  # a blip: keep working, try again next beat
                    # redis-py may turn our own cancellation into a connection error: the
                    # loop condition sees it, so a cancelled heartbeat really stops.
                    log.warning("heartbeat_failed", error=str(e))
                    continue
                if not owned:
                    reason.append("another worker owns the entry")
                    return
                if status != b"processing":
                    reason.append(f"job is {status!r}" if status else "job is gone")
                    return

        beater = asyncio.create_task(beat())

        async def watch(work: Coroutine[Any, Any, Result]) -> Result:
            task = asyncio.ensure_future(work)
            try:
                done, _ = await asyncio.wait({task, beater}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # cancelled (drain): the work must stop with us
                task.cancel()
                raise
            if task in done:
                return task.result()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise Abandoned(reason[0] if reason else "heartbeat stopped")

        try:
            yield watch
        finally:
            beater.cancel()
            await asyncio.wait({beater}, timeout=5.0)  # bounded: never hang a drain on it
            if beater.done() and not beater.cancelled():
                beater.exception()  # retrieved: an ended heartbeat is not worth a warning

    async def _recognise(self, d: Delivery, clock: JobClock, pages_done: list[int]) -> Result:
        names = ("payload", "media_type", "options", "created_at")
        f = await self.store.read_fields(d.job_id, names)
        if "payload" not in f:
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the job has no document")
        media_type = f["media_type"].decode()
        options = stored_options(f.get("options", b"{}"))
        queued_ms = max(0, now_ms() - int(f.get("created_at", now_ms())))
        self.metrics.stage_seconds.labels("queue_wait").observe(queued_ms / 1000)
        with job_workspace(self.shm, self.me, d.job_id) as folder:
            doc = folder / "document"
            await asyncio.to_thread(doc.write_bytes, f["payload"])
            del f
            run = PageRun(self, d, str(doc), media_type, options, folder, clock, pages_done)
            text_pages, outputs = await run.all_pages()
        total_ms = queued_ms + int((time.monotonic() - clock.started) * 1000)
        timings = Timings(
            queued_ms=queued_ms, raster_ms=int(clock.raster_s * 1000),
            infer_ms=int(clock.infer_s * 1000), total_ms=total_ms,
        )  # fmt: skip
        # Only the vLLM engine honours a job's profile; say what really ran.
        profile = options.profile if self.engine.name == "vllm" else None
        engine = EngineInfo(
            name=self.engine.name, model=self.engine.model,
            profile=profile or self.engine.profile,
        )  # fmt: skip
        self.metrics.pages.inc(pages_done[0])
        return assemble(
            job_id=d.job_id, media_type=media_type, text_pages=text_pages, outputs=outputs,
            engine=engine, timings=timings,
        )  # fmt: skip


@dataclass
class PageRun:
    """The pages of one job: text layer where good, the rest in micro-batches to the engine."""

    runner: JobRunner
    d: Delivery
    doc: str
    media_type: str
    options: JobOptions
    folder: Path
    clock: JobClock
    pages_done: list[int]

    @property
    def dpi(self) -> int:
        """The job's DPI, else the worker's default."""
        return self.options.dpi or self.runner.settings.default_dpi

    async def all_pages(self) -> tuple[list[Page], list[EngineOutput]]:
        """Inspect, take text layers, then recognise the rest; progress as batches finish."""
        s = self.runner.settings
        max_pages = min(self.options.max_pages or s.default_max_pages, s.default_max_pages)
        total = await self.runner.rasteriser.inspect(self.doc, self.media_type, max_pages)
        await self._progress(0, total)
        text_pages = await self._text_layer_pages(total)
        taken = {p.number for p in text_pages}
        todo = [i for i in range(total) if i + 1 not in taken]
        self.pages_done[0] = len(text_pages)
        size = self.options.batch_size
        batches = [todo[i : i + size] for i in range(0, len(todo), size)]
        outputs: list[EngineOutput] = []
        tasks = [asyncio.ensure_future(self._batch(b)) for b in batches]
        try:
            for next_done in asyncio.as_completed(tasks):
                out = await next_done
                outputs.append(out)
                self.pages_done[0] += len(out.pages)
                await self._progress(self.pages_done[0], total)
        finally:  # one failed batch fails the job: stop its siblings
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return text_pages, outputs

    async def _progress(self, done: int, total: int) -> None:
        if not await self.runner.store.progress(self.d.job_id, self.runner.me, done, total):
            raise Abandoned("the job is no longer this worker's")

    def _wants_text_layer(self) -> bool:
        if self.media_type != "application/pdf":
            return False
        mode = self.options.text_layer
        if mode is None:  # default: off for vLLM (it reads fine print), auto for local
            mode = "auto" if self.runner.engine.name == "local" else "off"
        return mode == "auto"

    async def _text_layer_pages(self, total: int) -> list[Page]:
        if not self._wants_text_layer():
            return []
        pages = []
        for index in range(total):
            page = await self.runner.rasteriser.text_layer(self.doc, index, self.dpi)
            if page is not None:
                pages.append(page)
        return pages

    async def _batch(self, indices: list[int]) -> EngineOutput:
        """Render a micro-batch just in time, recognise it under the global limit, drop it."""
        r = self.runner
        async with r.engine_slots:
            started = time.monotonic()
            images = [
                await r.rasteriser.render(self.doc, self.media_type, i, self.dpi, str(self.folder))
                for i in indices
            ]
            raster_s = time.monotonic() - started
            self.clock.raster_s += raster_s
            r.metrics.stage_seconds.labels("raster").observe(raster_s)
            started = time.monotonic()
            try:
                out = await with_retries(
                    lambda: r.engine.recognise(images, profile=self.options.profile),
                    r.settings,
                    on_error=lambda e: r.metrics.engine_errors.labels(e.code.value).inc(),
                )
            finally:
                await asyncio.to_thread(remove_files, [image.path for image in images])
            infer_s = time.monotonic() - started
            self.clock.infer_s += infer_s
            r.metrics.stage_seconds.labels("inference").observe(infer_s)
            return out
