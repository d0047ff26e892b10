"""Page image formats side by side: bytes per page, encode time, and what OCR reads from each.

Used by bench_raster.py. The vLLM engine sends each page base64-encoded in the request body,
so bytes per page is request size; the local engine decodes the file itself. OCR quality is
measured with the local engine (Tesseract, in this process) against the text the scan was
made from; a GPU model's reading of JPEG artefacts is not measurable on this machine.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pymupdf
from PIL import Image

from bench.bench_local import char_match
from ocrq.consumer.engines import tesseract

Encoder = Callable[[pymupdf.Pixmap], bytes]


def _pillow(pixmap: pymupdf.Pixmap) -> Image.Image:
    return Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)


def _pillow_jpeg(quality: int) -> Encoder:
    def encode(pixmap: pymupdf.Pixmap) -> bytes:
        out = io.BytesIO()
        _pillow(pixmap).save(out, "JPEG", quality=quality)
        return out.getvalue()

    return encode


def _pillow_png(level: int) -> Encoder:
    def encode(pixmap: pymupdf.Pixmap) -> bytes:
        out = io.BytesIO()
        _pillow(pixmap).save(out, "PNG", compress_level=level)
        return out.getvalue()

    return encode


def _webp(quality: int, lossless: bool = False) -> Encoder:
    def encode(pixmap: pymupdf.Pixmap) -> bytes:
        out = io.BytesIO()
        _pillow(pixmap).save(out, "WEBP", quality=quality, lossless=lossless, method=0)
        return out.getvalue()

    return encode


ENCODERS: dict[str, tuple[str, Encoder]] = {
    "png (ocrq)": ("png", lambda p: p.tobytes("png")),
    "png grey": ("png", lambda p: pymupdf.Pixmap(pymupdf.csGRAY, p).tobytes("png")),
    "png Pillow lvl 1": ("png", _pillow_png(1)),
    "jpeg q90": ("jpg", lambda p: p.tobytes("jpeg", jpg_quality=90)),
    "jpeg q75": ("jpg", lambda p: p.tobytes("jpeg", jpg_quality=75)),
    "jpeg q90 Pillow": ("jpg", _pillow_jpeg(90)),
    "webp q90": ("webp", _webp(90)),
    "webp lossless": ("webp", _webp(100, lossless=True)),
}


def render(pdf: Path, dpi: int) -> list[pymupdf.Pixmap]:
    """Every page as an RGB pixmap, as the worker renders it."""
    zoom = pymupdf.Matrix(dpi / 72.0, dpi / 72.0)
    with pymupdf.open(pdf) as doc:
        return [page.get_pixmap(matrix=zoom, alpha=False) for page in doc]


LANGUAGES = "eng+fra"


def ocr_match(files: list[Path], pixmaps: list[pymupdf.Pixmap], texts: list[str]) -> float:
    """Char match of the local engine's reading of these files against their source text."""
    pages = [
        tesseract.ocr_page(str(f), n, p.width, p.height, LANGUAGES)
        for n, (f, p) in enumerate(zip(files, pixmaps, strict=False), 1)
    ]
    return char_match(texts[: len(pages)], [page.markdown or "" for page in pages])


def compare_formats(pdf: Path, texts: list[str], dpi: int, ocr_pages: int, scratch: Path) -> None:
    """Print one row per format: KiB/page, encode ms/page, and OCR char match."""
    pixmaps = render(pdf, dpi)
    if ocr_pages:
        tesseract.load_worker(LANGUAGES)
    print(f"\npage image formats, scanned PDF at {dpi} DPI ({len(pixmaps)} pages)")
    print(f"{'format':<14}{'KiB/page':>9}{'encode ms':>10}{'OCR char match':>16}")
    for name, (suffix, encode) in ENCODERS.items():
        sizes, times, files = [], [], []
        for index, pixmap in enumerate(pixmaps):
            started = time.perf_counter()
            data = encode(pixmap)
            times.append((time.perf_counter() - started) * 1000)
            sizes.append(len(data) / 1024)
            if index < ocr_pages:
                files.append(scratch / f"format-{index}.{suffix}")
                files[-1].write_bytes(data)
        match = f"{ocr_match(files, pixmaps, texts):.1%}" if files else "-"
        print(
            f"{name:<14}{statistics.mean(sizes):>9.0f}{statistics.median(times):>10.1f}{match:>16}"
        )
