"""A page's layout (PyMuPDF's layout model, through pymupdf4llm) as blocks of BLOCK_LABELS.

The model classes each region (text, title, section-header, list-item, table, picture,
caption, formula, footnote, page-header, page-footer) and puts the regions in reading order;
tables come with their grid. Where each region's text comes from differs by path: the text
layer's lines for born-digital pages, the engine's words for scans (consumer/layout/scanned.py),
so the mapping here takes a ``RegionText`` that answers for the path.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pymupdf

from ocrq.consumer.layout.block_order import ordered_blocks
from ocrq.consumer.layout.layout_model import load_layout_model
from ocrq.consumer.layout.placement import mark_captions
from ocrq.shared.render.tables import table_html, table_markdown
from ocrq.shared.schemas import FURNITURE, Block, Cell, Page, Table

Rect = tuple[float, float, float, float]

LABELS = {
    "text": "text",
    "title": "title",
    "section-header": "heading",
    "list-item": "list_item",
    "picture": "figure",
    "table": "table",
    "caption": "caption",
    "formula": "formula",
    "footnote": "text",
    "page-header": "page_header",
    "page-footer": "page_footer",
}
# A heading set this much larger than the page's body text is display type: the title.
TITLE_RATIO = 2.0
# Heading levels by size over the body size: fixed steps, so that the same size gets the
# same level on every page (pages are read independently); compact_heading_levels then
# closes the gaps over the whole document. LaTeX's section/subsection/subsubsection (1.44,
# 1.2, 1.0) land on 3, 4, 6; the ACM format's (1.22, 1.0) on 4, 6.
LEVEL_STEPS = ((1.6, 2), (1.3, 3), (1.15, 4), (1.05, 5))
LOWEST_LEVEL = 6
# Glyphs that open a bulleted list item; a list item's text leaves them out (numbers and
# letters such as "1." or "a)" are kept: they carry meaning).
BULLETS = frozenset(
    "\u2022\u00b7\u2023\u2043\u2219\u25aa\u25ab\u25cf\u25cb\u25e6\u25a0\u25a1\u27a2\u27a4\u25ba\u25b6\u2013\u2014-*"
)
PAGE_NUMBER = re.compile(
    r"^\W*(page|p\.|seite|pagina)?\s*(\d{1,5}|[ivxlcdm]{1,8})(\s*(of|/|von|de|sur)\s*\d{1,5})?\W*$",
    re.IGNORECASE,
)
# A line ending in "letter-" before a line starting in lower case is a word broken at the
# line end ("com-" + "pile"); other hyphens at a line end are kept ("Just-in-" + "Time").
_BROKEN_WORD = re.compile(r"[^\W\d_]-$")


class RegionText(Protocol):
    """The text of a page's regions, as the path that read the page has it."""

    def lines(self, box: Any) -> list[str]:
        """The text lines of a layout box, top to bottom."""
        ...

    def confidence(self, box: Any) -> float | None:
        """The mean confidence of the box's text (0..1), where the path has one."""
        ...

    def cells(self, box: Any, grid: list[list[Rect]]) -> list[list[str]]:
        """The text of each cell of a table box's grid."""
        ...


@dataclass(frozen=True)
class Frame:
    """The displayed page a layout's points belong to: its size in points and in pixels."""

    width_pt: float
    height_pt: float
    width_px: int
    height_px: int

    def place(self, rect: Sequence[float]) -> tuple[list[float], list[int]]:
        """A rect in points as (bbox 0..1, bbox_px), clamped to the page; bbox from bbox_px."""
        sx, sy = self.width_px / (self.width_pt or 1.0), self.height_px / (self.height_pt or 1.0)
        x0 = min(max(0, math.floor(rect[0] * sx)), self.width_px)
        y0 = min(max(0, math.floor(rect[1] * sy)), self.height_px)
        x1 = min(max(x0, math.ceil(rect[2] * sx)), self.width_px)
        y1 = min(max(y0, math.ceil(rect[3] * sy)), self.height_px)
        w, h = max(self.width_px, 1), max(self.height_px, 1)
        bbox = [round(x0 / w, 4), round(y0 / h, 4), round(x1 / w, 4), round(y1 / h, 4)]
        return bbox, [x0, y0, x1, y1]


def parse_page(doc: pymupdf.Document, index: int) -> Any:
    """The layout of page ``index`` (pymupdf4llm's PageLayout).

    The first call in a process makes the layout model again with one thread a session
    (consumer/layout/layout_model.py); pymupdf4llm is imported here, in the processes that
    read pages, not wherever this module is.
    """
    load_layout_model()
    from pymupdf4llm.helpers.document_layout import parse_document
    from pymupdf4llm.ocr import OCRMode

    return parse_document(doc, pages=[index], use_ocr=OCRMode.NEVER).pages[0]


def page_blocks(layout: Any, frame: Frame, text: RegionText) -> list[Block]:
    """The layout's boxes as blocks in reading order (consumer/layout/block_order.py);
    empty text regions are dropped."""
    body = body_size(layout.boxes)
    blocks = []
    for box in layout.boxes:
        block = _block(box, frame, text, body)
        if block is not None:
            blocks.append(block)
    blocks = ordered_blocks(blocks)
    mark_captions(blocks)  # the model often calls a figure's caption text
    keep_lone_furniture(blocks)
    return blocks


