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

from typing import Any

import pymupdf

from ocrq.consumer.layout.placement import insert_figure_text
from ocrq.consumer.layout.rects import centre_inside
from ocrq.consumer.layout.structure import (
    Frame,
    Rect,
    join_lines,
    line_text,
    page_blocks,
    parse_page,
)
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Block, Page

MIN_CHARS = 32
MIN_PRINTABLE = 0.95
MIN_WORDLIKE = 0.5
MAX_IMAGE_COVER = 0.5
MIN_CHARS_OVER_IMAGE = 200
# The layout's blocks must hold this share of the text layer's characters, else the page
# keeps MuPDF's plain blocks: pymupdf4llm reads horizontal lines only.
MIN_LAYOUT_SHARE = 0.8
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


def extract_text_page(path: str, index: int, dpi: int, layout: bool = True) -> Page | None:
    """Page ``index`` (0-based) from its text layer when that layer is good, else None.

    ``layout`` False keeps the text layer's own blocks, labelled text (no layout model).

    Blocks come from the layout model (consumer/layout/structure.py) in its reading order,
    with their labels, heading levels and table grids; figures carry no text until
    consumer/layout/figures.crop_pdf_figures crops them, and the words inside a figure follow
    it as a text block.
    """
    try:
        with pymupdf.open(path, filetype="pdf") as doc:
            return _page_from_text_layer(doc, index, dpi, layout)
    except Exception as e:  # MuPDF raises several unrelated types for damaged input
        message = f"the text of page {index + 1} cannot be read"
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, message) from e


def _page_from_text_layer(doc: pymupdf.Document, index: int, dpi: int, layout: bool) -> Page | None:
    page = doc.load_page(index)
    raw_blocks = [b for b in page.get_text("blocks") if b[6] == _TEXT_BLOCK]
    texts = [str(b[4]).strip() for b in raw_blocks]
    if not text_is_good("".join(texts), _image_cover(page)):
        return None
    zoom = dpi / 72.0
    size = (page.rect * pymupdf.Matrix(zoom, zoom)).irect
    frame = Frame(
        width_pt=float(page.rect.width),
        height_pt=float(page.rect.height),
        width_px=int(size.width),
        height_px=int(size.height),
    )
    # Extraction coordinates are in the unrotated page; blocks use the page as displayed
    # (as does the layout: parse_document removes the page's rotation).
    shown = [pymupdf.Rect(b[:4]) * page.rotation_matrix for b in raw_blocks]
    plain = [_text_block(r, t, frame) for r, t in zip(shown, texts, strict=True) if t]
    blocks = _layout_blocks(doc, index, frame, plain) if layout else plain
    return Page(
        number=index + 1,
        width=frame.width_px,
        height=frame.height_px,
        markdown="\n\n".join(block.text for block in blocks if block.text),
        blocks=blocks,
        source="text_layer",
    )


def _layout_blocks(
    doc: pymupdf.Document, index: int, frame: Frame, plain: list[Block]
) -> list[Block]:
    """The layout model's blocks, each figure followed by the text inside it; the plain ones
    where it missed text (vertical lines, say)."""
    found = parse_page(doc, index)
    blocks = _with_figure_text(page_blocks(found, frame, LayerText(found.fulltext)), plain)
    if _chars(blocks) < MIN_LAYOUT_SHARE * _chars(plain):
        return plain
    return blocks


def _text_block(rect: pymupdf.Rect, text: str, frame: Frame) -> Block:
    bbox, bbox_px = frame.place((rect.x0, rect.y0, rect.x1, rect.y1))
    return Block(label="text", text=text, bbox=bbox, bbox_px=bbox_px)


def _with_figure_text(blocks: list[Block], plain: list[Block]) -> list[Block]:
    """The blocks with each figure followed by the text layer's words inside it (a chart's
    labels, which the layout leaves out) as one text block, as vLLM's figures keep theirs;
    text that a region of the layout holds already is not repeated."""
    regions = [b.bbox for b in blocks if b.label != "figure" and len(b.bbox) == 4]
    loose = [p for p in plain if not any(centre_inside(p.bbox, r) for r in regions)]
    out = list(blocks)
    for figure in [b for b in blocks if b.label == "figure" and len(b.bbox) == 4]:
        inside = [p for p in loose if centre_inside(p.bbox, figure.bbox)]
        if inside:
            loose = [p for p in loose if not any(p is q for q in inside)]
            insert_figure_text(out, figure, _joined(inside))
    return out


def _joined(blocks: list[Block]) -> Block:
    """Plain blocks as one text block: their texts a line each, their boxes' union."""
    bbox = [min(b.bbox[i] for b in blocks) for i in (0, 1)]
    bbox += [max(b.bbox[i] for b in blocks) for i in (2, 3)]
    bbox_px = [min(b.bbox_px[i] for b in blocks) for i in (0, 1)]
    bbox_px += [max(b.bbox_px[i] for b in blocks) for i in (2, 3)]
    text = join_lines([line for b in blocks for line in b.text.splitlines()])
    return Block(label="text", text=text, bbox=bbox, bbox_px=bbox_px)


def _chars(blocks: list[Block]) -> int:
    return sum(len("".join(block.text.split())) for block in blocks)


class LayerText:
    """Region text from the page's text layer (pymupdf4llm's lines and table extract)."""

    def __init__(self, fulltext: list[dict[str, Any]]) -> None:
        self._fulltext = fulltext

    def lines(self, box: Any) -> list[str]:
        """The box's lines; a formula's (which the layout leaves without) from the page."""
        textlines = box.textlines
        if textlines is None:
            from pymupdf4llm.helpers.get_text_lines import get_raw_lines

            clip = pymupdf.Rect(box.x0, box.y0, box.x1, box.y1)
            raw = get_raw_lines(blocks=self._fulltext, clip=clip, ignore_invisible=False)
            textlines = [{"bbox": bbox, "spans": spans} for bbox, spans in raw]
        return [line_text(line["spans"]) for line in textlines]

    def confidence(self, box: Any) -> float | None:
        """A text layer has no confidence."""
        return None

    def cells(self, box: Any, grid: list[list[Rect]]) -> list[list[str]]:
        """The cell texts pymupdf4llm extracted for the table's grid."""
        extract = box.table.get("extract") or []
        return [
            [
                str(extract[r][c] or "") if r < len(extract) and c < len(extract[r]) else ""
                for c in range(len(row))
            ]
            for r, row in enumerate(grid)
        ]
