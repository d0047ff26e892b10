"""The pages of one job: text layers where good, the rest rendered and recognised in batches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocrq.consumer.circuit import EngineCircuit
from ocrq.consumer.doubts import review_pages
from ocrq.consumer.engines.base import Engine, EngineOutput
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.raster import Rasteriser
from ocrq.shared.schemas import JobOptions, Page
from ocrq.shared.settings import Settings

# Called with (pages_done, pages_total) as pages finish; raises to stop the job.
Report = Callable[[int, int], Awaitable[None]]


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

    doc: Path
    media_type: str
    options: JobOptions
    folder: Path  # the job's scratch folder: rendered pages live here until recognised
    tally: Tally


def remove_files(paths: list[str]) -> None:
    """Delete rendered pages as soon as the engine has them."""
    for path in paths:
        Path(path).unlink(missing_ok=True)


@dataclass(frozen=True)
class PageReader:
    """Turns a job's pages into text: rasteriser, engine, and the worker-wide engine slots."""

    settings: Settings
    rasteriser: Rasteriser
    engine: Engine
    circuit: EngineCircuit  # the engine's health, shared by every job of the worker
    slots: asyncio.Semaphore
    metrics: WorkerMetrics

    async def read_all(
        self, job: JobPages, report: Report
    ) -> tuple[list[Page], list[EngineOutput]]:
        """Inspect, take text layers, then recognise the rest; report as batches finish."""
        s = self.settings
        max_pages = min(job.options.max_pages or s.default_max_pages, s.default_max_pages)
        total = await self.rasteriser.inspect(str(job.doc), job.media_type, max_pages)
        await report(0, total)
        text_pages = await self._text_layer_pages(job, total)
        taken = {p.number for p in text_pages}
        todo = [i for i in range(total) if i + 1 not in taken]
        job.tally.pages_done = len(text_pages)
        size = job.options.batch_size
        batches = [todo[i : i + size] for i in range(0, len(todo), size)]
        outputs: list[EngineOutput] = []
        tasks = [asyncio.ensure_future(self._batch(job, b)) for b in batches]
        try:
            for next_done in asyncio.as_completed(tasks):
                out = await next_done
                outputs.append(out)
                job.tally.pages_done += len(out.pages)
                await report(job.tally.pages_done, total)
        finally:  # one failed batch fails the job: stop its siblings
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return text_pages, outputs

    def dpi(self, job: JobPages) -> int:
        """The job's DPI, else the worker's default."""
        return job.options.dpi or self.settings.default_dpi

    def _wants_text_layer(self, job: JobPages) -> bool:
        if job.media_type != "application/pdf":
            return False
        mode = job.options.text_layer
        if mode is None:  # default: off for vLLM (it reads fine print), auto for local
            mode = "off" if self.engine.name == "vllm" else "auto"
        return mode == "auto"

    async def _text_layer_pages(self, job: JobPages, total: int) -> list[Page]:
        if not self._wants_text_layer(job):
            return []
        pages = []
        for index in range(total):
            page = await self.rasteriser.text_layer(str(job.doc), index, self.dpi(job))
            if page is not None:
                pages.append(page)
        return pages

    async def _batch(self, job: JobPages, indices: list[int]) -> EngineOutput:
        """Render a micro-batch just in time, recognise it under the global limit, drop it."""
        async with self.slots:
            started = time.monotonic()
            images = [
                await self.rasteriser.render(
                    str(job.doc), job.media_type, i, self.dpi(job), str(job.folder)
                )
                for i in indices
            ]
            if self.settings.detect_orientation:
                images = [await self.rasteriser.upright(image) for image in images]
            raster_s = time.monotonic() - started
            job.tally.raster_s += raster_s
            self.metrics.stage_seconds.labels("raster").observe(raster_s)
            started = time.monotonic()
            try:
                out = await self.circuit.call(
                    lambda: self.engine.recognise(
                        images, profile=job.options.profile, languages=job.options.languages
                    ),
                    on_error=lambda e: self.metrics.engine_errors.labels(e.code.value).inc(),
                )
            finally:
                await asyncio.to_thread(remove_files, [image.path for image in images])
            review_pages(
                out.pages, images, self.engine.reads_scripts, self.settings.doubtful_confidence
            )
            infer_s = time.monotonic() - started
            job.tally.infer_s += infer_s
            self.metrics.stage_seconds.labels("inference").observe(infer_s)
            return out
