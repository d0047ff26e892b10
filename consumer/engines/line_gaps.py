"""Wide blank gaps taken out of a line's image before the second recogniser reads it.

A receipt's rows run across the roll: "TOTAL" at the left, "60.31" at the right, and blank
paper between. PP-OCRv6's time is proportional to the columns it is shown (58 µs a column
at its 48-pixel height), and on 50 development receipts a fifth of the columns it read
again were such gaps. A gap between two of the first reading's words wider than ``WIDE_GAP``
line heights, with no ink in it either, is cut down to ``KEPT_GAP`` of blank, which the
model still reads as a space; where each character was read is then mapped back to the
image as cut from the page.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

import numpy
from PIL import Image

from ocrq.consumer.engines.line_reader import LineText
from ocrq.consumer.layout.structure import Rect

WIDE_GAP = 1.5  # line heights: a gap this wide between words is blank paper, not a space
KEPT_GAP = 1.0  # line heights of blank left in its place
MIN_CONTRAST = 32  # grey levels between ink and paper below which a line is not read as ink


class Squeezed(NamedTuple):
    """A line image with its wide gaps cut down, and how to map its columns back."""

    image: Image.Image
    starts: list[float]  # where each kept piece starts in the squeezed image
    shifts: list[float]  # columns removed before that piece


def squeezed(line: Image.Image, boxes: Sequence[Rect], left: float, height: float) -> Squeezed:
    """The line image (cut from the page at x = ``left``) with every blank run wider than
    WIDE_GAP line heights cut down to KEPT_GAP: no ink in it, and no word of the first
    reading (``boxes``, in page pixels) over it."""
    pieces = _kept_pieces(line, boxes, left, height)
    if len(pieces) == 1:
        return Squeezed(line, [0.0], [0.0])
    width = sum(b - a for a, b in pieces)
    out = Image.new(line.mode, (width, line.height), "white")
    starts, shifts, x = [], [], 0
    for a, b in pieces:
        out.paste(line.crop((a, 0, b, line.height)), (x, 0))
        starts.append(float(x))
        shifts.append(float(a - x))
        x += b - a
    return Squeezed(out, starts, shifts)


def unsqueezed(reading: LineText, squeeze: Squeezed) -> LineText:
    """The reading with each character's centre back where it is in the unsqueezed line."""
    centres = [c + squeeze.shifts[bisect_right(squeeze.starts, c) - 1] for c in reading.centres]
    return LineText(reading.chars, reading.probabilities, centres)


def _kept_pieces(
    line: Image.Image, boxes: Sequence[Rect], left: float, height: float
) -> list[tuple[int, int]]:
    """The column ranges of the line image to keep: all of it but the middles of blank runs
    wider than WIDE_GAP line heights. A column is blank when no word's box covers it and no
    pixel in it is ink: the first reading may have missed a faint word or a ":", which the
    second reading should see."""
    columns = _inked_columns(line)
    for x0, _, x1, _ in boxes:
        columns[max(0, round(x0 - left)) : max(0, round(x1 - left))] = True
    keep = round(KEPT_GAP * height / 2)  # blank kept on each side of a cut
    inked = numpy.flatnonzero(columns)
    if inked.size == 0:
        return [(0, line.width)]
    wide = numpy.flatnonzero(numpy.diff(inked) > WIDE_GAP * height)
    pieces, start = [], 0
    for i in wide:
        pieces.append((start, int(inked[i]) + 1 + keep))
        start = int(inked[i + 1]) - keep
    pieces.append((start, line.width))
    return pieces


def _inked_columns(line: Image.Image) -> numpy.ndarray:
    """Per column of the line image, True where a pixel is darker than half-way from the
    darkest ink to the paper."""
    grey = numpy.asarray(line.convert("L"), dtype=numpy.float32)
    darkest, paper = numpy.percentile(grey, [1, 90])
    if paper - darkest < MIN_CONTRAST:  # nothing printed: no column is known to be blank
        return numpy.ones(line.width, dtype=bool)
    return numpy.asarray((grey < (darkest + paper) / 2).any(axis=0))
