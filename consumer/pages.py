"""The pages of one job: text layers where good, the rest rendered and recognised in groups.

A page group is the pages sent in one engine request (the job's ``batch_size`` of them).
Each group is rendered ahead of the engine, outside any engine slot, then waits for one
(consumer/flow.py says how both turns are shared between the worker's jobs).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocrq.consumer.circuit import EngineCircuit
from ocrq.consumer.doubts import review_pages
from ocrq.consumer.engines.base import Engine, EngineOutput, PageImage
from ocrq.consumer.flow import PageFlow
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.raster import Rasteriser
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.page_ranges import selected_pages
from ocrq.shared.render.markdown import page_markdown
from ocrq.shared.schemas import JobOptions, Page
from ocrq.shared.settings import Settings
from ocrq.shared.tracing import span

# Called with (pages_done, pages_total, the pages just finished); raises to stop the job.
Report = Callable[[int, int, list[Page]], Awaitable[None]]
# A document may be longer than max_pages when the job names the pages to read: inspection
# then only guards against absurd page counts, and the pages named count against max_pages.
MAX_INSPECTED_PAGES = 100_000


@dataclass
class Tally:
    """How far one job has got: pages done, and seconds spent in each stage."""

    pages_done: int = 0
    raster_s: float = 0.0
    infer_s: float = 0.0
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class JobPages:
    """One job's document on disk, its options, and its tally."""

    job_id: str
    doc: Path
    media_type: str
    options: JobOptions
    folder: Path  # the job's scratch folder: rendered pages live here until recognised
    tally: Tally
    # Files the job keeps with its result: figure crops ("images/p1-1.png" → PNG bytes).
    files: dict[str, bytes] = field(default_factory=dict)
    # The most pages it may read; 0: OCRQ_DEFAULT_MAX_PAGES (documents by reference have
    # OCRQ_MAX_SOURCE_PAGES, consumer/documents.py).
    page_limit: int = 0


def remove_files(paths: list[str]) -> None:
    """Delete rendered pages as soon as the engine has them."""
    for path in paths:
        Path(path).unlink(missing_ok=True)


def files_size(images: list[PageImage]) -> int:
    """Bytes the rendered pages take on disk."""
    return sum(os.stat(image.path).st_size for image in images)


