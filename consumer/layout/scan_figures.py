"""Figures on a scanned page: large marks on the page image that are not recognised words.

The layout model reads a scan through its invisible-text page (consumer/layout/scanned.py),
which only holds words, so a picture without words in it is no region there. Here the page
image itself is read: downscaled, its ink (what differs from the paper) is found, the words'
boxes are wiped off it, what is left is closed (dilated) and split into connected parts;
large, not thin parts mostly free of words are figures: photos, charts, logos, stamps.
Only PIL and numpy: no image-processing library is a dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from statistics import median

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from ocrq.consumer.layout.ink import ink_parts
from ocrq.consumer.layout.placement import CAPTION, CAPTION_GAP, vertical_gap, x_overlap
from ocrq.consumer.layout.rects import area, centre_inside, clip, mostly_inside, union, within
from ocrq.consumer.layout.structure import Rect
from ocrq.consumer.layout.words import ReadWord

# A cell of the downscaled page is about this share of its short side (4 px at 200 DPI A4).
CELL_SHARE = 1 / 400
# Grey levels a cell must differ from the paper by to be ink: above a scan's noise (a few
# levels), below a 1 px line averaged over a 4 px cell (about 60).
INK_LEVELS = 24
# Marks closer than twice this (a share of the short side, ~9 pt on A4) are one figure: a
# chart's bars and axes, a diagram's boxes and arrows.
CLOSE_SHARE = 0.0075
# A figure covers at least this share of the page (a 3 cm logo on A4 is 1.6 %) ...
MIN_AREA_SHARE = 0.01
# ... and is no rule or border: its short side at least this share of the page's short side.
MIN_SIDE_SHARE = 0.03
MAX_ASPECT = 15.0
# Share of a part's box that is ink (words wiped): photos, charts, diagrams, logos and stamps
# measured 0.13 to 1.0; a form's dotted entry fields 0.02 to 0.03.
MIN_INK_SHARE = 0.08
# A part whose box is mostly words is text the engine read, not a picture.
MAX_WORD_COVER = 0.5
# Words the engine was this unsure of, or far taller than the page's text, are what it made
# of a picture's texture: they are not wiped off. A word's surer reading counts: a weak line
# that the second recogniser read again surely is print (sroie-005's "non-refundable*",
# unwiped, joined the circled handwritten sum beside it into one figure across the line
# ends "You***" and "Again***", whose words were then left out).
WIPE_MIN_CONFIDENCE = 0.5
WIPE_MAX_HEIGHT = 3.0
CAPTION_WORDS = ("figure", "fig.", "fig", "table", "tab.")
# A "figure" whose lines are mostly (this share, at least this many) lines of two or more
# words read at this mean confidence is text among rules and marks: its words stay text.
MIN_TEXT_LINES = 3
TEXT_LINE_SHARE = 0.5
TEXT_LINE_CONFIDENCE = 0.6


def find_figures(
    image_path: str,
    words: Sequence[ReadWord],
    known: Sequence[Rect] = (),
    avoid: Sequence[Rect] = (),
) -> list[Rect]:
    """Figure boxes (page pixels) on a page image, top to bottom.

    ``known`` are figures found already (the layout model's): a part overlapping one is
    merged with it. ``avoid`` are regions that are something else (tables): parts mostly
    inside one are not figures. A box whose lines are mostly confident text is no figure
    unless a caption stands beside it: a diagram straightened from a skewed scan reads its
    labels as such lines (13 of 15 on tracemonkey's Figure 2 turned 8 degrees).
    """
    with Image.open(image_path) as image:
        width, height = image.size
        cell = max(1, round(min(width, height) * CELL_SHARE))
        grey = np.asarray(image.convert("L").reduce(cell), dtype=np.int16)
    ink = np.abs(grey - _paper(grey)) > INK_LEVELS
    _wipe_words(ink, words, cell)
    reach = max(1, round(min(ink.shape) * CLOSE_SHARE))
    found = []
    for part in ink_parts(_dilate(ink, reach)):
        x0, y0, x1, y1 = _undilated(part, reach)
        box = _to_pixels((x0, y0, x1, y1), cell, width, height)
        if ink[y0:y1, x0:x1].mean() < MIN_INK_SHARE or any(mostly_inside(box, a) for a in avoid):
            continue
        if _figure_like(box, width, height, words):
            found.append(box)
    figures = [_grow(box, words) for box in _merge([*found, *known])]
    return sorted(
        box
        for box in figures
        if has_caption(box, words, height) or not _mostly_text_lines(box, words)
    )


def has_caption(box: Rect, words: Sequence[ReadWord], page_height: int) -> bool:
    """Whether a line opening "Figure 2." (or "Fig.", "Table") stands right above or below
    the box, sharing its width: a document's figure, not a receipt's stamp or a form's
    ruled boxes taken for a picture."""
    for _, line in _engine_lines(words):
        around = reduce(union, (word.box for word in line))
        if x_overlap(around, box) > 0 and vertical_gap(around, box) <= CAPTION_GAP * page_height:
            if CAPTION.match(" ".join(word.text for word in line)):
                return True
    return False


def _paper(grey: NDArray[np.int16]) -> int:
    """The paper's grey level: the most common one (a page is mostly paper)."""
    counts = np.bincount(grey.ravel().clip(0, 255).astype(np.int64), minlength=256)
    return int(np.argmax(counts))


def _wipe_words(ink: NDArray[np.bool_], words: Sequence[ReadWord], cell: int) -> None:
    """Clear the cells under confident, text-sized words (padded by a cell: anti-aliasing)."""
    heights = [w.box[3] - w.box[1] for w in words]
    tallest = WIPE_MAX_HEIGHT * median(heights) if heights else 0.0
    for word in words:
        x0, y0, x1, y1 = word.box
        if max(word.confidence, word.second_confidence) < WIPE_MIN_CONFIDENCE or y1 - y0 > tallest:
            continue
        ink[
            max(0, int(y0 // cell) - 1) : int(y1 // cell) + 2,
            max(0, int(x0 // cell) - 1) : int(x1 // cell) + 2,
        ] = False


def _dilate(mask: NDArray[np.bool_], reach: int) -> NDArray[np.bool_]:
    """The mask grown by ``reach`` cells (a square), on a canvas ``reach`` wider each side.

    A box filter of cumulative sums; the wider canvas keeps parts at the page's edge whole.
    """
    grown = np.pad(mask.astype(np.int32), 2 * reach + 1)
    sums = grown.cumsum(0).cumsum(1)
    side = 2 * reach + 1
    rows, cols = mask.shape[0] + 2 * reach, mask.shape[1] + 2 * reach
    window = (
        sums[side : side + rows, side : side + cols]
        - sums[0:rows, side : side + cols]
        - sums[side : side + rows, 0:cols]
        + sums[0:rows, 0:cols]
    )
    return np.asarray(window > 0)


def _undilated(box: tuple[int, int, int, int], reach: int) -> tuple[int, int, int, int]:
    """A part's box on the dilated canvas as cells of the page (x1, y1 exclusive)."""
    x0, y0 = box[0], box[1]
    return x0, y0, max(x0, box[2] - 2 * reach) + 1, max(y0, box[3] - 2 * reach) + 1


def _to_pixels(box: tuple[int, int, int, int], cell: int, width: int, height: int) -> Rect:
    """Cells (x1, y1 exclusive) as page pixels."""
    return (
        float(box[0] * cell),
        float(box[1] * cell),
        float(min(width, box[2] * cell)),
        float(min(height, box[3] * cell)),
    )


def _figure_like(box: Rect, width: int, height: int, words: Sequence[ReadWord]) -> bool:
    """Large enough, not a rule or a border line, and not mostly words."""
    w, h = box[2] - box[0], box[3] - box[1]
    if w * h < MIN_AREA_SHARE * width * height:
        return False
    if min(w, h) < MIN_SIDE_SHARE * min(width, height) or max(w, h) > MAX_ASPECT * min(w, h):
        return False
    covered = sum(area(clip(word.box, box)) for word in words if centre_inside(word.box, box))
    return covered <= MAX_WORD_COVER * w * h


def _mostly_text_lines(box: Rect, words: Sequence[ReadWord]) -> bool:
    """Whether most of the lines read inside the box are confident lines of several words.

    Measured: a diagram's labels are a quarter of its lines (5 of 21: short, scattered); a
    skewed form's ruled boxes taken whole for a picture held 47 of 54; a receipt's totals
    beside a circled handwritten sum 3 of 3. A chart's tick labels are one word a line.
    """
    lines = _engine_lines([word for word in words if centre_inside(word.box, box)])
    confident = [
        line for _, line in lines if len(line) >= 2 and _surest(line) >= TEXT_LINE_CONFIDENCE
    ]
    return len(confident) >= MIN_TEXT_LINES and len(confident) >= TEXT_LINE_SHARE * len(lines)


def _surest(line: Sequence[ReadWord]) -> float:
    """A line's mean confidence, by the surer of the engine's readings (a weak line of a
    receipt read again confidently is text)."""
    return sum(max(w.confidence, w.second_confidence) for w in line) / len(line)


def _merge(boxes: list[Rect]) -> list[Rect]:
    """Overlapping boxes joined into one, until none overlap."""
    out: list[Rect] = []
    for box in boxes:
        while True:
            touching = [other for other in out if area(clip(box, other)) > 0]
            if not touching:
                break
            for other in touching:
                out.remove(other)
                box = union(box, other)
        out.append(box)
    return out


def _grow(box: Rect, words: Sequence[ReadWord]) -> Rect:
    """The box widened to short labels just outside it (a chart's ticks), not to captions."""
    heights = [w.box[3] - w.box[1] for w in words]
    margin = 2 * median(heights) if heights else 0.0
    reach = (box[0] - margin, box[1] - margin, box[2] + margin, box[3] + margin)
    for _, line in _engine_lines(words):
        if all(within(w.box, reach) for w in line) and not _is_caption(line) and len(line) <= 6:
            if any(not centre_inside(w.box, box) for w in line):
                for word in line:
                    box = union(box, word.box)
    return box


def _engine_lines(words: Sequence[ReadWord]) -> list[tuple[int, list[ReadWord]]]:
    lines: dict[int, list[ReadWord]] = {}
    for word in words:
        lines.setdefault(word.line, []).append(word)
    return list(lines.items())


def _is_caption(line: Sequence[ReadWord]) -> bool:
    return bool(line) and line[0].text.lower().rstrip(":").startswith(CAPTION_WORDS)
