"""Reading order for OCR boxes: lines, paragraphs and columns, then Markdown.

Pure functions on page-pixel boxes. The layout model is deliberately simple:

- a *column gutter* is a vertical strip with boxes on both sides and almost nothing crossing
  it over the page's height; columns are read one after the other, left to right, so two
  columns are never interleaved. Boxes that clearly span the gutter (a title, a footer, a
  wide caption) cut the page into horizontal bands, each band read column by column;
- within a column, boxes that overlap vertically form one line, read left to right;
- lines form paragraphs, split where the vertical gap is clearly larger than the column's
  usual line gap.

A table with aligned cells looks like columns to this model and is read column-wise.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

# Boxes on one line overlap vertically by at least this share of the shorter box.
LINE_OVERLAP = 0.5
# A gutter may be crossed by boxes whose heights add up to at most this share of the page.
GUTTER_CROSSING = 0.25
# A gutter is at least this wide, in median box heights.
GUTTER_MIN_WIDTH = 0.5
# A crossing box spans the columns (cuts the page into bands) when it reaches at least this
# far, in median box heights, into both sides; otherwise it belongs to the side of its centre.
SPAN_REACH = 1.0
# A paragraph break is a gap larger than the usual line gap plus this many line heights...
PARAGRAPH_EXTRA_GAP = 0.5
# ...and in any case a gap larger than this many line heights.
PARAGRAPH_MAX_GAP = 1.2


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned text box in page pixels; a merged line keeps its source boxes in parts."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    confidence: float = 1.0
    parts: tuple[Box, ...] = ()

    @property
    def height(self) -> float:
        """Vertical extent in pixels."""
        return self.y1 - self.y0

    @property
    def cx(self) -> float:
        """Horizontal centre."""
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        """Vertical centre."""
        return (self.y0 + self.y1) / 2

    @property
    def leaves(self) -> tuple[Box, ...]:
        """The source boxes this box was merged from (itself when it was not merged)."""
        return self.parts or (self,)


@dataclass(frozen=True, slots=True)
class Gutter:
    """A column split: boxes left of it, right of it, and boxes spanning both columns."""

    x: float
    left: list[Box]
    right: list[Box]
    spanning: list[Box]


def order_lines(boxes: Iterable[Box]) -> list[list[Box]]:
    """Paragraphs (lists of merged line boxes) in reading order: column by column."""
    return [
        paragraph
        for region in reading_regions(list(boxes))
        for paragraph in split_paragraphs(group_lines(region))
    ]


def to_markdown(paragraphs: Sequence[Sequence[Box]]) -> str:
    """Markdown: a paragraph's lines joined by newlines, paragraphs by a blank line."""
    texts = ("\n".join(line.text for line in para if line.text) for para in paragraphs)
    return "\n\n".join(text for text in texts if text)


def merge_line(boxes: Sequence[Box]) -> Box:
    """One line box from boxes on the same line: extent, texts left to right, lowest confidence."""
    leaves = sorted((leaf for box in boxes for leaf in box.leaves), key=lambda b: b.x0)
    return Box(
        x0=min(b.x0 for b in leaves),
        y0=min(b.y0 for b in leaves),
        x1=max(b.x1 for b in leaves),
        y1=max(b.y1 for b in leaves),
        text=" ".join(b.text for b in leaves if b.text),
        confidence=min(b.confidence for b in leaves),
        parts=tuple(leaves),
    )


def group_lines(boxes: Iterable[Box]) -> list[Box]:
    """Merge boxes that overlap vertically into lines, top to bottom."""
    lines: list[list[Box]] = []
    top = bottom = 0.0
    for box in sorted(boxes, key=lambda b: (b.cy, b.x0)):
        overlap = min(bottom, box.y1) - max(top, box.y0)
        if lines and overlap >= LINE_OVERLAP * min(bottom - top, box.height):
            lines[-1].append(box)
            top, bottom = min(top, box.y0), max(bottom, box.y1)
        else:
            lines.append([box])
            top, bottom = box.y0, box.y1
    return [merge_line(line) for line in lines]


