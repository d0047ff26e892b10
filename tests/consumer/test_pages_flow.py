"""Pages of several jobs through one worker's flow: rendered ahead, shared fairly, cleaned up."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from support.documents import png, sized_pdf

from ocrq.consumer.circuit import EngineCircuit
from ocrq.consumer.engines.base import EngineOutput, PageImage
from ocrq.consumer.flow import PageFlow
from ocrq.consumer.metrics import WorkerMetrics
from ocrq.consumer.pages import JobPages, PageReader, Tally
from ocrq.consumer.pool import RecyclingPool
from ocrq.consumer.raster import Rasteriser
from ocrq.shared.schemas import JobOptions, Page
from ocrq.shared.settings import settings_of


class HeldEngine:
    """An engine whose requests wait until the test opens its gate; it notes what it read."""

    name, model, profile = "held", "held-model", "held"
    reads_scripts: frozenset[str] | None = None

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.running = self.peak = 0
        self.jobs: list[str] = []  # the job of each request, in the order they arrived

    async def recognise(
        self,
        pages: list[PageImage],
        *,
        profile: str | None = None,
        languages: str | None = None,
        layout: bool = True,
    ) -> EngineOutput:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.jobs.append(Path(pages[0].path).parent.name)
        try:
            await asyncio.wait_for(self.gate.wait(), 30)
        finally:
            self.running -= 1
        return EngineOutput(pages=[Page(number=p.number, width=p.width, height=p.height,
                                        markdown="text") for p in pages])  # fmt: skip

    async def warm_up(self) -> None:
        return None

    async def probe(self) -> bool:
        return True

    async def aclose(self) -> None:
        return None


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(3000):  # 30 s at most
        if condition():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("the condition never held")


def page_files(folder: Path) -> list[Path]:
    """Rendered pages left in any job folder."""
    return list(folder.rglob("page-*"))


@pytest.fixture
async def reader() -> AsyncIterator[PageReader]:
    settings = settings_of(detect_orientation=False)
    pool = RecyclingPool(lambda: concurrent.futures.ProcessPoolExecutor(max_workers=1), 1)
    engine = HeldEngine()
    circuit = EngineCircuit(engine.probe, settings)
    yield PageReader(
        settings=settings, engine=engine, circuit=circuit, metrics=WorkerMetrics(),
        rasteriser=Rasteriser(
            pool, settings.worker.max_image_pixels, settings.worker.max_image_side
        ),
        flow=PageFlow(slots=1, renderers=1, budget_bytes=10**9),
    )  # fmt: skip
    engine.gate.set()
    await circuit.aclose()
    await pool.aclose()


def job(tmp_path: Path, name: str, data: bytes, media_type: str) -> JobPages:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "document").write_bytes(data)
    return JobPages(name, folder / "document", media_type, JobOptions(dpi=72), folder, Tally())


async def no_report(done: int, total: int, pages: list[Page]) -> None:
    return None


async def test_a_small_job_behind_a_big_one_is_rendered_ahead_and_sent_next(
    reader: PageReader, tmp_path: Path
) -> None:
    engine, flow = reader.engine, reader.flow
    assert isinstance(engine, HeldEngine)
    big = job(tmp_path, "big", sized_pdf([(200, 300)] * 4), "application/pdf")
    small = job(tmp_path, "small", png(120, 80), "image/png")
    flow.admit("big")
    reading_big = asyncio.create_task(reader.read_all(big, no_report))
    await until(lambda: engine.running == 1)  # the only engine slot is taken
    flow.admit("small")
    reading_small = asyncio.create_task(reader.read_all(small, no_report))
    await until(lambda: flow.unrendered.get("small") == 0)  # rendered while the slot is held
    assert flow.render.ready_bytes > 0
    engine.gate.set()
    await asyncio.wait_for(asyncio.gather(reading_big, reading_small), 30)
    assert engine.jobs == ["big", "small", "big", "big", "big"] and engine.peak == 1
    assert flow.render.ready_bytes == 0 and flow.engine.used == 0
    assert page_files(tmp_path) == []  # every page file is gone


async def test_a_cancelled_job_frees_its_slots_and_its_rendered_pages(
    reader: PageReader, tmp_path: Path
) -> None:
    engine, flow = reader.engine, reader.flow
    assert isinstance(engine, HeldEngine)
    doomed = job(tmp_path, "doomed", sized_pdf([(200, 300)] * 3), "application/pdf")
    flow.admit("doomed")
    reading = asyncio.create_task(reader.read_all(doomed, no_report))
    await until(lambda: engine.running == 1 and flow.unrendered.get("doomed") == 0)
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    flow.forget("doomed")
    assert flow.engine.used == 0 and flow.render.used == 0 and flow.render.ready_bytes == 0
    assert page_files(tmp_path) == []
