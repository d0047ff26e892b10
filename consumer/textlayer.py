"""Born-digital PDFs: take a page's embedded text layer instead of OCR when it is good.

Heuristic for a "good" text layer (all must hold, else the page goes to the OCR engine):

* at least ``MIN_CHARS`` non-space characters: a page with only a page number or a few stray
  glyphs is more likely a scan with a stamp than a text page;
* at least ``MIN_PRINTABLE`` of those characters printable and not U+FFFD: fonts without a
  usable Unicode map extract as control, private-use or replacement characters;
* at least ``MIN_WORDLIKE`` of them letters or digits: broken encodings also come out as runs
  of punctuation;
* when images cover more than ``MAX_IMAGE_COVER`` of the page, at least ``MIN_CHARS_OVER_IMAGE``
  characters: a scan with a caption or a stamp needs OCR, a scan with a full invisible OCR
  layer (a searchable scan) does not.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import pymupdf

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Block, Page

MIN_CHARS = 32
MIN_PRINTABLE = 0.95
MIN_WORDLIKE = 0.5
MAX_IMAGE_COVER = 0.5
MIN_CHARS_OVER_IMAGE = 200
_TEXT_BLOCK = 0


def _is_clean(char: str) -> bool:
    return char.isprintable() and char != "\ufffd"


def text_is_good(text: str, image_cover: float) -> bool:
    """Whether extracted text passes the heuristic in this module's docstring."""
    chars = [c for c in text if not c.isspace()]
    if len(chars) < MIN_CHARS:
        return False
    if sum(map(_is_clean, chars)) < MIN_PRINTABLE * len(chars):
        return False
    if sum(c.isalnum() for c in chars) < MIN_WORDLIKE * len(chars):
        return False
    return image_cover <= MAX_IMAGE_COVER or len(chars) >= MIN_CHARS_OVER_IMAGE


def _image_cover(page: pymupdf.Page) -> float:
    """The share of the page area covered by images (overlaps may count twice; capped at 1)."""
    page_area = max(float(page.rect.width * page.rect.height), 1.0)
    covered = 0.0
    for info in page.get_image_info():
        box = pymupdf.Rect(info["bbox"]) & page.rect
        if not box.is_empty:
            covered += float(box.width * box.height)
    return min(covered / page_area, 1.0)


def _block(raw: tuple[float, ...], text: str, page: pymupdf.Page, zoom: float) -> Block:
    # Extraction coordinates are in the unrotated page; results use the page as displayed.
    box = (pymupdf.Rect(raw[:4]) * page.rotation_matrix) & page.rect
    width, height = page.rect.width or 1.0, page.rect.height or 1.0
    bbox = [box.x0 / width, box.y0 / height, box.x1 / width, box.y1 / height]
    bbox_px = [round(v * zoom) for v in (box.x0, box.y0, box.x1, box.y1)]
    return Block(label="text", text=text, bbox=[round(v, 4) for v in bbox], bbox_px=bbox_px)


def extract_text_page(path: str, index: int, dpi: int) -> Page | None:
    """Page ``index`` (0-based) from its text layer when that layer is good, else None.

    Blocks keep MuPDF's content-stream order, which follows the author's reading order
    (a geometric sort would interleave columns).
    """
    try:
        with pymupdf.open(path, filetype="pdf") as doc:
            return _page_from_text_layer(doc.load_page(index), dpi)
    except Exception as e:  # MuPDF raises several unrelated types for damaged input
        message = f"the text of page {index + 1} cannot be read"
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, message) from e


def _page_from_text_layer(page: pymupdf.Page, dpi: int) -> Page | None:
    raw_blocks = [b for b in page.get_text("blocks") if b[6] == _TEXT_BLOCK]
    texts = [str(b[4]).strip() for b in raw_blocks]
    if not text_is_good("".join(texts), _image_cover(page)):
        return None
    zoom = dpi / 72.0
    size = (page.rect * pymupdf.Matrix(zoom, zoom)).irect
    blocks = [
        _block(raw, text, page, zoom) for raw, text in zip(raw_blocks, texts, strict=True) if text
    ]
    return Page(
        number=page.number + 1,
        width=int(size.width),
        height=int(size.height),
        markdown="\n\n".join(block.text for block in blocks),
        blocks=blocks,
        source="text_layer",
    )
