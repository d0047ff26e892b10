"""A recognised word as the layout steps for scans read it."""

from __future__ import annotations

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
