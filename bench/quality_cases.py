"""More cases for bench/quality.py: receipts with their truth, and real pages turned askew.

Receipts (bench/documents/quality, SOURCES.md there) are photos and scans of till rolls with
a transcript per image (`<stem>.txt`). Skewed cases are pages of the other cases (scans,
renders, receipts) turned by 2-8 degrees on a white ground, as a page fed crooked into a
scanner comes out: the same pixels, so each reads against its own upright row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Protocol, TypeVar

import pymupdf
from PIL import Image

DOCUMENTS = Path(__file__).resolve().parent / "documents" / "quality"
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".tif", ".tiff"}
# (case, degrees counter-clockwise): scans, a prose render, a two-column render, a form,
# receipts; both directions, 2.5 to 8 degrees.
SKEWED = (
    ("phototest", 3.0),
    ("eurotext", -5.0),
    ("file_pdfjs_test", 2.5),
    ("tracemonkey", 8.0),
    ("160F-2019", -4.0),
    ("sroie-001", 4.0),
    ("sroie-002", -6.0),
)


class CaseLike(Protocol):
    name: str
    document: bytes
    images: list[Path]
    pages: int
    truth: str
    tesseract_dpi: int | None


C = TypeVar("C", bound=CaseLike)


def receipt_files(folder: Path = DOCUMENTS) -> Iterable[tuple[Path, str]]:
    """Each image of the folder that has a transcript beside it, with that transcript."""
    for path in sorted(folder.iterdir()):
        truth = path.with_suffix(".txt")
        if path.suffix.lower() in IMAGE_SUFFIXES and truth.is_file():
            yield path, truth.read_text()


def skewed_cases(cases: list[C], tmp: Path, only: str | None) -> list[C]:
    """The cases named in SKEWED, each page turned by its angle (image-only PDF for renders)."""
    by_name = {case.name: case for case in cases}
    out = []
    for name, angle in SKEWED:
        case = by_name.get(name)
        if case is None or (only and only not in name):
            continue
        images = [
            _turned(image, angle, tmp / f"{name}-skew{angle:g}-p{n}.png")
            for n, image in enumerate(case.images, 1)
        ]
        document = (
            _as_pdf(images, case.tesseract_dpi) if case.tesseract_dpi else images[0].read_bytes()
        )
        out.append(replace(case, name=f"{name}-skew{angle:g}", document=document, images=images))
    return out


def _turned(path: Path, angle: float, target: Path) -> Path:
    """The image turned about its centre, grown to keep its corners, white outside."""
    with Image.open(path) as image:
        dpi = image.info.get("dpi")
        upright = image.convert("RGB")
    turned = upright.rotate(
        angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=(255, 255, 255)
    )
    turned.save(target, format="PNG", **({"dpi": dpi} if dpi else {}))
    return target


def _as_pdf(images: list[Path], dpi: int) -> bytes:
    """An image-only PDF of these page images at `dpi`."""
    out = pymupdf.open()
    for image in images:
        pixmap = pymupdf.Pixmap(str(image))
        page = out.new_page(width=pixmap.width * 72 / dpi, height=pixmap.height * 72 / dpi)
        page.insert_image(page.rect, pixmap=pixmap)
    return bytes(out.tobytes(garbage=3, deflate=True))
