"""Process exactly one job: claim it, read its pages, write the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec
import structlog

from ocrq.consumer.after_text import after_text
from ocrq.consumer.assemble import assemble
from ocrq.consumer.documents import DocumentSpool, page_limit
from ocrq.consumer.engines.base import EngineOutput
from ocrq.consumer.fields.lines import Line
from ocrq.consumer.fields.reader import FieldReader
from ocrq.consumer.heartbeat import Abandoned, Heartbeat
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.pages import JobPages, PageReader, Report, Tally
from ocrq.consumer.redact.redactor import Redactor
from ocrq.consumer.retry import through_outages
from ocrq.consumer.stored_results import ResultWriter
from ocrq.consumer.workspace import job_workspace
from ocrq.shared.blobs.base import BlobError, BlobMissing, BlobStore
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.lanes import LaneEntry
from ocrq.shared.record import FIGURES, SEARCHABLE_PDF, WORK_FIELDS, Field, JobRecord
from ocrq.shared.schemas import DocumentRef, EngineInfo, Page, Result, Status, Timings
from ocrq.shared.settings import Settings
from ocrq.shared.store import REDIS_DOWN, STORE_ERRORS, JobStore, Outcome, Usage, now_ms
from ocrq.shared.tracing import annotate, span, tracing_active

log = structlog.get_logger("ocrq.worker")


@dataclass
class Ending:
    """What a job leaves to do once its outcome is written: its document to delete."""

    document: DocumentRef | None = None


@dataclass(frozen=True)
class Done:
    """A recognised job: its Result, and where the store holds it ("" : Redis holds it)."""

    result: Result
    stored_at: str = ""


@dataclass(frozen=True)
class JobRunner:
    """Everything process() needs; one instance per worker process."""

    settings: Settings
    store: JobStore
    reader: PageReader
    metrics: WorkerMetrics
    me: str
    workspace: Path  # this worker's scratch root: one folder per job under it
    blobs: BlobStore | None = None  # the object store (OCRQ_BLOB_URL), when configured
    documents: DocumentSpool | None = None  # None: inline documents only (no store, no URLs)
    results: ResultWriter | None = None  # None: results go to Redis
    fields: FieldReader | None = None  # the extract option; None: key-value, made per job

    def spool(self) -> DocumentSpool:
        """How this worker turns a job's document into a file."""
        return self.documents or DocumentSpool(self.settings, self.blobs, None, None)

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
            parent = await self._trace_parent(entry.job_id)
            named = {"ocrq.job_id": entry.job_id, "ocrq.lane": entry.lane}
            with span("ocrq.job", named, parent=parent, kind="consumer"):
                await self._run_claimed(entry)
        finally:
            self.metrics.in_flight.dec()

    async def _trace_parent(self, job_id: str) -> str | None:
        """The enqueue's traceparent, read only while this process exports spans."""
        if not tracing_active():
            return None
        record = await through_outages(lambda: self.store.read(job_id, (Field.TRACE,)), "read")
        return record.trace or None

    async def _run_claimed(self, entry: LaneEntry) -> None:
        tally, ending = Tally(), Ending()
        interval = max(0.2, min(1.0, self.settings.worker.visibility_timeout_ms / 3000))
        try:
            async with Heartbeat(self.store, entry, self.me, interval) as beat:
                done = await beat.watch(self._recognise(entry, tally, ending))
            result = done.result
            result_json = msgspec.json.encode(result)
            engine = result.engine.name if result.engine else ""
            usage = Usage(engine, result.timings.infer_ms, len(result_json))
            if done.stored_at:
                outcome = Outcome.stored(done.stored_at, result.page_count, usage)
            else:
                outcome = Outcome.done(result_json, result.page_count, usage)
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
        annotate(**{"ocrq.outcome": str(status), "ocrq.code": summary.get("code")})
        total_s = round(time.monotonic() - tally.started, 3)
        # The job's line first: the delete below may wait out a store outage, and a worker
        # killed meanwhile must not leave a finished job without its canonical line.
        log.info("job", outcome=status, total_s=total_s, **summary)
        if written:
            await self._delete_owned(ending.document)

    async def _delete_owned(self, document: DocumentRef | None) -> None:
        """Best effort: an ended job's own document object goes (the sweeper takes leftovers)."""
        if document is None or document.kind != "blob" or not document.owned or not self.blobs:
            return
        try:
            await self.blobs.delete([document.key])
        except BlobError as e:
            log.warning("document_not_deleted", key=document.key, error=str(e))

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

    async def _recognise(self, entry: LaneEntry, tally: Tally, ending: Ending) -> Done:
        record = await through_outages(lambda: self.store.read(entry.job_id, WORK_FIELDS), "read")
        ending.document = record.document
        created = record.created_at or now_ms()
        queued_ms = max(0, now_ms() - created)
        self.metrics.stage_seconds.labels("queue_wait").observe(queued_ms / 1000)
        with job_workspace(self.workspace, entry.job_id) as folder, contextlib.ExitStack() as exits:
            doc, media_type = await self._local_copy(entry.job_id, record, folder, exits)
            limit = page_limit(self.settings, record.document)
            job = JobPages(
                entry.job_id, doc, media_type, record.options, folder, tally, page_limit=limit
            )
            tenant, filename = record.tenant, record.filename
            del record  # the payload: up to 10 MB this job no longer needs in memory
            stored: set[str] = set()  # the job's files already written to the store
            redactor = Redactor.of(job.options, self.settings)
            report = self._reporter(job, tenant, stored, redactor)
            text_pages, outputs = await self.reader.read_all(job, report)
            if redactor is not None:
                redactor.mask_segments(outputs)
            result = assemble(
                job_id=entry.job_id,
                media_type=job.media_type,
                text_pages=text_pages,
                outputs=outputs,
                engine=self._engine_info(job),
                timings=self._timings(job, queued_ms),
                keep_furniture=job.options.keep_headers_footers,
            )
            reader = self.fields or FieldReader(self.settings.extract, None)
            lines = await after_text(reader, job.options, job.doc, result, outputs, redactor)
            searchable = await self._searchable_pdf(job, result, outputs, redactor, lines)
            result.images = sorted(name.removeprefix(FIGURES) for name in {*job.files, *stored})
            if self.results is not None:
                stored_at = await self.results.write(
                    job.job_id, tenant, filename, job.options, result, job.files, searchable
                )
                return Done(result, stored_at)
            await self._keep_files(job, searchable)
        return Done(result)

    def _reporter(
        self, job: JobPages, tenant: str, stored: set[str], redactor: Redactor | None
    ) -> Report:
        """Progress as page groups finish; with a store, their figures go to it at once
        (a long document's figures never pile up in memory until its end). A redacted
        job's pages are masked first: their original text is never stored."""

        async def report(done: int, total: int, pages: list[Page]) -> None:
            if redactor is not None:
                redactor.mask_pages(pages)
            if self.results is not None and job.files:
                await self.results.put_files(job.job_id, tenant, job.files, stored)
            finished = {page.number: msgspec.json.encode(page) for page in pages}
            ours = await through_outages(
                lambda: self.store.progress(job.job_id, self.me, done, total, finished),
                "progress",
            )
            if not ours:
                raise Abandoned("the job is no longer this worker's")

        return report

    async def _local_copy(
        self, job_id: str, record: JobRecord, folder: Path, exits: contextlib.ExitStack
    ) -> tuple[Path, str]:
        """The job's document as a file; a document gone from the store fails the job,
        unless the job was cancelled or deleted meanwhile (its document went with it)."""
        try:
            return await self.spool().local_copy(job_id, record, folder, exits)
        except BlobMissing as e:
            status = await through_outages(lambda: self.store.status(job_id), "status")
            if status != Status.PROCESSING:
                raise Abandoned(f"job is {status}" if status else "job is gone") from e
            message = "the document is gone from the store"
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, message) from e

    async def _searchable_pdf(
        self,
        job: JobPages,
        result: Result,
        outputs: list[EngineOutput],
        redactor: Redactor | None,
        lines: list[Line],
    ) -> Path | None:
        """The searchable PDF, when asked, as a file beside the document; a redacted job's
        PDF is always made, and is the redacted one (consumer/redact/pdf.py)."""
        path = job.doc.with_name(SEARCHABLE_PDF)
        if redactor is not None:
            by_page = redactor.lines_by_page(lines)
            await self.reader.rasteriser.redacted_pdf(
                str(job.doc), job.media_type, result.pages, by_page, self.reader.dpi(job), str(path)
            )
            result.searchable_pdf = True
            return path
        if not job.options.searchable_pdf:
            return None
        words = {n: w for out in outputs for n, w in out.words.items()}
        await self.reader.rasteriser.searchable_pdf(
            str(job.doc), job.media_type, result.pages, words, self.reader.dpi(job), str(path)
        )
        result.searchable_pdf = True
        return path

    async def _keep_files(self, job: JobPages, searchable: Path | None) -> None:
        """Store the job's figures and its searchable PDF in Redis, before it finishes."""
        files = dict(job.files)
        if searchable is not None:
            files[SEARCHABLE_PDF] = await asyncio.to_thread(searchable.read_bytes)
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
