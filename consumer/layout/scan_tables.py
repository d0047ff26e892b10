"""Tables without rules on a scanned page: a grid inferred from where the words stand.

Where the layout model sees no table (it found none, or a table region without a grid), a
run of at least ``MIN_ROWS`` consecutive lines that keep at least ``MIN_GUTTERS`` gaps free
of words at the same x (gutters, each at least a character wide on every line and wider
than ``GAP_CHARS`` characters on the first) is read as a table: the gutters split it into
columns, each line is a row. Prose in two columns has one gutter, a bulleted list one
(bullet | item); prose in three columns has two, but its cells are lines of many words,
which tables' cells are not (``MAX_WORDS_PER_CELL``).

Labels with their amounts ("Total Amount: ... 31.00") keep one gutter only, as prose in two
columns does; such a run is a table of two columns when every row has a short label and an
amount. The layout model made them two regions, read one after the other ("Total Amount:
Cash Received Change : 31.00 101.00 70.00"); as rows each amount follows its label.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ocrq.consumer.layout.rects import mostly_inside
from ocrq.consumer.layout.structure import Rect
from ocrq.consumer.layout.words import ReadWord
from ocrq.shared.render.tables import table_html, table_markdown
from ocrq.shared.schemas import Block, Cell, Table

MIN_ROWS = 3
MIN_GUTTERS = 2
GAP_CHARS = 2.0  # a gap that opens a gutter: this many median character widths
KEEP_CHARS = 1.0  # what a gutter must keep free on every further line
ROW_GAP_LINES = 2.0  # lines further apart than this many line heights are not one table
MAX_WORDS_PER_CELL = 3.5  # mean over a table's filled cells: more is prose in columns
MAX_WORDS_IN_COLUMN = 6.0  # mean over one column's filled cells: more is a column of prose
MAX_EMPTY_SHARE = 0.4  # a grid mostly empty is scattered words, not a table
MAX_LABEL_WORDS = 6  # a label beside an amount ("Total Incl. of GST :")
# An amount: digits with separators, a currency or sign before, "%" or ")" after ("RM20.40",
# "-0.02", "(1,200.00)", "6%").
AMOUNT = re.compile(r"[-+(]?(?:[A-Z]{1,3}|[$€£¥])?\s?\d[\d.,]*\)?%?")


@dataclass
class FoundTable:
    """A table inferred on the page: its block and the words it holds (indices)."""

    block: Block
    words: set[int]


@dataclass
class _Row:
    words: list[int]  # indices into the page's words, left to right
    top: float
    bottom: float


def find_tables(
    words: Sequence[ReadWord], width: int, height: int, avoid: Sequence[Rect] = ()
) -> list[FoundTable]:
    """Tables inferred from the words' positions, top to bottom; words in ``avoid`` skipped."""
    usable = [
        i
        for i, word in enumerate(words)
        if word.text.strip() and not any(mostly_inside(word.box, a) for a in avoid)
    ]
    if len(usable) < MIN_ROWS * (MIN_GUTTERS + 1):
        return []
    char = median((words[i].box[2] - words[i].box[0]) / len(words[i].text) for i in usable)
    line = median(words[i].box[3] - words[i].box[1] for i in usable)
    rows = _rows(words, usable, line)
    found = []
    start = 0
    while start < len(rows):
        table, stop = _table_at(words, rows, start, char, line, (width, height))
        if table is not None:
            found.append(table)
            start = stop
        else:
            start += 1
    return found


def _table_at(
    words: Sequence[ReadWord],
    rows: list[_Row],
    start: int,
    char: float,
    line: float,
    size: tuple[int, int],
) -> tuple[FoundTable | None, int]:
    """The table whose first row is ``start`` (columns of cells, else labels with amounts)
    and the row after it."""
    stop, gutters = _run(words, rows, start, char, line, MIN_GUTTERS)
    if stop:
        return _table(words, rows[start:stop], gutters, *size), stop
    stop, gutters = _run(words, rows, start, char, line, 1)
    if not stop or len(gutters) != 1:
        return None, stop
    while stop - start >= MIN_ROWS and not _labels_with_amounts(
        words, rows[start:stop], gutters[0]
    ):
        stop -= 1  # a run may go on below its amounts, into a line of two words say
    if stop - start < MIN_ROWS:
        return None, stop
    return _table(words, rows[start:stop], gutters, *size), stop


def _labels_with_amounts(
    words: Sequence[ReadWord], rows: list[_Row], gutter: tuple[float, float]
) -> bool:
    """Whether every row is a short label left of the gutter and an amount right of it."""
    cut = sum(gutter) / 2
    for row in rows:
        left: list[str] = []
        right: list[str] = []
        for i in row.words:
            (right if _column(words[i].box, [cut]) else left).append(words[i].text)
        if not 0 < len(left) <= MAX_LABEL_WORDS or not 0 < len(right) <= 2:
            return False
        if not AMOUNT.fullmatch("".join(right)):  # "RM 20.40" is one amount
            return False
    return True


def _rows(words: Sequence[ReadWord], usable: list[int], line: float) -> list[_Row]:
    """The words in visual lines across the page (an engine's lines may stop at a gap)."""
    rows: list[_Row] = []
    for i in sorted(usable, key=lambda i: (words[i].box[1] + words[i].box[3]) / 2):
        _, y0, _, y1 = words[i].box
        middle = (y0 + y1) / 2
        if rows and middle - (rows[-1].top + rows[-1].bottom) / 2 <= 0.5 * line:
            rows[-1].words.append(i)
            rows[-1].top, rows[-1].bottom = min(rows[-1].top, y0), max(rows[-1].bottom, y1)
        else:
            rows.append(_Row([i], y0, y1))
    for row in rows:
        row.words.sort(key=lambda i: words[i].box[0])
    return rows


