"""A document's structure (headings, tables, text in reading order), read from Markdown or blocks.

The structure benchmark's truth comes from authored Markdown through `structure_of_markdown`;
an ocrq Result is read the same way from its Markdown, or from its blocks with
`structure_of_blocks` (labels title/heading, table cells), so both sources compare on equal
footing. Pure Python: markdown-it-py (the parser rich depends on) and the standard library.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

FURNITURE = frozenset({"page_header", "page_footer", "page_number"})  # as shared/schemas.py
HEADING_LABELS = frozenset({"title", "heading"})
BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)  # a line break inside a table cell
LEADING_BULLET = re.compile(r"^[•◦▪●‣∙·]\s+")
# Typographic characters an OCR engine reads as their ASCII look-alikes: mapped on both sides.
LOOK_ALIKES = str.maketrans(
    {"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2014": "-", "\u2013": "-"}
)


@dataclass(frozen=True)
class Heading:
    text: str
    level: int


@dataclass(frozen=True)
class GridCell:
    row: int  # 0-based; a header row is row 0
    col: int
    text: str


@dataclass(frozen=True)
class FurnitureLine:
    page: int  # 1-based
    label: str  # one of FURNITURE
    text: str


@dataclass
class Structure:
    headings: list[Heading] = field(default_factory=list)
    tables: list[list[GridCell]] = field(default_factory=list)
    units: list[str] = field(default_factory=list)  # headings, paragraphs, list items, tables
    # Running headers, footers and page numbers: never body units. The truth's come from the
    # render's layout; a Result's from blocks labelled as furniture (its Markdown has none).
    furniture: list[FurnitureLine] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The body text: every unit in reading order, one per line."""
        return "\n".join(self.units)


def normalise(text: str) -> str:
    """NFKC, typographic quotes and dashes as ASCII, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(LOOK_ALIKES).split())


def inline_text(token: Token) -> str:
    """The visible text of an inline token: code spans kept, markup, HTML and images dropped."""
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak") or BREAK_TAG.match(child.content):
            parts.append(" ")
    return LEADING_BULLET.sub("", normalise("".join(parts)))


class HtmlTableReader(HTMLParser):
    """The cells of the HTML tables in a fragment, spans placed on an occupancy grid."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[GridCell]] = []
        self.taken: set[tuple[int, int]] = set()
        self.row = -1
        self.cell: tuple[int, int, int, int] | None = None  # row, col, row span, col span
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
            self.taken, self.row = set(), -1
        elif tag == "tr":
            self.row += 1
        elif tag in ("td", "th") and self.tables:
            col = 0
            while (self.row, col) in self.taken:
                col += 1
            spans = {k: int(v) for k, v in attrs if k in ("rowspan", "colspan") and v}
            self.cell = (self.row, col, spans.get("rowspan", 1), spans.get("colspan", 1))
            self.text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            row, col, row_span, col_span = self.cell
            self.taken |= {(row + r, col + c) for r in range(row_span) for c in range(col_span)}
            self.tables[-1].append(GridCell(row, col, normalise("".join(self.text))))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.text.append(data)


def table_unit(cells: Sequence[GridCell]) -> str:
    """A table's text for reading order and CER: its cells row by row, one space apart."""
    ordered = sorted(cells, key=lambda c: (c.row, c.col))
    return " ".join(c.text for c in ordered if c.text)


