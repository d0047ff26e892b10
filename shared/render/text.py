"""Plain text: the body of a Result, one unit per block, units separated by blank lines.

The body is what the chunks tile (``chunks.py``): ``document_text`` is each unit's text
followed by its separator, ``UNIT_SEPARATOR`` between units and a final newline.
"""

from __future__ import annotations

import re

import msgspec

from ocrq.shared.render.markdown import heading_level, heading_text, is_body
from ocrq.shared.render.tables import table_tsv
from ocrq.shared.schemas import Block, Page, Result, Segment

UNIT_SEPARATOR = "\n\n"
FINAL_SEPARATOR = "\n"
_IMAGE_LINK = re.compile(r"^!\[[^\]]*\]\([^)]*\)$")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")


class BodyUnit(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of the body text and where it came from."""

    text: str  # plain text, without its separator
    label: str
    first_page: int
    last_page: int
    bbox: list[float] = msgspec.field(default_factory=list)
    level: int | None = None  # a heading's level (1: the title)
    rows: list[str] = msgspec.field(default_factory=list)  # a table's rows, tab-separated


def document_text(result: Result, *, keep_furniture: bool = False) -> str:
    """The body as plain text: blocks separated by blank lines, tables as tab-separated rows."""
    units = body_units(result, keep_furniture=keep_furniture)
    if not units:
        return ""
    return UNIT_SEPARATOR.join(unit.text for unit in units) + FINAL_SEPARATOR


def body_units(result: Result, *, keep_furniture: bool = False) -> list[BodyUnit]:
    """The body's units in reading order (pages in order, blocks in order within a page)."""
    by_first = {s.first_page: s for s in result.segments}
    units: list[BodyUnit] = []
    for page in sorted(result.pages, key=lambda p: p.number):
        if page.markdown is None:
            segment = by_first.get(page.number)
            if segment is not None:
                units += _segment_units(segment)
        elif page.blocks:
            units += _block_units(page, keep_furniture)
        else:
            units += _paragraph_units(page.markdown, page.number, page.number)
    return units


def block_text(block: Block) -> str:
    """A block's plain text: a heading without hashes, a table's rows, no image links."""
    text = block.text.strip()
    if block.label in ("title", "heading"):
        return heading_text(text)
    if block.label == "table" and block.table is not None and block.table.cells:
        return table_tsv(block.table)
    if block.label == "figure" and _IMAGE_LINK.match(text):
        return ""
    return text


def _block_units(page: Page, keep_furniture: bool) -> list[BodyUnit]:
    units = []
    for block in page.blocks:
        text = block_text(block) if is_body(block, keep_furniture) else ""
        if not text:
            continue
        is_grid = block.label == "table" and block.table is not None and bool(block.table.cells)
        units.append(
            BodyUnit(
                text=text,
                label=block.label,
                first_page=page.number,
                last_page=page.number,
                bbox=list(block.bbox),
                level=heading_level(block) if block.label in ("title", "heading") else None,
                rows=text.split("\n") if is_grid else [],
            )
        )
    return units


def _segment_units(segment: Segment) -> list[BodyUnit]:
    return _paragraph_units(segment.markdown, segment.first_page, segment.last_page)


def _paragraph_units(markdown: str, first: int, last: int) -> list[BodyUnit]:
    """Text without blocks (an engine's Markdown): one unit per paragraph, no box."""
    paragraphs = (p.strip() for p in _PARAGRAPH_BREAK.split(markdown))
    return [
        BodyUnit(text=p, label="text", first_page=first, last_page=last) for p in paragraphs if p
    ]