def keep_lone_furniture(blocks: list[Block]) -> None:
    """A page whose only text the model calls a header or footer (a line at the top of an
    otherwise empty page) keeps it as text: furniture leaves the body, the page's text not."""
    if any(b.label not in FURNITURE and b.text for b in blocks):
        return
    for block in blocks:
        if block.label in ("page_header", "page_footer"):
            block.label = "text"


def _block(box: Any, frame: Frame, text: RegionText, body: float) -> Block | None:
    bbox, bbox_px = frame.place((box.x0, box.y0, box.x1, box.y1))
    label = LABELS.get(box.boxclass, "text")
    if label == "figure":
        return Block(label=label, text="", bbox=bbox, bbox_px=bbox_px)
    if label == "table":
        table = _table(box, frame, text)
        if table is not None:
            return Block(
                label="table",
                text=table_markdown(table),
                bbox=bbox,
                bbox_px=bbox_px,
                confidence=text.confidence(box),
                table=table,
            )
        label = "text"  # a table region without a grid: its text as a paragraph
    lines = text.lines(box)
    if label == "list_item":
        lines = _without_bullet(lines)
    content = join_lines(lines)
    if not content:
        return None
    level = None
    if label in ("title", "heading"):
        label, level = _heading(box, body)
    elif label in ("page_header", "page_footer") and PAGE_NUMBER.match(content):
        label = "page_number"
    return Block(
        label=label,
        text=content,
        bbox=bbox,
        bbox_px=bbox_px,
        confidence=text.confidence(box),
        level=level,
    )


def _heading(box: Any, body: float) -> tuple[str, int]:
    size = float(box.max_fontsize or 0)
    if box.boxclass == "title" or size >= TITLE_RATIO * body:
        return "title", 1
    return "heading", heading_level(size, body)


def heading_level(size: float, body: float) -> int:
    """A heading's level (2..6) from its font size over the body text's size."""
    ratio = size / body if body > 0 else 1.0
    return next((level for least, level in LEVEL_STEPS if ratio >= least), LOWEST_LEVEL)


def body_size(boxes: Sequence[Any]) -> float:
    """The page's body font size: the size most characters of its text regions are set in."""
    sizes: Counter[float] = Counter()
    for box in boxes:
        if box.boxclass in ("text", "list-item") and box.textlines:
            for line in box.textlines:
                for span in line["spans"]:
                    sizes[round(float(span["size"]), 1)] += len(span["text"].strip())
    if not sizes:  # a page of headings only: they count as body-sized
        sizes.update(float(box.max_fontsize) for box in boxes if box.max_fontsize)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _table(box: Any, frame: Frame, text: RegionText) -> Table | None:
    """The table's grid as cells (no spans: the layout's grid is a plain grid)."""
    info = box.table or {}
    grid = info.get("cells")
    if not grid or not info.get("row_count") or not info.get("col_count"):
        return None
    grid = [[tuple(map(float, rect)) for rect in row] for row in grid]
    texts = text.cells(box, grid)
    cells = []
    for r, row in enumerate(grid):
        for c, rect in enumerate(row):
            content = " ".join(str(texts[r][c] or "").split())
            cells.append(Cell(row=r, col=c, text=content, bbox=frame.place(rect)[0], header=r == 0))
    table = Table(rows=len(grid), cols=len(grid[0]), cells=cells)
    table.html = table_html(table)
    return table


def line_text(spans: Sequence[dict[str, Any]]) -> str:
    """A text line from its spans, left to right: a space where spans stand apart.

    pymupdf4llm drops whitespace spans, so a gap is where a space was (some PDFs set each
    word as its own span); spans that touch belong to one word.
    """
    out = ""
    previous_end = None
    for span in spans:
        piece = span["text"]
        x0, x1 = float(span["bbox"][0]), float(span["bbox"][2])
        gap = previous_end is not None and x0 - previous_end > 0.15 * float(span["size"])
        if out and (gap or out[-1].isspace() or piece[:1].isspace()):
            out = out.rstrip() + " "
            piece = piece.lstrip()
        out += piece
        previous_end = x1
    return out.strip()


def join_lines(lines: Sequence[str]) -> str:
    """Lines joined into one paragraph; words broken at a line end are made whole."""
    out = ""
    for raw in lines:
        line = " ".join(raw.split())
        if not line:
            continue
        if not out:
            out = line
        elif _BROKEN_WORD.search(out) and line[0].islower():
            out = out[:-1] + line
        elif out.endswith("-") and not out.endswith(" -"):
            out += line  # a compound broken at its hyphen: "Just-in-" + "Time"
        else:
            out += " " + line
    return out


def _without_bullet(lines: list[str]) -> list[str]:
    if not lines:
        return lines
    first = lines[0].lstrip()
    if first[:1] in BULLETS or _private_use(first[:1]):
        first = first[1:].lstrip()
    return [first, *lines[1:]]


def _private_use(char: str) -> bool:
    return bool(char) and 0xE000 <= ord(char) <= 0xF8FF


def compact_heading_levels(pages: Sequence[Page]) -> None:
    """Close gaps in the document's heading levels (3, 4, 6 → 2, 3, 4), in place.

    Levels come from font sizes page by page (heading_level); over the whole document the
    distinct levels used become 2, 3, ... in order, so the first heading level is 2 (1 is the
    title's).
    """
    used = sorted({b.level for p in pages for b in p.blocks if b.label == "heading" and b.level})
    ranks = {level: min(index + 2, LOWEST_LEVEL) for index, level in enumerate(used)}
    for page in pages:
        for block in page.blocks:
            if block.label == "heading" and block.level in ranks:
                block.level = ranks[block.level]