@dataclass(frozen=True)
class PageReader:
    """Turns a job's pages into text: rasteriser, engine, and the worker-wide page flow."""

    settings: Settings
    rasteriser: Rasteriser
    engine: Engine
    circuit: EngineCircuit  # the engine's health, shared by every job of the worker
    flow: PageFlow  # rendering and engine turns, shared fairly by every job of the worker
    metrics: WorkerMetrics

    async def read_all(
        self, job: JobPages, report: Report
    ) -> tuple[list[Page], list[EngineOutput]]:
        """Inspect, take text layers, then recognise the rest; report as page groups finish."""
        chosen, total = await self._chosen_pages(job)
        await report(0, total, [])
        text_pages = await self._text_layer_pages(job, chosen)
        taken = {p.number for p in text_pages}
        todo = [i for i in chosen if i + 1 not in taken]
        job.tally.pages_done = len(text_pages)
        if text_pages:
            await report(job.tally.pages_done, total, self._finished(job, text_pages))
        size = job.options.batch_size
        groups = [todo[i : i + size] for i in range(0, len(todo), size)]
        self.flow.plan(job.job_id, len(groups))
        outputs: list[EngineOutput] = []
        tasks = [asyncio.ensure_future(self._page_group(job, g)) for g in groups]
        try:
            for next_done in asyncio.as_completed(tasks):
                out = await next_done
                outputs.append(out)
                job.tally.pages_done += len(out.pages)
                await report(job.tally.pages_done, total, self._finished(job, out.pages))
        finally:  # one failed page group fails the job: stop its siblings
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return text_pages, outputs

    async def _chosen_pages(self, job: JobPages) -> tuple[list[int], int]:
        """The 0-based pages the job reads (its ``pages`` option, else all) and their count."""
        ceiling = job.page_limit or self.settings.worker.default_max_pages
        max_pages = min(job.options.max_pages or ceiling, ceiling)
        cap = max_pages if job.options.pages is None else MAX_INSPECTED_PAGES
        in_document = await self.rasteriser.inspect(str(job.doc), job.media_type, cap)
        chosen = selected_pages(job.options.pages, in_document)
        if len(chosen) > max_pages:
            message = f"options.pages names {len(chosen)} pages, over the limit of {max_pages}"
            raise OcrqError(ErrorCode.TOO_MANY_PAGES, message)
        return chosen, len(chosen)

    def _finished(self, job: JobPages, pages: list[Page]) -> list[Page]:
        """Pages just read, their Markdown rendered from their blocks (a page whose text
        went to a multi-page segment keeps no Markdown of its own)."""
        keep = job.options.keep_headers_footers
        for page in pages:
            if page.markdown is not None:
                page.markdown = page_markdown(page, keep_furniture=keep)
        return pages

    def dpi(self, job: JobPages) -> int:
        """The job's DPI, else the worker's default."""
        return job.options.dpi or self.settings.worker.default_dpi

    def _wants_text_layer(self, job: JobPages) -> bool:
        if job.media_type != "application/pdf":
            return False
        mode = job.options.text_layer
        if mode is None:  # default: off for vLLM (it reads fine print), auto for local
            mode = "off" if self.engine.name == "vllm" else "auto"
        return mode == "auto"

    async def _text_layer_pages(self, job: JobPages, chosen: list[int]) -> list[Page]:
        if not self._wants_text_layer(job):
            return []
        # The layout model takes most of a second a page: the pool's processes read a
        # window of pages at once, and other jobs' renders queue between windows.
        window = max(1, self.settings.worker.raster_workers)
        pages = []
        for start in range(0, len(chosen), window):
            reads = [
                self.rasteriser.text_layer(str(job.doc), index, self.dpi(job), job.options.layout)
                for index in chosen[start : start + window]
            ]
            for found in await asyncio.gather(*reads):
                if found is not None:
                    page, figures = found
                    if not job.options.redact:  # a crop could show what is masked
                        job.files.update(figures)
                    pages.append(page)
        return pages

    async def _page_group(self, job: JobPages, indices: list[int]) -> EngineOutput:
        """Render a page group ahead of the engine, recognise it in an engine slot, drop it."""
        images: list[PageImage] = []
        try:
            async with self.flow.render_turn(job.job_id) as rendered:
                images = await self._render(job, indices)
                rendered.size = await asyncio.to_thread(files_size, images)
            waited = time.monotonic()
            async with self.flow.engine_turn(job.job_id, rendered):
                self.metrics.stage_seconds.labels("engine_wait").observe(time.monotonic() - waited)
                out = await self._recognise(job, images)
            has_figures = any(b.label == "figure" for page in out.pages for b in page.blocks)
            if has_figures and not job.options.redact:  # a crop could show what is masked
                out.pages, figures = await self.rasteriser.figures(images, out.pages)
                job.files.update(figures)
            return out
        finally:
            await asyncio.to_thread(remove_files, [image.path for image in images])

    async def _render(self, job: JobPages, indices: list[int]) -> list[PageImage]:
        """The group's pages as files in the job's folder, turned upright when asked."""
        started = time.monotonic()
        images, dpi = [], self.dpi(job)
        for i in indices:
            with span("ocrq.page.render", {"ocrq.page": i + 1, "ocrq.dpi": dpi}):
                image = await self.rasteriser.render(
                    str(job.doc), job.media_type, i, dpi, str(job.folder)
                )
                if self.settings.ocr.detect_orientation:
                    image = await self.rasteriser.upright(image)
            images.append(image)
        raster_s = time.monotonic() - started
        job.tally.raster_s += raster_s
        self.metrics.stage_seconds.labels("raster").observe(raster_s)
        return images

    async def _recognise(self, job: JobPages, images: list[PageImage]) -> EngineOutput:
        """One engine call through the circuit, its pages reviewed for doubts."""
        started = time.monotonic()

        async def call() -> EngineOutput:  # one span per attempt the circuit lets through
            named = {"ocrq.engine": self.engine.name, "ocrq.pages": [i.number for i in images]}
            with span("ocrq.engine.call", named, kind="client"):
                return await self.engine.recognise(
                    images,
                    profile=job.options.profile,
                    languages=job.options.languages,
                    layout=job.options.layout,
                )

        out = await self.circuit.call(
            call, on_error=lambda e: self.metrics.engine_errors.labels(e.code.value).inc()
        )
        review_pages(
            out.pages, images, self.engine.reads_scripts, self.settings.ocr.doubtful_confidence
        )
        infer_s = time.monotonic() - started
        job.tally.infer_s += infer_s
        self.metrics.stage_seconds.labels("inference").observe(infer_s)
        return out
