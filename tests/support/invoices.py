"""Invoices made with PyMuPDF: labels with values beside or below them, at known places."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import pymupdf

INVOICE_LINES: tuple[tuple[str, str], ...] = (
    ("", "NORTHWIND TRADING LTD"),
    ("", "12 Harbour Road, Bristol BS1 4DJ"),
    ("Invoice No:", "INV-2024-0042"),
    ("Date:", "14 March 2024"),
    ("Email:", "billing@northwind.example"),
    ("Phone:", "+44 117 496 0123"),
    ("IBAN:", "GB82 WEST 1234 5698 7654 32"),
    ("Subtotal", "100.00"),
    ("VAT 20%", "20.00"),
    ("Total", "120.00"),
)
INVOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "company": {"type": "string"},
        "invoice_number": {"type": "string"},
        "invoice_date": {"type": "string", "format": "date"},
        "email": {"type": "string"},
        "phone": {"type": "string"},
        "iban": {"type": "string"},
        "total": {"type": "number"},
    },
    "required": ["invoice_number", "total"],
}
EXPECTED = {
    "company": "NORTHWIND TRADING LTD",
    "invoice_number": "INV-2024-0042",
    "invoice_date": "2024-03-14",
    "email": "billing@northwind.example",
    "phone": "+441174960123",
    "iban": "GB82 WEST 1234 5698 7654 32",
    "total": 120.0,
}


def invoice_page(doc: pymupdf.Document, lines: tuple[tuple[str, str], ...]) -> pymupdf.Page:
    """One A4 page: each label at the left margin, its value at x=260 on the same line."""
    page = doc.new_page(width=595, height=842)
    y = 90.0
    for label, value in lines:
        if label:
            page.insert_text((72, y), label, fontsize=13, fontname="helv")
            page.insert_text((260, y), value, fontsize=13, fontname="helv")
        else:
            page.insert_text((72, y), value, fontsize=16 if y < 100 else 12, fontname="helv")
        y += 30
    return page


def invoice_pdf(lines: tuple[tuple[str, str], ...] = INVOICE_LINES) -> bytes:
    """A born-digital invoice (its text layer is read, not OCR)."""
    doc = pymupdf.open()
    invoice_page(doc, lines)
    return bytes(doc.tobytes())


def invoice_scan(lines: tuple[tuple[str, str], ...] = INVOICE_LINES, dpi: int = 200) -> bytes:
    """The same invoice as a scan: one page image, no text layer (the engine reads it)."""
    source = pymupdf.open(stream=invoice_pdf(lines))
    pixmap = source[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_image(page.rect, stream=pixmap.tobytes("png"))
    return bytes(doc.tobytes())


def value_box(pdf: bytes, text: str) -> tuple[float, float, float, float]:
    """Where ``text`` is printed on page 1, as 0..1 of the page."""
    page = pymupdf.open(stream=pdf)[0]
    [rect] = page.search_for(text)[:1]
    w, h = page.rect.width, page.rect.height
    return (rect.x0 / w, rect.y0 / h, rect.x1 / w, rect.y1 / h)