def _gaps(words: Sequence[ReadWord], row: _Row, least: float) -> list[tuple[float, float]]:
    """The x-intervals between a row's words wider than ``least``."""
    boxes = [words[i].box for i in row.words]
    gaps = []
    right = boxes[0][2]
    for box in boxes[1:]:
        if box[0] - right > least:
            gaps.append((right, box[0]))
        right = max(right, box[2])
    return gaps


def _run(
    words: Sequence[ReadWord],
    rows: list[_Row],
    start: int,
    char: float,
    line: float,
    least: int,
) -> tuple[int, list[tuple[float, float]]]:
    """How far from ``start`` rows keep at least ``least`` gutters: (stop, gutters); 0, []."""
    if len(_gaps(words, rows[start], GAP_CHARS * char)) < least:
        return 0, []
    spans = [words[i].box[0:3:2] for i in rows[start].words]
    gutters = _gutters(spans, KEEP_CHARS * char)
    stop = start + 1
    while stop < len(rows) and rows[stop].top - rows[stop - 1].bottom <= ROW_GAP_LINES * line:
        if not _gaps(words, rows[stop], GAP_CHARS * char):
            break  # a line of running text: the table (if any) ends above it
        more = spans + [words[i].box[0:3:2] for i in rows[stop].words]
        kept = _supported(words, rows[start : stop + 1], _gutters(more, KEEP_CHARS * char), char)
        if len(kept) < least:
            break
        spans, gutters, stop = more, kept, stop + 1
    return (stop, gutters) if stop - start >= MIN_ROWS else (0, [])


def _supported(
    words: Sequence[ReadWord], rows: list[_Row], gutters: list[tuple[float, float]], char: float
) -> list[tuple[float, float]]:
    """The gutters that are a wide gap (GAP_CHARS) on at least half of the rows, not a space."""
    wide = [_gaps(words, row, GAP_CHARS * char) for row in rows]
    return [
        gutter
        for gutter in gutters
        if 2 * sum(any(a <= gutter[0] and gutter[1] <= b for a, b in gaps) for gaps in wide)
        >= len(rows)
    ]


def _gutters(spans: Sequence[tuple[float, ...]], least: float) -> list[tuple[float, float]]:
    """The x-intervals no span covers, between the leftmost and rightmost, ``least`` wide."""
    out = []
    ordered = sorted(spans)
    right = ordered[0][1]
    for x0, x1 in ordered[1:]:
        if x0 - right >= least:
            out.append((right, x0))
        right = max(right, x1)
    return out


def _table(
    words: Sequence[ReadWord],
    rows: list[_Row],
    gutters: list[tuple[float, float]],
    width: int,
    height: int,
) -> FoundTable | None:
    """The rows cut at the gutters as a table block, unless it reads as prose or scatter."""
    cuts = [(a + b) / 2 for a, b in gutters]
    columns = range(len(cuts) + 1)
    grid = [
        [[i for i in row.words if _column(words[i].box, cuts) == c] for c in columns]
        for row in rows
    ]
    filled = [cell for row in grid for cell in row if cell]
    empty = sum(1 for row in grid for cell in row if not cell)
    if sum(len(cell) for cell in filled) / len(filled) > MAX_WORDS_PER_CELL:
        return None
    if any(_prose_column(grid, c) for c in range(len(cuts) + 1)):
        return None
    if empty > MAX_EMPTY_SHARE * len(rows) * (len(cuts) + 1):
        return None
    held = {i for row in rows for i in row.words}
    x0 = min(words[i].box[0] for i in held)
    x1 = max(words[i].box[2] for i in held)
    edges = [x0, *cuts, x1]
    cells = _cells(words, rows, grid, edges, (width, height))
    table = Table(rows=len(rows), cols=len(edges) - 1, cells=cells)
    table.html = table_html(table)
    box = (x0, rows[0].top, x1, rows[-1].bottom)
    confidence = round(sum(words[i].confidence for i in held) / len(held), 4)
    block = Block(
        label="table",
        text=table_markdown(table),
        bbox=_normalised(box, width, height),
        bbox_px=[int(box[0]), int(box[1]), int(box[2] + 0.999), int(box[3] + 0.999)],
        confidence=confidence,
        table=table,
    )
    return FoundTable(block, held)


def _cells(
    words: Sequence[ReadWord],
    rows: list[_Row],
    grid: list[list[list[int]]],
    edges: list[float],
    size: tuple[int, int],
) -> list[Cell]:
    """Each grid slot as a cell: its words left to right, its box the column by the row."""
    return [
        Cell(
            row=r,
            col=c,
            text=" ".join(words[i].text for i in cell),
            bbox=_normalised((edges[c], row.top, edges[c + 1], row.bottom), *size),
            header=r == 0,
        )
        for r, (row, slots) in enumerate(zip(rows, grid, strict=True))
        for c, cell in enumerate(slots)
    ]


def _prose_column(grid: list[list[list[int]]], column: int) -> bool:
    """Whether a column's filled cells hold lines of running text (many words each)."""
    filled = [row[column] for row in grid if row[column]]
    return bool(filled) and sum(len(cell) for cell in filled) / len(filled) > MAX_WORDS_IN_COLUMN


def _column(box: Rect, cuts: list[float]) -> int:
    centre = (box[0] + box[2]) / 2
    return sum(1 for cut in cuts if centre > cut)


def _normalised(box: Rect, width: int, height: int) -> list[float]:
    w, h = max(width, 1), max(height, 1)
    return [round(box[0] / w, 4), round(box[1] / h, 4), round(box[2] / w, 4), round(box[3] / h, 4)]
