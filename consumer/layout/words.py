"""A recognised word as the layout steps for scans read it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import groupby
from typing import NamedTuple

from ocrq.consumer.layout.structure import Rect


class ReadWord(NamedTuple):
    """A recognised word (or line) in page pixels, its confidence and the engine line it is on."""

    text: str
    box: Rect
    confidence: float  # 0..1
    line: int  # the engine's line number: words of one line share it
    # The line's font size and baseline in pixels where the engine measures them (Tesseract's
    # row height does not shrink on a line without descenders, as its box does); 0: unknown.
    size: float = 0.0
    baseline: float = 0.0
    paragraph: int = 0  # the engine's paragraph number, where it makes paragraphs
    # The second recogniser's confidence in the word's line (0..1) where the line was read
    # again and that reading kept (consumer/engines/line_rereads.py); 0: not read again.
    second_confidence: float = 0.0


def moved(word: ReadWord, dx: float, dy: float) -> ReadWord:
    """The word read on a crop, in the pixels of the image it was cut from (its box and
    baseline shifted by the crop's corner)."""
    x0, y0, x1, y1 = word.box
    baseline = word.baseline + dy if word.baseline else 0.0
    return word._replace(box=(x0 + dx, y0 + dy, x1 + dx, y1 + dy), baseline=baseline)


def engine_lines(words: Iterable[ReadWord]) -> list[list[ReadWord]]:
    """The words in runs of one engine line each, in reading order."""
    return [list(group) for _, group in groupby(words, key=lambda word: word.line)]


# A line is a piece of another's printed line when it shares that line's row (this share of
# the shorter one's height) and starts within this many line heights of its end.
ROW_OVERLAP = 0.6
PIECE_GAP = 3.0


def printed_lines(words: Iterable[ReadWord]) -> list[list[ReadWord]]:
    """The engine's lines, with each line that is a paragraph of its own joined to the line it
    continues on the same row, left to right.

    Tesseract finds a column boundary in the gaps of justified text now and then, and cuts a
    printed line in two ("function. Second, becaus" | "the context encoder is"), the second
    piece a one-line paragraph read after the whole paragraph it belongs in. Words passed
    here are one region of the layout, which keeps a page's columns apart. Measured on
    born-digital pages outside the corpus: CER 7.3 % to 6.7 %, the corpus unchanged
    (BENCHMARKS.md, "Reading quality, thirteenth pass").
    """
    lines = engine_lines(words)
    sizes = Counter(word.paragraph for line in lines for word in line[:1])
    out: list[list[ReadWord]] = []
    for line in lines:
        alone = sizes[line[0].paragraph] == 1
        row = next((o for o in out if _continues(o, line)), None) if alone else None
        if row is None:
            out.append(list(line))
        else:
            row.extend(line)
            row.sort(key=lambda word: word.box[0])
    return out


def _continues(row: list[ReadWord], piece: list[ReadWord]) -> bool:
    """Whether ``piece`` lies on ``row``'s printed line, beside it (not over it); ``row``
    runs across the page (columns of vertical text stand side by side too)."""
    left, right = min(w.box[0] for w in row), max(w.box[2] for w in row)
    top, bottom = min(w.box[1] for w in row), max(w.box[3] for w in row)
    piece_top, piece_bottom = min(w.box[1] for w in piece), max(w.box[3] for w in piece)
    height = min(bottom - top, piece_bottom - piece_top)
    if height <= 0 or right - left < bottom - top:
        return False
    if min(bottom, piece_bottom) - max(top, piece_top) < ROW_OVERLAP * height:
        return False
    after = min(w.box[0] for w in piece) - right
    before = left - max(w.box[2] for w in piece)
    return -height <= max(after, before) <= PIECE_GAP * height
