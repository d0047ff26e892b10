"""Reading order for OCR boxes: a recursive XY-cut into regions, then lines and paragraphs.

Pure functions on page-pixel boxes. The layout model:

- a region splits into columns at the widest vertical strip of whitespace that runs its full
  height; columns are read one after the other, left to right, so two columns are never
  interleaved. A line may poke into the strip while a margin of whitespace remains; one
  across it (a title, a footer, a wide caption) blocks it;
- a region with no such strip is cut at its full-width horizontal gaps into bands; runs of
  bands that share a column strip are cut again, recursively, and the other bands (a title,
  an abstract, a footer across the columns) are read in place, so they keep their position;
- a strip is no gutter when it is word spacing for the type beside it (one wide line is not
  split), when either side has a single line or only narrow labels (list markers, line
  numbers), or when the two sides share no height (a block below another). So a table of
  words is read column by column, each top to bottom, and a table of short numbers row by row;
- within a region, boxes that overlap vertically form one line, read left to right; lines
  form paragraphs, split where the vertical gap is clearly larger than the usual line gap.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

# Boxes on one line overlap vertically by at least this share of the shorter box.
LINE_OVERLAP = 0.5
# Each box keeps this share of its height clear towards a gutter: between body text lines a
# gutter is at least half a line height, and wider beside large type, whose word spacing is
# wider too.
GUTTER_MARGIN = 0.25
# A side of lines at most this many line heights wide (median) is labels, not a column: list
# markers, line or reference numbers stay on the lines they label.
LABEL_WIDTH = 2.0
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
    """Recursive XY-cut: single-column regions in reading order."""
    if not boxes:
        return []
    cut = find_column_cut(boxes)
    if cut is not None:
        left = [b for b in boxes if b.cx < cut]
        right = [b for b in boxes if b.cx >= cut]
        return reading_regions(left) + reading_regions(right)
    groups = _band_groups(_bands(boxes))
    if len(groups) == 1:
        return [boxes]
    # A group with columns has a cut, so the recursion always splits it further.
    return [
        r for group, columned in groups for r in (reading_regions(group) if columned else [group])
    ]


def find_column_cut(boxes: Sequence[Box]) -> float | None:
    """The middle of the widest column gutter running the full height of the boxes, or None."""
    gaps = sorted(_gaps(boxes), key=lambda gap: gap[0] - gap[1])
    for start, end in gaps:
        left = [b for b in boxes if b.x1 <= start]
        right = [b for b in boxes if b.x0 >= end]
        if _clear(left, right) and _columns(group_lines(left), group_lines(right)):
            return (start + end) / 2
    return None


def _gaps(boxes: Sequence[Box]) -> list[tuple[float, float]]:
    """The vertical strips between the boxes that no box overlaps: (start, end) in x."""
    gaps: list[tuple[float, float]] = []
    spans = sorted((b.x0, b.x1) for b in boxes)
    end = spans[0][1] if spans else 0.0
    for x0, x1 in spans[1:]:
        if x0 > end:
            gaps.append((end, x0))
        end = max(end, x1)
    return gaps


def _clear(left: Sequence[Box], right: Sequence[Box]) -> bool:
    """True when the gap is wider than word spacing: each box keeps a margin towards it."""
    left_edge = max(b.x1 + GUTTER_MARGIN * b.height for b in left)
    return all(b.x0 - GUTTER_MARGIN * b.height >= left_edge for b in right)


def _columns(left: Sequence[Box], right: Sequence[Box]) -> bool:
    """True when two sides of lines are columns: not one wide line, nor a block below another."""
    if min(len(left), len(right)) < 2:
        return False
    top = max(min(b.y0 for b in left), min(b.y0 for b in right))
    bottom = min(max(b.y1 for b in left), max(b.y1 for b in right))
    return bottom > top and not (_labels(left) or _labels(right))


def _labels(lines: Sequence[Box]) -> bool:
    """True when lines are too narrow for a text column (markers, numbers)."""
    width = statistics.median(b.x1 - b.x0 for b in lines)
    return width <= LABEL_WIDTH * statistics.median(b.height for b in lines)


def _bands(boxes: Sequence[Box]) -> list[list[Box]]:
    """Boxes cut into bands, top to bottom, at the horizontal gaps across the whole region."""
    bands: list[list[Box]] = []
    bottom = 0.0
    for box in sorted(boxes, key=lambda b: b.y0):
        if bands and box.y0 < bottom:
            bands[-1].append(box)
            bottom = max(bottom, box.y1)
        else:
            bands.append([box])
            bottom = box.y1
    return bands


def _band_groups(bands: Sequence[list[Box]]) -> list[tuple[list[Box], bool]]:
    """Consecutive bands grouped: runs that share a column gutter (True), runs read in place."""
    groups: list[tuple[list[list[Box]], bool]] = []
    for band in bands:
        if groups:
            last, columned = groups[-1]
            if _has_cut([*_flat(last), *band]):
                groups[-1] = ([*last, band], True)
                continue
            if not columned and not _has_cut(band):
                # Two rows that share a gutter open columns (the lines of one row do not).
                if _has_cut([*last[-1], *band]):
                    groups.append(([last.pop(), band], True))
                else:
                    last.append(band)
                continue
        groups.append(([band], _has_cut(band)))
    _pull_into_columns(groups)
    return [(_flat(group), columned) for group, columned in groups if group]


def _pull_into_columns(groups: list[tuple[list[list[Box]], bool]]) -> None:
    """Move the last bands of a run into the columns below while they block no gutter.

    Such a band is the first line of a column (a heading, a column that starts higher):
    read in place it would come before the whole left column.
    """
    for (run, run_columned), (columns, columned) in pairwise(groups):
        while run and columned and not run_columned and _has_cut([*run[-1], *_flat(columns)]):
            columns.insert(0, run.pop())


def _has_cut(boxes: Sequence[Box]) -> bool:
    """True when the boxes have a column gutter."""
    return find_column_cut(boxes) is not None


def _flat(bands: Sequence[list[Box]]) -> list[Box]:
    """The boxes of consecutive bands."""
    return [box for band in bands for box in band]
