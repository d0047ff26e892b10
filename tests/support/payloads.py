"""Small documents and encodings for API tests (the heavy generators live in documents.py)."""

from __future__ import annotations

import base64

import pymupdf

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def small_pdf(text: str = "hello ocrq") -> bytes:
    """A one-page born-digital PDF."""
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), text)
    data: bytes = doc.tobytes()
    doc.close()
    return data


def fake_png(size: int) -> bytes:
    """Bytes that sniff as PNG, exactly ``size`` long (ingest checks the type, not the pixels)."""
    return PNG_MAGIC + b"\0" * (size - len(PNG_MAGIC))


def b64(data: bytes) -> str:
    """Standard base64 text."""
    return base64.b64encode(data).decode()
