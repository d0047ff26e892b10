"""Process exactly one job: claim it, read its pages, write the outcome."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import structlog

from ocrq.consumer.assemble import assemble
from ocrq.consumer.engines.base import EngineOutput
from ocrq.consumer.heartbeat import Abandoned, Heartbeat
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.pages import JobPages, PageReader, Tally
from ocrq.consumer.retry import through_outages
from ocrq.consumer.workspace import job_workspace
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.lanes import LaneEntry
from ocrq.shared.record import FIGURES, SEARCHABLE_PDF, WORK_FIELDS
from ocrq.shared.schemas import EngineInfo, Page, Result, Timings
from ocrq.shared.settings import Settings
from ocrq.shared.store import REDIS_DOWN, STORE_ERRORS, JobStore, Outcome, now_ms

log = structlog.get_logger("ocrq.worker")


@dataclass(frozen=True)
class JobRunner:
    """Everything process() needs; one instance per worker process."""

    settings: Settings
    store: JobStore
    reader: PageReader
    metrics: WorkerMetrics
    me: str
    workspace: Path  # this worker's scratch root: one folder per job under it

    async def process(self, entry: LaneEntry) -> None:
        """Handle one lane entry end to end; never raises (a bad job must not kill the worker)."""
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(
            worker=self.me, job_id=entry.job_id, lane=entry.lane, entry=entry.entry_id
        )
        try:
            await self._process(entry)
        except STORE_ERRORS as e:  # the entry stays pending: a reclaim retries it
            log.error("job", outcome="interrupted", error=str(e))

    async def _process(self, entry: LaneEntry) -> None:
        if entry.deliveries > self.settings.worker.max_deliveries:
            await through_outages(
                lambda: self.store.poison(
                    entry.job_id, entry.lane, entry.entry_id, self.me, entry.deliveries, entry.batch
                ),
                "poison",
            )
            self.metrics.jobs.labels("poisoned").inc()
            log.error("job", outcome="poisoned", deliveries=entry.deliveries)
            return
        claimed = await through_outages(
            lambda: self.store.claim(entry.job_id, entry.lane, entry.entry_id, self.me), "claim"
        )
        if claimed != "ok":
            log.info("job", outcome="skipped", reason=claimed)
            return
        self.metrics.in_flight.inc()
        try:
            await self._run_claimed(entry)
        finally:
            self.metrics.in_flight.dec()

    async def _run_claimed(self, entry: LaneEntry) -> None:
        tally = Tally()
        interval = max(0.2, min(1.0, self.settings.worker.visibility_timeout_ms / 3000))
        try:
            async with Heartbeat(self.store, entry, self.me, interval) as beat:
                result = await beat.watch(self._recognise(entry, tally))
            outcome = Outcome.done(msgspec.json.encode(result), result.page_count)
            summary = {"pages": result.page_count, **msgspec.structs.asdict(result.timings)}
        except Abandoned as e:
            await self._let_go(entry, str(e))
            return
        except OcrqError as e:
            outcome, summary = Outcome.failed(e, tally.pages_done), {"code": e.code.value}
        except REDIS_DOWN:  # never a job's outcome: the entry stays ours, resumed later
            raise
        except Exception as e:  # a bug must fail this job, not the worker
            log.exception("job_crashed", error=repr(e))
            err = OcrqError(ErrorCode.INTERNAL, f"worker error: {type(e).__name__}")
            outcome, summary = Outcome.failed(err, tally.pages_done), {"code": err.code.value}
        written = await through_outages(
            lambda: self.store.finish(
                entry.job_id, entry.lane, entry.entry_id, self.me, outcome, entry.batch
            ),
            "finish",
        )
        status = outcome.status if written else "lost"
        self.metrics.jobs.labels(status).inc()
        total_s = round(time.monotonic() - tally.started, 3)
        log.info("job", outcome=status, total_s=total_s, **summary)

    async def _let_go(self, entry: LaneEntry, reason: str) -> None:
        """The job is no longer ours: FINISH only ACKs an entry still held, writes nothing."""
        lost = Outcome.failed(OcrqError(ErrorCode.CANCELLED, reason))
        await through_outages(
            lambda: self.store.finish(
                entry.job_id, entry.lane, entry.entry_id, self.me, lost, entry.batch
            ),
            "let go",
        )
        self.metrics.jobs.labels("abandoned").inc()
        log.info("job", outcome="abandoned", reason=reason)

    async def _recognise(self, entry: LaneEntry, tally: Tally) -> Result:
        record = await through_outages(lambda: self.store.read(entry.job_id, WORK_FIELDS), "read")
        if record.payload is None:
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the job has no document")
        created = record.created_at or now_ms()
        queued_ms = max(0, now_ms() - created)
        self.metrics.stage_seconds.labels("queue_wait").observe(queued_ms / 1000)

        async def report(done: int, total: int, pages: list[Page]) -> None:
            finished = {page.number: msgspec.json.encode(page) for page in pages}
            ours = await through_outages(
                lambda: self.store.progress(entry.job_id, self.me, done, total, finished),
                "progress",
            )
            if not ours:
                raise Abandoned("the job is no longer this worker's")

        with job_workspace(self.workspace, entry.job_id) as folder:
            doc = folder / "document"
            await asyncio.to_thread(doc.write_bytes, record.payload)
            job = JobPages(entry.job_id, doc, record.media_type, record.options, folder, tally)
            del record  # the payload: up to 10 MB this job no longer needs in memory
            text_pages, outputs = await self.reader.read_all(job, report)
            result = assemble(
                job_id=entry.job_id,
                media_type=job.media_type,
                text_pages=text_pages,
                outputs=outputs,
                engine=self._engine_info(job),
                timings=self._timings(job, queued_ms),
                keep_furniture=job.options.keep_headers_footers,
            )
            await self._keep_files(job, result, outputs)
        return result

    async def _keep_files(self, job: JobPages, result: Result, outputs: list[EngineOutput]) -> None:
        """Store the job's figures and, when asked, its searchable PDF, before it finishes."""
        files = dict(job.files)
        if job.options.searchable_pdf:
            words = {n: w for out in outputs for n, w in out.words.items()}
            files[SEARCHABLE_PDF] = await self.reader.rasteriser.searchable_pdf(
                str(job.doc), job.media_type, result.pages, words, self.reader.dpi(job)
            )
            result.searchable_pdf = True
        result.images = sorted(name.removeprefix(FIGURES) for name in job.files)
        saved = await through_outages(
            lambda: self.store.save_files(job.job_id, self.me, files), "save files"
        )
        if not saved:
            raise Abandoned("the job is no longer this worker's")

    def _engine_info(self, job: JobPages) -> EngineInfo:
        engine = self.reader.engine
        # Only the vLLM engine honours a job's profile; say what really ran.
        profile = job.options.profile if engine.name == "vllm" else None
        return EngineInfo(name=engine.name, model=engine.model, profile=profile or engine.profile)

    def _timings(self, job: JobPages, queued_ms: int) -> Timings:
        tally = job.tally
        self.metrics.pages.inc(tally.pages_done)
        return Timings(
            queued_ms=queued_ms,
            raster_ms=int(tally.raster_s * 1000),
            infer_ms=int(tally.infer_s * 1000),
            total_ms=queued_ms + int((time.monotonic() - tally.started) * 1000),
        )
