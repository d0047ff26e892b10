"""Arithmetic on boxes (x0, y0, x1, y1) in one page's coordinates."""

from __future__ import annotations

from collections.abc import Sequence

from ocrq.consumer.layout.structure import Rect


def clip(a: Rect, b: Rect) -> Rect:
    """The part of ``a`` inside ``b`` (empty when x1 <= x0 or y1 <= y0)."""
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def union(a: Rect, b: Rect) -> Rect:
    """The smallest box holding both."""
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def area(box: Rect) -> float:
    """The box's area; 0 for an empty box."""
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def centre_inside(box: Sequence[float], region: Sequence[float]) -> bool:
    """Whether the box's centre lies in the region (tuples or a block's bbox list alike)."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return region[0] <= cx <= region[2] and region[1] <= cy <= region[3]


def mostly_inside(box: Rect, region: Rect) -> bool:
    """Whether more than half of the box lies in the region."""
    return area(clip(box, region)) > 0.5 * area(box)


def within(box: Rect, region: Rect) -> bool:
    """Whether the whole box lies in the region."""
    return (
        region[0] <= box[0] and region[1] <= box[1] and box[2] <= region[2] and box[3] <= region[3]
    )
