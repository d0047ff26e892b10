"""Big scanned PDFs for the object store's tests and benchmarks, written page by page.

Every page is one JPEG of random noise (PyMuPDF encodes it): nothing compresses it, so a
1,500-page scan of ~200 KB pages really is 300 MB. The PDF is written object by object
straight to a file, so making it holds one page in memory, never the document.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import BinaryIO

import pymupdf

# 420 x 420 RGB noise at JPEG quality 75 is ~200 KB (measured with PyMuPDF 1.24).
NOISE_SIDE = 420
NOISE_QUALITY = 75
PAGE_PT = (595, 842)  # A4 in points: the scan's pixels stretched over it


def noise_jpeg(side: int = NOISE_SIDE, quality: int = NOISE_QUALITY) -> bytes:
    """A JPEG of random RGB noise, side x side pixels."""
    pix = pymupdf.Pixmap(pymupdf.csRGB, side, side, os.urandom(side * side * 3), False)
    jpeg: bytes = pix.tobytes("jpeg", jpg_quality=quality)
    return jpeg


def _page_objects(first: int, jpeg: bytes, side: int) -> list[bytes]:
    """Page, content stream and image objects (numbered from ``first``) for one scanned page."""
    width, height = PAGE_PT
    content = f"q {width} 0 0 {height} 0 0 cm /Im0 Do Q".encode()
    page = (
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width} {height}] "
        f"/Contents {first + 1} 0 R /Resources << /XObject << /Im0 {first + 2} 0 R >> >> >>"
    ).encode()
    image = (
        f"<< /Type /XObject /Subtype /Image /Width {side} /Height {side} "
        f"/ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode /Length {len(jpeg)} >>"
    ).encode()
    return [
        page,
        f"<< /Length {len(content)} >>".encode() + b"\nstream\n" + content + b"\nendstream",
        image + b"\nstream\n" + jpeg + b"\nendstream",
    ]


def write_noise_scan(out: BinaryIO, pages: int, side: int = NOISE_SIDE) -> None:
    """Write a ``pages``-page scan of noise JPEGs to ``out``, one page in memory at a time."""
    offsets: dict[int, int] = {}
    start = out.tell()

    def emit(number: int, body: bytes) -> None:
        offsets[number] = out.tell() - start
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")

    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    emit(1, b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{3 + 3 * i} 0 R" for i in range(pages))
    emit(2, f"<< /Type /Pages /Count {pages} /Kids [{kids}] >>".encode())
    for i in range(pages):
        first = 3 + 3 * i
        for n, body in enumerate(_page_objects(first, noise_jpeg(side), side)):
            emit(first + n, body)
    count = 3 + 3 * pages
    xref = out.tell() - start
    out.write(f"xref\n0 {count}\n0000000000 65535 f \n".encode())
    for number in range(1, count):
        out.write(f"{offsets[number]:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {count} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())


def noise_scan_pdf(pages: int, side: int = NOISE_SIDE) -> bytes:
    """A small noise scan in memory (a few pages: a document over the inline limit)."""
    out = io.BytesIO()
    write_noise_scan(out, pages, side)
    return out.getvalue()


def cached_noise_scan(folder: Path, pages: int, side: int = NOISE_SIDE) -> Path:
    """A noise scan of ``pages`` pages under folder, made once and reused (it takes a while)."""
    path = folder / f"ocrq-noise-scan-{pages}p-{side}px.pdf"
    if not path.exists():
        partial = path.with_suffix(".partial")
        with partial.open("wb") as out:
            write_noise_scan(out, pages, side)
        partial.rename(path)
    return path