class MarkdownWalk:
    """One pass over markdown-it's tokens, collecting a Structure."""

    def __init__(self) -> None:
        self.found = Structure()
        self.item: list[str] | None = None  # the open list item's text parts
        self.table: list[GridCell] | None = None
        self.row = -1
        self.col = 0

    def unit(self, text: str) -> None:
        if text:
            self.found.units.append(text)

    def flush_item(self) -> None:
        if self.item:
            self.unit(" ".join(self.item))
        self.item = None

    def visit(self, tokens: Sequence[Token], index: int) -> None:
        token = tokens[index]
        kind = token.type
        if kind == "heading_open":
            text = inline_text(tokens[index + 1])
            self.found.headings.append(Heading(text, int(token.tag[1:])))
            self.unit(text)
        elif kind == "list_item_open":
            self.flush_item()  # a nested list: its parent's text comes first
            ordered = token.info.isdigit()
            self.item = [f"{token.info}{token.markup}"] if ordered else []
        elif kind == "list_item_close":
            self.flush_item()
        elif kind == "table_open":
            self.table, self.row = [], -1
        elif kind == "tr_open":
            self.row, self.col = self.row + 1, 0
        elif kind in ("th_open", "td_open") and self.table is not None:
            self.table.append(GridCell(self.row, self.col, inline_text(tokens[index + 1])))
            self.col += 1
        elif kind == "table_close" and self.table is not None:
            self.found.tables.append(self.table)
            self.unit(table_unit(self.table))
            self.table = None
        elif kind == "inline" and self.table is None and tokens[index - 1].type != "heading_open":
            text = inline_text(token)
            if self.item is not None:
                self.item.append(text)
            else:
                self.unit(text)
        elif kind in ("fence", "code_block"):
            self.unit(normalise(token.content))
        elif kind == "html_block":
            self.html_block(token.content)

    def html_block(self, html: str) -> None:
        reader = HtmlTableReader()
        reader.feed(re.sub(r"<!--.*?-->", "", html, flags=re.S))
        for cells in reader.tables:
            self.found.tables.append(cells)
            self.unit(table_unit(cells))
        if not reader.tables:
            self.unit(
                normalise(re.sub(r"<[^>]*>", " ", re.sub(r"<!--.*?-->", "", html, flags=re.S)))
            )


PARSER = MarkdownIt("commonmark").enable("table")


def structure_of_markdown(markdown: str) -> Structure:
    """Headings (`#` lines), tables (pipe or HTML) and text units of a Markdown document."""
    walk = MarkdownWalk()
    tokens = PARSER.parse(markdown)
    for index in range(len(tokens)):
        walk.visit(tokens, index)
    walk.flush_item()
    return walk.found


def cells_of_block(table: Mapping[str, Any]) -> list[GridCell]:
    """A Result table block's cells (row, col, text)."""
    return [
        GridCell(int(c["row"]), int(c["col"]), normalise(c.get("text") or ""))
        for c in table.get("cells") or []
    ]


def structure_of_blocks(pages: Iterable[Mapping[str, Any]]) -> Structure:
    """A Result's structure from its blocks: labels, levels and cells; furniture kept apart."""
    found = Structure()
    for number, page in enumerate(pages, 1):
        for block in page.get("blocks") or []:
            label = block.get("label") or "text"
            text = " ".join(structure_of_markdown(block.get("text") or "").units)
            if label in FURNITURE:
                found.furniture.append(FurnitureLine(page.get("number") or number, label, text))
                continue
            if label in HEADING_LABELS:
                level = block.get("level") or (1 if label == "title" else 2)
                found.headings.append(Heading(text, int(level)))
            table = block.get("table")
            if label == "table" and table:
                cells = cells_of_block(table)
                found.tables.append(cells)
                text = table_unit(cells)
            if text:
                found.units.append(text)
    return found


def structure_from_json(data: Mapping[str, Any]) -> Structure:
    """A Structure written by `dataclasses.asdict` (a truth file) read back."""
    furniture = data.get("furniture") or []  # a truth without furniture leaves the key out
    return Structure(
        headings=[Heading(h["text"], h["level"]) for h in data["headings"]],
        tables=[[GridCell(c["row"], c["col"], c["text"]) for c in t] for t in data["tables"]],
        units=list(data["units"]),
        furniture=[FurnitureLine(f["page"], f["label"], f["text"]) for f in furniture],
    )
