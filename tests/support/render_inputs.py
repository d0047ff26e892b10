"""Results and tables built by hand, as the renderers' tests hand them over."""

from __future__ import annotations

from collections.abc import Sequence

from ocrq.shared.schemas import Cell, Page, Result, Segment, Table


def result_of(pages: Sequence[Page], segments: Sequence[Segment] = ()) -> Result:
    """A done Result of these pages (and segments), with no Markdown of its own."""
    return Result(
        id="j",
        status="done",
        media_type="image/png",
        page_count=len(pages),
        markdown="",
        pages=list(pages),
        segments=list(segments),
    )


def grid_of(rows: Sequence[Sequence[str]]) -> Table:
    """A table of plain cells, row by row (no spans, no header); as wide as its longest row."""
    cells = [Cell(row=r, col=c, text=t) for r, row in enumerate(rows) for c, t in enumerate(row)]
    return Table(rows=len(rows), cols=max((len(row) for row in rows), default=0), cells=cells)


def spanned_grid(top: str, left: str, right: str) -> Table:
    """A 2 x 2 table: one cell across the top row, two plain cells under it."""
    cells = [
        Cell(row=0, col=0, col_span=2, text=top),
        Cell(row=1, col=0, text=left),
        Cell(row=1, col=1, text=right),
    ]
    return Table(rows=2, cols=2, cells=cells)
