"""A page's blocks in reading order: a recursive XY-cut over their boxes.

The layout model orders the regions of one column well, but where a page's columns end at
different heights it reads the end of the right column before the last paragraphs of the
left (the structure benchmark's two-column document). So the order is taken from the boxes:
a vertical strip that no block crosses is a column gutter, and everything left of it is read
before anything right of it; a region with no gutter is cut across at its horizontal gaps
into bands, read top to bottom, and a band that leaves a gutter of the region above clear
is read with it (two columns whose paragraphs happen to leave a common horizontal gap, or a
column that runs on below the other's end, stay columns); blocks that no cut separates keep
the model's order. A title or a figure across both columns crosses every gutter, so it is a
band of its own and stays where it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

from ocrq.shared.schemas import Block

MIN_GUTTER = 0.01  # a gutter is at least this share of the page width
Item = tuple[int, Block]  # a block and its place in the model's order
Span = Callable[[Block], tuple[float, float]]


def ordered_blocks(blocks: list[Block]) -> list[Block]:
    """The blocks in reading order; unchanged when any block has no box."""
    if len(blocks) < 3 or any(len(b.bbox) != 4 for b in blocks):
        return blocks
    return [block for _, block in _xy_cut(list(enumerate(blocks)))]


def _xy_cut(items: list[Item]) -> list[Item]:
    if len(items) < 2:
        return items
    columns = _split(items, _x_span, MIN_GUTTER)
    if len(columns) > 1:
        return [item for column in columns for item in _xy_cut(column)]
    bands = _split(items, _y_span, 0.0)
    if len(bands) > 1:
        return [item for region in _regions(bands) for item in _xy_cut(region)]
    return sorted(items, key=lambda item: item[0])


def _regions(bands: list[list[Item]]) -> list[list[Item]]:
    """Bands top to bottom; a band that leaves a gutter of the region above it clear (a
    column going on below the other's end, or both) is joined to that region."""
    regions = [bands[0]]
    shared = _gutters(bands[0])
    for band in bands[1:]:
        clear = [g for g in (_narrowed(gap, band) for gap in shared) if g is not None]
        if clear:
            regions[-1] = regions[-1] + band
            shared = clear
        else:
            regions.append(band)
            shared = _gutters(band)
    return regions


def _narrowed(gap: tuple[float, float], band: list[Item]) -> tuple[float, float] | None:
    """What of a gutter the band's blocks leave clear (None: a block spans it, or too
    little is left)."""
    low, high = gap
    middle = (low + high) / 2
    for _, block in band:
        x0, _, x1, _ = block.bbox
        if x1 <= middle:
            low = max(low, x1)
        elif x0 >= middle:
            high = min(high, x0)
        else:
            return None
    return (low, high) if high - low > MIN_GUTTER else None


def _gutters(items: list[Item]) -> list[tuple[float, float]]:
    """The x intervals between the columns of a band (none for a band of one column)."""
    columns = _split(items, _x_span, MIN_GUTTER)
    return [
        (max(b.bbox[2] for _, b in column), min(b.bbox[0] for _, b in following))
        for column, following in pairwise(columns)
    ]


def _x_span(block: Block) -> tuple[float, float]:
    return block.bbox[0], block.bbox[2]


def _y_span(block: Block) -> tuple[float, float]:
    return block.bbox[1], block.bbox[3]


def _split(items: Sequence[Item], span: Span, min_gap: float) -> list[list[Item]]:
    """The items in groups along one axis, cut wherever a gap wider than min_gap has no
    block across it, in order along that axis."""
    by_start = sorted(items, key=lambda item: span(item[1]))
    groups: list[list[Item]] = []
    reach = float("-inf")
    for item in by_start:
        start, end = span(item[1])
        if not groups or start - reach > min_gap:
            groups.append([])
        groups[-1].append(item)
        reach = max(reach, end)
    return groups
