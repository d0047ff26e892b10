"""A personnel form made with PyMuPDF: personal data of every kind, beside ordinary text."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import pymupdf
import tesserocr
from PIL import Image

from ocrq.consumer.engines.tesseract import tessdata_dir

# Each value and its kind; all valid (check digits hold), all fictitious.
PERSONAL: dict[str, str] = {
    "jane.roe@example.org": "email",
    "+44 117 496 0123": "phone",
    "GB82 WEST 1234 5698 7654 32": "iban",
    "4111 1111 1111 1111": "credit_card",
    "123-45-6789": "national_id",
    "14/07/1985": "date_of_birth",
}
FORM_LINES: tuple[str, ...] = (
    "Harbourside Shipping Ltd - New starter form",
    "Name: Jane Roe",
    "Email: jane.roe@example.org",
    "Phone: +44 117 496 0123",
    "Date of birth: 14/07/1985",
    "Start date: 02/09/2024",
    "SSN: 123-45-6789",
    "Salary account IBAN: GB82 WEST 1234 5698 7654 32",
    "Company card: 4111 1111 1111 1111",
    "Department: Logistics and planning",
)
KEPT = ("Harbourside", "Logistics", "02/09/2024")  # text that is not personal stays


def form_pdf() -> bytes:
    """The form, born-digital: its text layer is read."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for index, line in enumerate(FORM_LINES):
        page.insert_text((72, 90 + 32 * index), line, fontsize=14, fontname="helv")
    return bytes(doc.tobytes())


def form_scan(dpi: int = 200) -> bytes:
    """The same form as a scan: one page image, no text layer (the engine reads it)."""
    pixmap = pymupdf.open(stream=form_pdf())[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_image(page.rect, stream=pixmap.tobytes("png"))
    return bytes(doc.tobytes())


def variants(value: str) -> list[str]:
    """A value as it may be written anywhere: as printed, without spaces or dashes."""
    bare = value.replace(" ", "").replace("-", "")
    return sorted({value, value.replace(" ", ""), bare, value.lower()})


def holds_any(text: str | bytes, values: list[str]) -> list[str]:
    """The values that ``text`` still holds, in any of their forms (each value once)."""
    data = text.decode(errors="replace") if isinstance(text, bytes) else text
    folded = data.lower()
    return [value for value in values if any(v.lower() in folded for v in variants(value))]


def ocr_of_pdf(pdf: bytes) -> str:
    """What Tesseract reads in the PDF's page images (at 200 dpi): what a reader sees."""
    texts = []
    for page in pymupdf.open(stream=pdf):
        pixmap = page.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY)
        image = Image.frombytes("L", (pixmap.width, pixmap.height), pixmap.samples)
        texts.append(tesserocr.image_to_text(image, path=tessdata_dir(), lang="eng"))
    return "\n".join(texts)
