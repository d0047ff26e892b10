"""The default local engine with its pool full: pages/s and CPU seconds a page.

    .venv/bin/python -m bench.bench_engine_pool --pdf ../shared/corpus/documents/tracemonkey.pdf
    PYTHONPATH=/tmp/before .venv/bin/python -m bench.bench_engine_pool --pdf PDF  # another tree

Renders the PDF's pages (or a generated scanned-style document) at --dpi, starts a
TesseractEngine with one process per usable core (the worker's default), and reads every
page in one `recognise` call, --rounds times. *CPU s a page* sums the user and system time of
the pool's processes over the reading (from /proc, through psutil): with the pool full, it
is what a page costs the machine. With PYTHONPATH naming another checkout, that checkout's
engine runs (the pool's processes inherit it), so two trees are measured by one script.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil


def rasterise(pdf: bytes, dpi: int, folder: Path, pages: int) -> list[Any]:
    """The first ``pages`` pages rendered to PNG files, as the consumer's rasteriser does."""
    from ocrq.consumer.raster import render_pdf_page

    source = folder / "document.pdf"
    source.write_bytes(pdf)
    import pymupdf

    with pymupdf.open(source) as doc:
        count = min(pages, doc.page_count)
    return [render_pdf_page(str(source), i, dpi, str(folder), 40_000_000) for i in range(count)]


def pool_cpu_s() -> float:
    """User and system seconds of this process's descendants (the forkserver and the pool)."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


async def measure(images: list[Any], rounds: int) -> list[tuple[float, float]]:
    """Each round's (wall s, pool CPU s) for reading every page in one call."""
    from ocrq.consumer.engines.tesseract import TesseractEngine
    from ocrq.shared.settings import load_settings

    settings = load_settings({}, engine_timeout_s=120.0 * len(images))
    engine = TesseractEngine(settings)
    rows = []
    try:
        await engine.warm_up()
        for _ in range(rounds):
            cpu, started = pool_cpu_s(), time.perf_counter()
            await engine.recognise(images)
            rows.append((time.perf_counter() - started, pool_cpu_s() - cpu))
    finally:
        await engine.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdf", type=Path, help="a PDF to read (default: a generated one)")
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--dpi", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.pdf:
        pdf = args.pdf.read_bytes()
    else:
        from bench.sample_documents import scanned_pdf

        pdf = scanned_pdf(args.pages)[0]
    with tempfile.TemporaryDirectory(prefix="ocrq-bench-", dir="/dev/shm") as folder:
        images = rasterise(pdf, args.dpi, Path(folder), args.pages)
        rows = asyncio.run(measure(images, args.rounds))
    import ocrq

    print(f"tree {Path(ocrq.__file__).resolve().parent.parent}, {len(images)} pages, ", end="")
    print(f"{len(os.sched_getaffinity(0))} cores, {args.dpi} DPI")
    for wall, cpu in rows:
        print(f"pages/s {len(images) / wall:5.2f}   CPU s a page {cpu / len(images):5.2f}")


if __name__ == "__main__":
    main()
