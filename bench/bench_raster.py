"""Rasterising: ocrq's renderer against a bare PyMuPDF loop and a pdftoppm subprocess.

    .venv/bin/python -m bench.bench_raster --pages 30 --dpis 150,200 --repeats 3

For a text PDF and a scanned PDF of N A4 pages, at each DPI, every method renders every page
to PNG files under /dev/shm, interleaved repeat by repeat so that load hits them alike:

- *bare*: one process, the document opened once, ``get_pixmap`` + ``save`` per page;
- *ocrq 1 proc*: ``render_pdf_page`` per page in one process (it reopens the document per
  page, so that a long PDF is never held whole);
- *ocrq pool*: what a worker does, every page through ``Rasteriser`` on its process pool
  (``OCRQ_RASTER_WORKERS``, default 2), already started;
- *pdftoppm*: one ``pdftoppm -r DPI -png`` subprocess per document, as the reference
  gateway does (skipped, and said so, when poppler-utils is not installed).

Then the peak RSS of one rendering process over a 30- and a 300-page PDF (each in a fresh
process), and the page image formats side by side: size, encode time, and what the local
OCR engine reads from each (``--ocr-pages`` pages per format; 0 skips it).
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import os

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # before pymupdf imports onnxruntime

import argparse
import asyncio
import multiprocessing
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pymupdf

from bench.raster_formats import compare_formats
from bench.sample_documents import scanned_pdf, text_pdf
from ocrq.consumer.main import raster_pool
from ocrq.consumer.raster import PDF, Rasteriser, render_pdf_page
from ocrq.shared.settings import Settings, load_settings

Method = Callable[[Path, int, Path], None]


def bare_loop(pdf: Path, dpi: int, out: Path) -> None:
    """The floor: open once, render and save every page."""
    zoom = pymupdf.Matrix(dpi / 72.0, dpi / 72.0)
    with pymupdf.open(pdf) as doc:
        for index, page in enumerate(doc):
            page.get_pixmap(matrix=zoom, alpha=False).save(str(out / f"p{index}.png"))


def ocrq_one_process(pdf: Path, dpi: int, out: Path, max_pixels: int = 80_000_000) -> None:
    """ocrq's page renderer, page by page, in this process."""
    with pymupdf.open(pdf) as doc:
        count = doc.page_count
    for index in range(count):
        render_pdf_page(str(pdf), index, dpi, str(out), max_pixels)


def pdftoppm(pdf: Path, dpi: int, out: Path) -> None:
    """One poppler subprocess for the whole document."""
    command = ["pdftoppm", "-r", str(dpi), "-png", str(pdf), str(out / "p")]
    subprocess.run(command, check=True, capture_output=True, timeout=600)


class PoolMethod:
    """Every page through the worker's Rasteriser and process pool, on one event loop."""

    def __init__(self, settings: Settings) -> None:
        self.loop = asyncio.new_event_loop()
        self.rasteriser = Rasteriser(
            raster_pool(settings), settings.worker.max_image_pixels, settings.worker.max_image_side
        )

    async def _render_all(self, pdf: Path, dpi: int, out: Path) -> None:
        count = await self.rasteriser.inspect(str(pdf), PDF, 10_000)
        renders = [self.rasteriser.render(str(pdf), PDF, i, dpi, str(out)) for i in range(count)]
        await asyncio.gather(*renders)

    def __call__(self, pdf: Path, dpi: int, out: Path) -> None:
        self.loop.run_until_complete(self._render_all(pdf, dpi, out))

    def close(self) -> None:
        self.loop.run_until_complete(self.rasteriser.pool.aclose())
        self.loop.close()


def timed(method: Method, pdf: Path, dpi: int, scratch: Path) -> float:
    """Seconds for one method over the whole document, into a fresh folder."""
    out = Path(tempfile.mkdtemp(dir=scratch))
    try:
        started = time.perf_counter()
        method(pdf, dpi, out)
        return time.perf_counter() - started
    finally:
        shutil.rmtree(out)


def speed_table(
    docs: dict[str, Path], dpis: list[int], methods: dict[str, Method], args: argparse.Namespace
) -> None:
    """Pages/s per method (median of repeats, min..max), then the target ratios."""
    for method in methods.values():  # warm every method once: imports, caches, fonts
        timed(method, docs["text"], 72, args.scratch)
    print(f"\n{'document':<10}{'dpi':>4}  " + "".join(f"{name:>24}" for name in methods))
    for label, pdf in docs.items():
        for dpi in dpis:
            runs: dict[str, list[float]] = {name: [] for name in methods}
            for _ in range(args.repeats):  # interleaved: load drifts hit every method alike
                for name, method in methods.items():
                    runs[name].append(args.pages / timed(method, pdf, dpi, args.scratch))
            cells = [
                f"{statistics.median(r):>8.1f} ({min(r):.1f}..{max(r):.1f})" for r in runs.values()
            ]
            print(f"{label:<10}{dpi:>4}  " + "".join(f"{c:>24}" for c in cells))
            print_ratios({name: statistics.median(r) for name, r in runs.items()})


