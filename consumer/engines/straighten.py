"""Straighten a page scanned a few degrees askew, and map what was read back onto the page.

Tesseract finds lines on a skewed page but cuts them badly past two or three degrees: a
page turned by 5-8 degrees read at 55-98 % CER against 1-3 % upright (BENCHMARKS.md,
"Reading quality"). The skew is measured from the text lines themselves: at a tenth of the
page's size, the angle whose row profile of ink is sharpest (text lines lying flat make
tall peaks and empty gaps). Below a degree Tesseract copes and a rotation costs more than it
gives (it resamples every pixel); born-digital renders measure 0 and are never touched.

The engine reads the straightened image; every box it returns is mapped back to the page as
rendered (the box around the rotated box), so blocks, words and the searchable PDF's text
refer to the same pixels as a page that needed no straightening.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy
from PIL import Image, ImageOps

from ocrq.consumer.layout.ink import otsu_level
from ocrq.consumer.layout.structure import Frame
from ocrq.shared.schemas import Block, Cell

MIN_DEGREES = 1.0  # below this, Tesseract's own line finding copes (measured: 0.3-0.9)
MAX_DEGREES = 10.0  # the search range: beyond it a page is turned, not skewed
COARSE_STEP = 0.5
FINE_STEP = 0.1
PROFILE_SIDE = 700  # pixels of the longer side the profile is measured at (as exact as 1000)
Box = tuple[float, float, float, float]


def measure_skew(image: Image.Image) -> float:
    """Degrees (counter-clockwise) that make the page's text lines level; 0 when unsure."""
    grey = ImageOps.grayscale(image)
    grey.thumbnail((PROFILE_SIDE, PROFILE_SIDE))
    pixels = numpy.asarray(grey, dtype=numpy.float32)
    if pixels.size == 0 or float(pixels.std()) < 1.0:  # blank: nothing to measure
        return 0.0
    threshold = otsu_level(pixels)
    ink = Image.fromarray(((pixels < threshold) * 255).astype(numpy.uint8))
    coarse = numpy.arange(-MAX_DEGREES, MAX_DEGREES + COARSE_STEP / 2, COARSE_STEP)
    best = max(coarse, key=lambda angle: _sharpness(ink, float(angle)))
    fine = numpy.arange(best - COARSE_STEP, best + COARSE_STEP + FINE_STEP / 2, FINE_STEP)
    angle = float(max(fine, key=lambda a: _sharpness(ink, float(a))))
    return round(angle, 1) if _sharpness(ink, angle) > _sharpness(ink, 0.0) else 0.0


def _sharpness(ink: Image.Image, angle: float) -> float:
    """How sharply the ink's row sums rise and fall once turned by `angle` degrees."""
    turned = ink.rotate(angle, resample=Image.Resampling.NEAREST)
    rows = numpy.asarray(turned, dtype=numpy.float32).sum(axis=1)
    return float(numpy.square(numpy.diff(rows)).sum())


def straightened(path: str, angle: float, suffix: str = "straight") -> str:
    """The page image turned by `angle` degrees about its centre, same size, white corners,
    written beside it as ``<stem>-<suffix>.png`` (resolution kept)."""
    with Image.open(path) as image:
        dpi = image.info.get("dpi")
        turned = image.convert("RGB").rotate(
            angle, resample=Image.Resampling.BICUBIC, fillcolor=(255, 255, 255)
        )
    target = Path(path).with_name(f"{Path(path).stem}-{suffix}.png")
    turned.save(target, format="PNG", compress_level=1, **({"dpi": dpi} if dpi else {}))
    return str(target)


def unturn_box(box: Box, angle: float, width: int, height: int) -> Box:
    """A box read on the straightened image, as the box around it on the page as rendered."""
    # PIL turned each point counter-clockwise about the centre (y points down); undo that.
    cx, cy = width / 2, height / 2
    cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    xs, ys = [], []
    for x, y in ((box[0], box[1]), (box[2], box[1]), (box[0], box[3]), (box[2], box[3])):
        dx, dy = x - cx, y - cy
        xs.append(cx + dx * cos - dy * sin)
        ys.append(cy + dx * sin + dy * cos)
    return (
        min(max(min(xs), 0.0), width),
        min(max(min(ys), 0.0), height),
        min(max(max(xs), 0.0), width),
        min(max(max(ys), 0.0), height),
    )


def unturn_blocks(blocks: list[Block], angle: float, width: int, height: int) -> list[Block]:
    """The blocks (and their table cells) with boxes on the page as rendered."""
    return [_unturn_block(block, angle, width, height) for block in blocks]


def _unturn_block(block: Block, angle: float, width: int, height: int) -> Block:
    if not block.bbox_px:
        return block
    box = unturn_box(_box(block.bbox_px), angle, width, height)
    bbox, bbox_px = Frame(width, height, width, height).place(box)
    table = block.table
    if table is not None:
        cells = [_unturn_cell(cell, angle, width, height) for cell in table.cells]
        table = msgspec.structs.replace(table, cells=cells)
    return msgspec.structs.replace(block, bbox=bbox, bbox_px=bbox_px, table=table)


def _unturn_cell(cell: Cell, angle: float, width: int, height: int) -> Cell:
    if len(cell.bbox) != 4:
        return cell
    x0, y0, x1, y1 = _box(cell.bbox)
    pixels = (x0 * width, y0 * height, x1 * width, y1 * height)
    x0, y0, x1, y1 = unturn_box(pixels, angle, width, height)
    bbox = [
        round(x0 / width, 4),
        round(y0 / height, 4),
        round(x1 / width, 4),
        round(y1 / height, 4),
    ]
    return msgspec.structs.replace(cell, bbox=bbox)


def _box(values: Sequence[float]) -> Box:
    return (float(values[0]), float(values[1]), float(values[2]), float(values[3]))
