"""Blocks found outside the layout model (scanned figures, inferred tables) put in its order.

A new block goes before the first block of its column (the blocks it shares x with) that
starts below its top, else after that column's last block; with no column, by its height on
the page. A text block right below or above a figure or table that starts with "Figure",
"Fig." or "Table" and a number is its caption. The words read inside a figure (a diagram's
labels) come right after it, before its caption: where a document's own text puts them, and
where the HTML renderer keeps them inside the figure's element.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ocrq.shared.schemas import FURNITURE, Block

CAPTION = re.compile(r"^\s*(figure|fig\.?|table|tab\.)\s*[0-9ivxlc]", re.IGNORECASE)
# A caption stands this close to its figure or table: a share of the page's height.
CAPTION_GAP = 0.04


def insert_in_order(blocks: list[Block], block: Block) -> None:
    """Insert ``block`` into the reading order, in place (see the module's docstring)."""
    top = block.bbox_px[1]
    column = [
        i
        for i, other in enumerate(blocks)
        if other.label not in FURNITURE and x_overlap(other.bbox_px, block.bbox_px) > 0
    ]
    below = [i for i in column if blocks[i].bbox_px[1] >= top]
    if below:
        at = below[0]
    elif column:
        at = column[-1] + 1
    else:
        at = next((i for i, b in enumerate(blocks) if b.bbox_px[1] > top), len(blocks))
    blocks.insert(at, block)


def insert_figure_text(blocks: list[Block], figure: Block, text: Block) -> None:
    """Insert the text read inside ``figure`` right after it (before its caption)."""
    at = next(i for i, block in enumerate(blocks) if block is figure) + 1
    blocks.insert(at, text)


def mark_captions(blocks: list[Block]) -> None:
    """Label as caption the nearest such text block of each figure and table, in place."""
    for block in blocks:
        if block.label not in ("figure", "table") or len(block.bbox) != 4:
            continue
        near = [
            (vertical_gap(other.bbox, block.bbox), other)
            for other in blocks
            if other.label == "text"
            and len(other.bbox) == 4
            and CAPTION.match(other.text)
            and x_overlap(other.bbox, block.bbox) > 0
            and vertical_gap(other.bbox, block.bbox) <= CAPTION_GAP
        ]
        if near:
            min(near, key=lambda pair: pair[0])[1].label = "caption"


def x_overlap(a: Sequence[float], b: Sequence[float]) -> float:
    """How far two boxes share x (negative: the space between them)."""
    return min(a[2], b[2]) - max(a[0], b[0])


def vertical_gap(a: Sequence[float], b: Sequence[float]) -> float:
    """The vertical distance between two boxes (0 when they overlap)."""
    return max(a[1] - b[3], b[1] - a[3], 0.0)
