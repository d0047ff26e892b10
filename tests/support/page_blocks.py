"""Checks every engine's blocks must pass, whichever engine produced them."""

from __future__ import annotations

from ocrq.shared.schemas import Block


def assert_blocks_fit_the_page(blocks: list[Block], width: int, height: int) -> None:
    """Each pixel box lies inside the page, and its 0-1 box is the pixel box over the size."""
    for block in blocks:
        x0, y0, x1, y1 = block.bbox_px
        assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
        assert block.bbox == [
            round(x0 / width, 4),
            round(y0 / height, 4),
            round(x1 / width, 4),
            round(y1 / height, 4),
        ]
