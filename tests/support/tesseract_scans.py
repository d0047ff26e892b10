"""Scans read by the real Tesseract engine: one warmed-up engine, a PNG handed over as a page."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PIL import Image

from bench.edit_distance import levenshtein
from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.shared.schemas import Page
from ocrq.shared.settings import load_settings


@contextmanager
def running_tesseract(workers: int, reread: bool = True) -> Iterator[TesseractEngine]:
    """A warmed-up engine of ``workers`` processes (models load once per process), then closed;
    ``reread``: weak lines read again by the second recogniser (OCRQ_LOCAL_REREAD)."""
    tesseract = TesseractEngine(load_settings({}, local_workers=workers, local_reread=reread))
    asyncio.run(tesseract.warm_up())
    try:
        yield tesseract
    finally:
        asyncio.run(tesseract.aclose())


def png_page(path: Path) -> PageImage:
    """A PNG on disk as the rasteriser hands a page over: page 1, at the image's size."""
    with Image.open(path) as image:
        width, height = image.size
    return PageImage(number=1, path=str(path), media_type="image/png", width=width, height=height)


async def read_scan(engine: TesseractEngine, path: Path) -> Page:
    """The one page the engine reads from a PNG."""
    [page] = (await engine.recognise([png_page(path)])).pages
    return page


def markdown_cer(page: Page, truth: str) -> float:
    """Character error rate of the page's Markdown, case-folded (SROIE writes capitals)."""
    hypothesis = " ".join((page.markdown or "").split()).casefold()
    reference = " ".join(truth.split()).casefold()
    return levenshtein(hypothesis, reference) / len(reference)
