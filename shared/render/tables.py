"""A table block's grid as Markdown, HTML and CSV, and an HTML table read back into a grid."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from html import escape
from html.parser import HTMLParser

import msgspec

from ocrq.shared.schemas import Cell, Table

MAX_SPAN = 100  # a colspan beyond this is a model's garbage, not a table
MAX_SLOTS = 100_000  # grid slots read from one HTML table (a looping answer stops here)
_DIGITS = re.compile(r"\d+")


def table_shape(table: Table) -> tuple[int, int]:
    """Rows and columns the table covers: its declared size or what its cells reach."""
    rows, cols = max(table.rows, 0), max(table.cols, 0)
    for cell in _placed(table):
        rows = max(rows, cell.row + max(cell.row_span, 1))
        cols = max(cols, cell.col + max(cell.col_span, 1))
    return rows, cols


def has_spans(table: Table) -> bool:
    """True when a cell spans more than one row or column (Markdown cannot show it)."""
    return any(cell.row_span > 1 or cell.col_span > 1 for cell in table.cells)


def table_grid(table: Table) -> list[list[str]]:
    """The table as rows of cell texts: a spanning cell's text in its top-left slot only."""
    rows, cols = table_shape(table)
    grid = [["" for _ in range(cols)] for _ in range(rows)]
    for cell in _placed(table):
        grid[cell.row][cell.col] = cell.text
    return grid


def table_markdown(table: Table) -> str:
    """A GitHub Markdown table; the first row is its header row."""
    grid = table_grid(table)
    if not grid or not grid[0]:
        return ""
    lines = [_markdown_row(grid[0]), "| " + " | ".join("---" for _ in grid[0]) + " |"]
    lines += [_markdown_row(row) for row in grid[1:]]
    return "\n".join(lines)


def table_html(table: Table, *, attributes: Mapping[str, str] | None = None) -> str:
    """The table as HTML, with rowspan/colspan and <th> for header cells; text escaped."""
    rows, cols = table_shape(table)
    starts = {(cell.row, cell.col): cell for cell in _placed(table)}
    covered = {
        (cell.row + dr, cell.col + dc)
        for cell in starts.values()
        for dr in range(max(cell.row_span, 1))
        for dc in range(max(cell.col_span, 1))
    }
    attrs = "".join(f' {k}="{escape(v)}"' for k, v in (attributes or {}).items())
    parts = [f"<table{attrs}>"]
    for r in range(rows):
        parts.append("<tr>")
        for c in range(cols):
            cell = starts.get((r, c))
            if cell is not None:
                parts.append(_html_cell(cell))
            elif (r, c) not in covered:
                parts.append("<td></td>")  # a slot no cell fills: keep the grid aligned
        parts.append("</tr>")
    parts.append("</table>")
    return "".join(parts)


def table_csv(table: Table) -> str:
    """RFC 4180 CSV (CRLF line ends); a spanning cell's text in its top-left slot."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerows(table_grid(table))
    return buffer.getvalue()


def table_tsv(table: Table) -> str:
    """The table as tab-separated rows, one line each (plain text)."""
    return "\n".join("\t".join(_one_line(text, "\t") for text in row) for row in table_grid(table))


def table_from_html(html: str) -> Table:
    """The first table in ``html`` as a grid (rows, spans, header cells); never raises."""
    reader = _TableReader()
    try:
        reader.feed(html)
        reader.close()
    except Exception:  # HTMLParser is lenient; keep what was read if it still gives up
        pass
    table = _place(reader.rows)
    return msgspec.structs.replace(table, html=table_html(table))


def _placed(table: Table) -> list[Cell]:
    """Cells with a position on the grid (a negative row or column is dropped)."""
    return [cell for cell in table.cells if cell.row >= 0 and cell.col >= 0]


def _one_line(text: str, also: str = "") -> str:
    """Text on one line: newlines (and ``also``) become spaces."""
    for ch in "\r\n" + also:
        text = text.replace(ch, " ")
    return text.strip()


def _markdown_row(row: list[str]) -> str:
    return "| " + " | ".join(_one_line(text).replace("|", "\\|") for text in row) + " |"


def _html_cell(cell: Cell) -> str:
    tag = "th" if cell.header else "td"
    spans = ""
    if cell.row_span > 1:
        spans += f' rowspan="{cell.row_span}"'
    if cell.col_span > 1:
        spans += f' colspan="{cell.col_span}"'
    return f"<{tag}{spans}>{escape(cell.text, quote=False)}</{tag}>"


class _RawCell(msgspec.Struct):
    """A cell as written in the HTML, before it is placed on the grid."""

    text: list[str]
    row_span: int
    col_span: int
    header: bool


class _TableReader(HTMLParser):
    """Collects the rows of the first table; a nested table's text joins its cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[_RawCell]] = []
        self._depth = 0  # nesting of <table> tags
        self._done = False
        self._in_head = False
        self._cell: _RawCell | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._done:
            return
        if tag == "table":
            self._depth += 1
        elif self._depth > 1 or tag == "br":
            self.handle_data(" ")
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._close_cell()
            self.rows.append([])
        elif tag in ("td", "th"):
            self._open_cell(tag, dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if self._done:
            return
        if tag == "table":
            self._depth -= 1
            if self._depth <= 0:
                self._close_cell()
                self._done = True
        elif self._depth > 1:
            self.handle_data(" ")
        elif tag == "thead":
            self._in_head = False
        elif tag in ("td", "th", "tr"):
            self._close_cell()

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._done:
            self._cell.text.append(data)

    def _open_cell(self, tag: str, attrs: dict[str, str | None]) -> None:
        self._close_cell()
        if not self.rows:
            self.rows.append([])  # a cell before any <tr>: an implicit first row
        self._cell = _RawCell(
            text=[],
            row_span=_span(attrs.get("rowspan")),
            col_span=min(_span(attrs.get("colspan")), MAX_SPAN),
            header=tag == "th" or self._in_head,
        )
        self.rows[-1].append(self._cell)

    def _close_cell(self) -> None:
        self._cell = None


def _span(value: str | None) -> int:
    """A rowspan/colspan value read leniently ('2', '"2"', '2px'); 1 when unreadable."""
    found = _DIGITS.search(value or "")
    return max(1, int(found.group())) if found else 1


def _place(rows: list[list[_RawCell]]) -> Table:
    """Place written cells on the grid: each at the next column its row has free."""
    occupied: set[tuple[int, int]] = set()
    cells: list[Cell] = []
    cols = 0
    for r, row in enumerate(rows):
        c = 0
        for raw in row:
            while (r, c) in occupied:
                c += 1
            row_span = min(raw.row_span, len(rows) - r)
            occupied.update(
                (r + dr, c + dc) for dr in range(row_span) for dc in range(raw.col_span)
            )
            text = " ".join("".join(raw.text).split())
            cells.append(
                Cell(
                    row=r,
                    col=c,
                    row_span=row_span,
                    col_span=raw.col_span,
                    text=text,
                    header=raw.header,
                )
            )
            c += raw.col_span
            cols = max(cols, c)
            if len(occupied) > MAX_SLOTS:
                return Table(rows=r + 1, cols=cols, cells=cells)
    cols = max([cols, *(c + 1 for _, c in occupied)])
    return Table(rows=len(rows), cols=cols, cells=cells)
