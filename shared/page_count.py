"""How many pages an uploaded document has, read cheaply for the page quotas at upload."""

from __future__ import annotations

import io
import logging

PDF = "application/pdf"
TIFF = "image/tiff"


def document_pages(media_type: str, payload: bytes | None) -> int:
    """The document's pages: a PDF's page tree, a TIFF's frames, 1 for anything else.

    A document that cannot be read here counts as one page: the worker reads it properly
    and fails it with its own code.
    """
    if not payload:
        return 1  # a document by reference (URL, object store): read by the worker
    try:
        if media_type == PDF:
            return max(1, _pdf_pages(payload))
        if media_type == TIFF:
            return max(1, _tiff_frames(payload))
    except Exception:  # any unreadable document counts as one page
        return 1
    return 1


def _pdf_pages(payload: bytes) -> int:
    import pypdf  # the producer's extra brings it; only page quotas need it

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged file is the worker's to report
    reader = pypdf.PdfReader(io.BytesIO(payload), strict=False)
    if reader.is_encrypted:
        reader.decrypt("")
    return reader.get_num_pages()


def _tiff_frames(payload: bytes) -> int:
    from PIL import Image

    with Image.open(io.BytesIO(payload)) as image:
        return int(getattr(image, "n_frames", 1))
