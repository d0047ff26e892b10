"""A page image far larger than Tesseract needs is read reduced, its boxes scaled back.

Tesseract reads best at about 300 DPI (an A4 page of 8.7 million pixels): its recogniser
scales each line to a fixed height anyway, but binarising and laying out a page costs in
proportion to its pixels. A receipt scanned on an A4 sheet at 600 DPI (4961 by 7016 pixels,
held-out SROIE 300-311) took 6-10 s a page; read at half the size it took 2.3-4.3 s and
read better (BENCHMARKS.md, "Reading quality, eighth pass"): the print is still 22-36
pixels tall. A page whose text comes out small once reduced is read again at full size.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import median

import msgspec
from PIL import Image

from ocrq.consumer.layout.structure import Frame
from ocrq.consumer.layout.words import ReadWord
from ocrq.shared.schemas import Block

MAX_PIXELS = 9_000_000  # a larger page is read reduced to this many pixels (A4 at 300 DPI)
# Words read on the reduced page (those read at 0.5 or above) shorter than this, in pixels,
# at the median: the print is too small to reduce, and the page is read at full size.
# Measured: SROIE receipts read well at 13-15 (scanned at 150 DPI); the 600 DPI sheets
# reduced by half measure 22-36.
MIN_TEXT_HEIGHT = 16


def reduction(pixels: int) -> float:
    """The scale a page of this many pixels is read at: 1, or less to fit MAX_PIXELS."""
    return min(1.0, math.sqrt(MAX_PIXELS / max(pixels, 1)))


def reduced_size(width: int, height: int, scale: float) -> tuple[int, int]:
    """The size of a page image reduced by ``scale``."""
    return max(1, round(width * scale)), max(1, round(height * scale))


def reduced_copy(path: str, scale: float) -> str:
    """The page image reduced by ``scale``, written beside it (``<stem>-reduced.png``), its
    resolution reduced with it."""
    with Image.open(path) as image:
        dpi = image.info.get("dpi")
        small = image.convert("RGB").resize(
            reduced_size(image.width, image.height, scale), Image.Resampling.BOX
        )
    target = Path(path).with_name(f"{Path(path).stem}-reduced.png")
    extra = {"dpi": (dpi[0] * scale, dpi[1] * scale)} if dpi else {}
    small.save(target, format="PNG", compress_level=1, **extra)
    return str(target)


def print_too_small(words: list[ReadWord]) -> bool:
    """True when the words read on a reduced page are too short to trust (MIN_TEXT_HEIGHT),
    or none was read with confidence: a page of print too small to reduce, or a blank one."""
    heights = [w.box[3] - w.box[1] for w in words if w.confidence >= 0.5]
    return not heights or median(heights) < MIN_TEXT_HEIGHT


def enlarged_words(words: list[ReadWord], scale: float) -> list[ReadWord]:
    """Words read on a page reduced by ``scale``, in the full page's pixels."""
    return [
        w._replace(
            box=(w.box[0] / scale, w.box[1] / scale, w.box[2] / scale, w.box[3] / scale),
            size=w.size / scale,
            baseline=w.baseline / scale,
        )
        for w in words
    ]


def enlarged_blocks(
    blocks: list[Block], reduced: tuple[int, int], width: int, height: int
) -> list[Block]:
    """Blocks made on a page of the ``reduced`` size, with pixel boxes on the full page (the
    0-1 boxes, of blocks and table cells alike, are the same on both)."""
    frame = Frame(reduced[0], reduced[1], width, height)
    out = []
    for block in blocks:
        if block.bbox_px:
            bbox, bbox_px = frame.place(block.bbox_px)
            block = msgspec.structs.replace(block, bbox=bbox, bbox_px=bbox_px)
        out.append(block)
    return out