def split_paragraphs(lines: Sequence[Box]) -> list[list[Box]]:
    """Split top-to-bottom lines of one column into paragraphs at unusually large gaps."""
    if not lines:
        return []
    gaps = [line.y0 - prev.y1 for prev, line in pairwise(lines)]
    line_height = statistics.median(line.height for line in lines)
    usual_gap = max(0.0, statistics.median(gaps)) if gaps else 0.0
    limit = min(usual_gap + PARAGRAPH_EXTRA_GAP * line_height, PARAGRAPH_MAX_GAP * line_height)
    paragraphs = [[lines[0]]]
    for gap, line in zip(gaps, lines[1:], strict=True):
        if gap > limit:
            paragraphs.append([line])
        else:
            paragraphs[-1].append(line)
    return paragraphs


def reading_regions(boxes: list[Box]) -> list[list[Box]]:
    """Split boxes into single-column regions, in reading order (recursing into columns)."""
    if not boxes:
        return []
    gutter = find_gutter(boxes)
    if gutter is None:
        return [boxes]
    regions: list[list[Box]] = []
    for left, right, spanning in _bands(gutter):
        regions.extend(reading_regions(left))
        regions.extend(reading_regions(right))
        if spanning:
            regions.append(spanning)
    return regions


def _bands(gutter: Gutter) -> list[tuple[list[Box], list[Box], list[Box]]]:
    """Cut the columns at spanning boxes: (left part, right part, spanning boxes below them)."""
    spanning = sorted(gutter.spanning, key=lambda b: b.cy)
    cuts = [b.cy for b in spanning]
    lefts: list[list[Box]] = [[] for _ in range(len(cuts) + 1)]
    rights: list[list[Box]] = [[] for _ in range(len(cuts) + 1)]
    for side, parts in ((gutter.left, lefts), (gutter.right, rights)):
        for box in side:
            parts[bisect.bisect_left(cuts, box.cy)].append(box)
    bands: list[tuple[list[Box], list[Box], list[Box]]] = [(lefts[0], rights[0], [])]
    for span, left, right in zip(spanning, lefts[1:], rights[1:], strict=True):
        # Consecutive spanning boxes with no column text between them form one region.
        bands[-1][2].append(span)
        if left or right:
            bands.append((left, right, []))
    return bands


def find_gutter(boxes: Sequence[Box]) -> Gutter | None:
    """The clearest column gutter, or None for a single column."""
    if len(boxes) < 4:
        return None
    box_height = statistics.median(b.height for b in boxes)
    page_height = max(b.y1 for b in boxes) - min(b.y0 for b in boxes)
    by_right = sorted(boxes, key=lambda b: b.x1)
    by_left = sorted(boxes, key=lambda b: b.x0)
    rights = [b.x1 for b in by_right]
    lefts = [b.x0 for b in by_left]
    height_upto = [0.0, *accumulate(b.height for b in by_right)]
    height_from = [*accumulate((b.height for b in reversed(by_left)), initial=0.0)][::-1]
    total = height_upto[-1]
    scored: list[tuple[float, float, float]] = []
    for x in sorted(set(rights)):
        n_left = bisect.bisect_right(rights, x)
        first_right = bisect.bisect_left(lefts, x)
        if n_left < 2 or len(boxes) - first_right < 2:
            continue
        gap = lefts[first_right] - x
        crossing = total - height_upto[n_left] - height_from[first_right]
        if gap >= GUTTER_MIN_WIDTH * box_height and crossing <= GUTTER_CROSSING * page_height:
            scored.append((crossing, -gap, x + gap / 2))
    for _, _, middle in sorted(scored):
        gutter = _split_at(boxes, middle, box_height)
        if _side_by_side(gutter.left, gutter.right):
            return gutter
    return None


def _split_at(boxes: Sequence[Box], x: float, box_height: float) -> Gutter:
    """Partition boxes around x; a crossing box spans only if it reaches well into both sides."""
    left: list[Box] = []
    right: list[Box] = []
    spanning: list[Box] = []
    for box in boxes:
        if box.x1 <= x:
            left.append(box)
        elif box.x0 >= x:
            right.append(box)
        elif min(x - box.x0, box.x1 - x) >= SPAN_REACH * box_height:
            spanning.append(box)
        else:
            (left if box.cx < x else right).append(box)
    return Gutter(x=x, left=left, right=right, spanning=spanning)


def _side_by_side(left: Sequence[Box], right: Sequence[Box]) -> bool:
    """True when the two sides share some page height (columns, not a block below another)."""
    if len(left) < 2 or len(right) < 2:
        return False
    top = max(min(b.y0 for b in left), min(b.y0 for b in right))
    bottom = min(max(b.y1 for b in left), max(b.y1 for b in right))
    return bottom > top
