"""Local CPU engine throughput: pages/s of RapidOCR at a given DPI, 1 vs 2 worker processes.

    .venv/bin/python -m bench.bench_local --pages 10 --dpi 150

Builds an N-page scanned-style PDF in memory (each page is a picture of text, no text
layer), rasterises every page with PyMuPDF into PNG files (timed), then OCRs them through
RapidOcrEngine (timed separately) once per worker count, side by side in one run.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import os

# pymupdf imports onnxruntime, whose usage telemetry starts at import: opt out first.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import argparse
import asyncio
import difflib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from bench.sample_documents import scanned_pdf
from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.rapidocr import RapidOcrEngine
from ocrq.shared.settings import load_settings


@dataclass(frozen=True)
class Row:
    workers: int
    pages: int
    raster_s: float
    startup_s: float
    ocr_s: float
    recall: float
    chars: float

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.ocr_s


def rasterise(pdf: bytes, dpi: int, folder: Path) -> list[PageImage]:
    """Render every page to a PNG file, as the consumer's rasteriser does."""
    images = []
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        for index, page in enumerate(doc):
            pixmap = page.get_pixmap(dpi=dpi)
            path = folder / f"page-{index + 1}.png"
            pixmap.save(str(path))
            images.append(
                PageImage(
                    number=index + 1,
                    path=str(path),
                    media_type="image/png",
                    width=pixmap.width,
                    height=pixmap.height,
                )
            )
    return images


def word_recall(texts: list[str], markdowns: list[str]) -> float:
    """Share of the rendered words found, as whole words, in the text of their page."""
    hits = total = 0
    for text, markdown in zip(texts, markdowns, strict=True):
        found = set(markdown.lower().replace(".", " ").split())
        words = text.lower().replace(".", " ").split()
        hits += sum(word in found for word in words)
        total += len(words)
    return hits / total if total else 0.0


def char_match(texts: list[str], markdowns: list[str]) -> float:
    """Similarity of rendered and recognised characters, whitespace ignored (0-1)."""
    truth = "".join("".join(text.lower().split()) for text in texts)
    seen = "".join("".join(markdown.lower().split()) for markdown in markdowns)
    return difflib.SequenceMatcher(None, truth, seen, autojunk=False).ratio()


async def measure(pdf: bytes, texts: list[str], dpi: int, workers: int, folder: Path) -> Row:
    """Rasterise, start the pool, then OCR all pages in one call; each stage timed."""
    started = time.perf_counter()
    images = rasterise(pdf, dpi, folder)
    raster_s = time.perf_counter() - started
    settings = load_settings({}, local_workers=workers, engine_timeout_s=120.0 * len(images))
    engine = RapidOcrEngine(settings)
    try:
        started = time.perf_counter()
        await engine.warm_up()
        startup_s = time.perf_counter() - started
        started = time.perf_counter()
        output = await engine.recognise(images)
        ocr_s = time.perf_counter() - started
    finally:
        await engine.aclose()
    markdowns = [page.markdown or "" for page in output.pages]
    recall, chars = word_recall(texts, markdowns), char_match(texts, markdowns)
    return Row(workers, len(images), raster_s, startup_s, ocr_s, recall, chars)


def print_table(rows: list[Row], dpi: int) -> None:
    """The results, one row per worker count, and the pages/s ratio of most to fewest."""
    print(f"local engine, {dpi} DPI, {os.cpu_count()} CPUs")
    print("workers  pages  raster s  startup s  OCR s  pages/s  word recall  char match")
    for r in rows:
        print(
            f"{r.workers:>7}  {r.pages:>5}  {r.raster_s:>8.2f}  {r.startup_s:>9.2f}  "
            f"{r.ocr_s:>5.2f}  {r.pages_per_s:>7.2f}  {r.recall:>11.1%}  {r.chars:>10.1%}"
        )
    if len(rows) >= 2:
        fewest = min(rows, key=lambda r: r.workers)
        most = max(rows, key=lambda r: r.workers)
        print(
            f"speedup {most.workers} vs {fewest.workers} workers (pages/s ratio): "
            f"{most.pages_per_s / fewest.pages_per_s:.2f}x"
        )


async def run(pages: int, dpi: int, worker_counts: list[int], base: str | None) -> None:
    """Measure each worker count on the same document and print the table."""
    pdf, texts = scanned_pdf(pages)
    rows = []
    for workers in worker_counts:
        with tempfile.TemporaryDirectory(prefix="ocrq-bench-", dir=base) as folder:
            rows.append(await measure(pdf, texts, dpi, workers, Path(folder)))
    print_table(rows, dpi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--dpi", type=int, default=150)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    # Page images go where the consumer puts them: RAM-backed /dev/shm when there is one.
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    asyncio.run(run(args.pages, args.dpi, counts, base))


if __name__ == "__main__":
    main()
