"""Markdown from blocks: headings, paragraphs, lists, tables, formulas and figure links."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ocrq.shared.render.tables import has_spans, table_html, table_markdown
from ocrq.shared.schemas import FURNITURE, Block, Page, Segment

NOTE = "> **ocrq warning:** "  # how a page's warning opens its Markdown (consumer/doubts.py)
IMAGES_PATH = "images/"  # figure links are relative: GET /v1/jobs/{id}/images/{name}

_HASHES = re.compile(r"^#{1,6}[ \t]+")
_BULLET = re.compile(r"^(?:[-*+\u2022\u25aa\u25cf\u2013]|\u00b7)[ \t]+")
_NUMBERED = re.compile(r"^(?:\d{1,3}|[a-zA-Z])[.)][ \t]+")
_DELIMITED = re.compile(r"^(?:\$\$.*\$\$|\\\[.*\\\]|\\\(.*\\\)|\$.*\$|\\begin\{.*\})$", re.DOTALL)


def warning_notes(warnings: list[str]) -> str:
    """A page's warnings as the quoted notes that open its Markdown, one line each."""
    return "\n".join(NOTE + w for w in warnings)


def page_markdown(page: Page, *, keep_furniture: bool = False) -> str:
    """A page's Markdown from its blocks, its warnings first; without blocks, its own text.

    A page without blocks (a multi-page request's, or an engine that gives none) keeps
    ``page.markdown`` as it is: the warnings were written into it when it was reviewed.
    """
    if not page.blocks:
        return page.markdown or ""
    parts = [warning_notes(page.warnings)] if page.warnings else []
    body = blocks_markdown(page.blocks, keep_furniture=keep_furniture)
    if body:
        parts.append(body)
    return "\n\n".join(parts)


def document_markdown(
    pages: list[Page], segments: list[Segment], *, keep_furniture: bool = False
) -> str:
    """Markdown in page order: a page's own, or a segment's once at its first page.

    A page whose ``markdown`` is None had its text read with other pages: that text is the
    segment's, given once at the segment's first page (never copied onto every page).
    """
    texts = [
        None if page.markdown is None else page_markdown(page, keep_furniture=keep_furniture)
        for page in pages
    ]
    return _joined(pages, texts, segments)


def joined_markdown(pages: list[Page], segments: list[Segment]) -> str:
    """The document's Markdown from pages whose own Markdown is already rendered."""
    return _joined(pages, [page.markdown for page in pages], segments)


def _joined(pages: list[Page], texts: list[str | None], segments: list[Segment]) -> str:
    """Each page's text in page order, or its segment's once at the segment's first page."""
    by_first = {s.first_page: s for s in segments}
    parts: list[str] = []
    for page, text in zip(pages, texts, strict=True):
        if text is None:
            segment = by_first.get(page.number)
            text = segment.markdown if segment is not None else ""
        if text.strip():
            parts.append(text.strip())
    return "\n\n".join(parts) + ("\n" if parts else "")


def blocks_markdown(blocks: list[Block], *, keep_furniture: bool = False) -> str:
    """Blocks in reading order as Markdown; consecutive list items form one list."""
    parts: list[str] = []
    figures = 0
    for run in _runs(blocks, keep_furniture):
        if run[0].label == "list_item":
            items = [item for block in run for item in list_items(block.text)]
            if items:
                parts.append("\n".join(items))
            continue
        block = run[0]
        if block.label == "figure":
            figures += 1
        text = block_markdown(block, figure_number=figures)
        if text:
            parts.append(text)
    return "\n\n".join(parts)


def block_markdown(block: Block, *, figure_number: int = 1) -> str:
    """One block (not a list item) as Markdown; empty when it has nothing to show."""
    text = block.text.strip()
    if block.label in ("title", "heading"):
        title = heading_text(text)
        return f"{'#' * heading_level(block)} {title}" if title else ""
    if block.label == "table":
        return _table_markdown(block)
    if block.label == "formula":
        return text if not text or _DELIMITED.match(text) else f"$$\n{text}\n$$"
    if block.label == "figure":
        if block.image:
            return f"![figure {figure_number}]({IMAGES_PATH}{block.image})"
        return text
    return text


def heading_level(block: Block) -> int:
    """1 for the title; a heading's level clamped to 2..6 (2 when it has none)."""
    if block.label == "title":
        return 1
    return min(max(block.level or 2, 2), 6)


def heading_text(text: str) -> str:
    """A heading's text without the Markdown hashes an engine may have written."""
    return _HASHES.sub("", text.strip()).strip()


def list_items(text: str) -> list[str]:
    """Markdown list lines for a list item's text: '- x', or the item's own '1.' number."""
    items = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if _NUMBERED.match(line):
            items.append(line)
        else:
            items.append("- " + _BULLET.sub("", line))
    return items


def is_body(block: Block, keep_furniture: bool) -> bool:
    """False for page furniture (headers, footers, page numbers) unless it is kept."""
    return keep_furniture or block.label not in FURNITURE


def _runs(blocks: list[Block], keep_furniture: bool) -> Iterator[list[Block]]:
    """Body blocks grouped: each run of consecutive list items together, others alone."""
    run: list[Block] = []
    for block in blocks:
        if not is_body(block, keep_furniture):
            continue
        if run and (block.label != "list_item" or run[-1].label != "list_item"):
            yield run
            run = []
        run.append(block)
    if run:
        yield run


def _table_markdown(block: Block) -> str:
    """A Markdown table; HTML when a cell spans; the block's text when it has no cells."""
    table = block.table
    if table is None or not table.cells:
        html = table.html if table is not None else ""
        return html.strip() or block.text.strip()
    return table_html(table) if has_spans(table) else table_markdown(table)