def print_ratios(rates: dict[str, float]) -> None:
    """ocrq against the bare loop (target ≥ 0.90) and against pdftoppm (target ≥ 6)."""
    parts = [f"ocrq 1 proc / bare {rates['ocrq 1 proc'] / rates['bare']:.2f}"]
    parts.append(f"ocrq pool / bare {rates['ocrq pool'] / rates['bare']:.2f}")
    if "pdftoppm" in rates:
        parts.append(f"ocrq 1 proc / pdftoppm {rates['ocrq 1 proc'] / rates['pdftoppm']:.1f}x")
        parts.append(f"ocrq pool / pdftoppm {rates['ocrq pool'] / rates['pdftoppm']:.1f}x")
    print("              " + ", ".join(parts))


def status_kib(field: str) -> int:
    """A memory figure of this process from /proc/self/status (VmRSS now, VmHWM peak), KiB.

    Not getrusage's ru_maxrss: Linux carries that across exec, so a spawned child would
    report its parent's peak.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def peak_rss_of_render(pdf: str, dpi: int, out: str) -> tuple[int, int]:
    """In a fresh process: (RSS before, peak RSS after) rendering every page, in KiB."""
    before = status_kib("VmRSS")
    ocrq_one_process(Path(pdf), dpi, Path(out))
    return before, status_kib("VmHWM")


def long_scan(scan: Path, copies: int, target: Path) -> None:
    """The scanned PDF repeated `copies` times (its images copied, not shared)."""
    with pymupdf.open() as doc, pymupdf.open(scan) as part:
        for _ in range(copies):
            doc.insert_pdf(part)
        doc.save(target)


def rss_table(scratch: Path, scan: Path, dpi: int) -> None:
    """Peak RSS of one rendering process for 30 and 300 pages: flat means bounded."""
    print(f"\npeak RSS of one rendering process at {dpi} DPI (fresh process each, MiB)")
    ctx = multiprocessing.get_context("spawn")
    with pymupdf.open(scan) as doc:
        copies = max(1, 300 // doc.page_count)
    for label, pages in (("text", 30), ("text", 300), ("scan", 1), ("scan", copies)):
        pdf = scratch / f"rss-{label}-{pages}.pdf"
        if label == "text":
            pdf.write_bytes(text_pdf(7, pages))
        else:
            long_scan(scan, pages, pdf)
        with pymupdf.open(pdf) as doc:
            count = doc.page_count
        out = tempfile.mkdtemp(dir=scratch)
        with ctx.Pool(1) as pool:
            before, peak = pool.apply(peak_rss_of_render, (str(pdf), dpi, out))
        shutil.rmtree(out)
        size = pdf.stat().st_size / 2**20
        print(
            f"  {label} {count:>4} pages ({size:>5.1f} MiB PDF): before {before / 1024:.0f}, "
            f"peak {peak / 1024:.0f}, rendering added {(peak - before) / 1024:.0f}"
        )


def main() -> int:
    """Build the documents, time every method, then RSS and image formats."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--dpis", default="150,200")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ocr-pages", type=int, default=5, help="pages OCRed per image format")
    parser.add_argument("--parts", default="speed,rss,formats", help="which tables to print")
    args = parser.parse_args()
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    settings = load_settings({})
    print(f"{os.cpu_count()} CPUs, PyMuPDF {pymupdf.VersionBind}, load {os.getloadavg()[0]:.2f}")
    print(
        f"pages/s, median of {args.repeats} (min..max); "
        f"ocrq pool = {settings.worker.raster_workers} procs"
    )
    with tempfile.TemporaryDirectory(prefix="ocrq-bench-", dir=base) as name:
        args.scratch = Path(name)
        scan, texts = scanned_pdf(args.pages)
        docs = {"text": args.scratch / "text.pdf", "scan": args.scratch / "scan.pdf"}
        docs["text"].write_bytes(text_pdf(1, args.pages))
        docs["scan"].write_bytes(scan)
        pool = PoolMethod(settings)
        methods: dict[str, Method] = {
            "bare": bare_loop,
            "ocrq 1 proc": ocrq_one_process,
            "ocrq pool": pool,
        }
        if shutil.which("pdftoppm"):
            methods["pdftoppm"] = pdftoppm
        else:
            print("pdftoppm: not installed (apt install poppler-utils), column skipped")
        try:
            if "speed" in args.parts:
                timed(pool, docs["text"], 72, args.scratch)  # start the pool's processes untimed
                speed_table(docs, [int(d) for d in args.dpis.split(",")], methods, args)
        finally:
            pool.close()
        if "rss" in args.parts:
            rss_table(args.scratch, docs["scan"], settings.worker.default_dpi)
        if "formats" in args.parts:
            compare_formats(
                docs["scan"], texts, settings.worker.default_dpi, args.ocr_pages, args.scratch
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
