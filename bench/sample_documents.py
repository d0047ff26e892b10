"""Documents the benchmarks generate: text PDFs and scanned-style PDFs, with their text."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import random

import pymupdf

A4 = (595.0, 842.0)  # points
LINES_PER_PAGE = 40
WORDS = (
    "invoice payment customer account balance delivery order quantity price total contract "
    "service period amount currency schedule report quarter revenue margin shipment"
).split()
VOCABULARY = WORDS + "warehouse supplier address reference number date signature approval".split()
SCAN_DPI = 200  # resolution of the "scanner" that made the image pages


def text_pdf(doc_index: int, pages: int) -> bytes:
    """A PDF of `pages` A4 pages, each with LINES_PER_PAGE lines of 11 pt text."""
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=A4[0], height=A4[1])
        lines = [f"Document {doc_index} page {number}"]
        for line in range(LINES_PER_PAGE - 1):
            start = (doc_index + number + line) % len(WORDS)
            lines.append(" ".join(WORDS[start:] + WORDS[:start])[:90])
        page.insert_text((50, 60), "\n".join(lines), fontsize=11, fontname="helv")
    data: bytes = doc.tobytes()
    doc.close()
    return data


def page_text(rng: random.Random, number: int) -> str:
    """A heading and a few paragraphs of pseudo-business prose."""
    paragraphs = [
        " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(40, 70))).capitalize() + "."
        for _ in range(4)
    ]
    return f"Quarterly report page {number}\n\n" + "\n\n".join(paragraphs)


def scanned_pdf(pages: int, seed: int = 1) -> tuple[bytes, list[str]]:
    """An N-page PDF whose pages are only grey images of text; returns it and each page's text."""
    rng = random.Random(seed)
    texts = [page_text(rng, n) for n in range(1, pages + 1)]
    out = pymupdf.open()
    for text in texts:
        source = pymupdf.open()
        page = source.new_page(width=A4[0], height=A4[1])
        page.insert_textbox(pymupdf.Rect(60, 60, 535, 782), text, fontsize=12, fontname="helv")
        scan = page.get_pixmap(dpi=SCAN_DPI, colorspace=pymupdf.csGRAY)
        target = out.new_page(width=A4[0], height=A4[1])
        target.insert_image(target.rect, stream=scan.tobytes("png"))
        source.close()
    data: bytes = out.tobytes(deflate=True, garbage=3)  # scans are stored compressed
    out.close()
    return data, texts


def text_png(doc_index: int, dpi: int = 100) -> bytes:
    """One page of text_pdf as a PNG: an image upload, rendered as a scanner would."""
    with pymupdf.open(stream=text_pdf(doc_index, 1), filetype="pdf") as doc:
        data: bytes = doc[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).tobytes("png")
    return data
