"""The lines of words a job's pages hold, with their boxes: what fields are read from.

Engine pages give their words (consumer/engines/base.py Word, pixels of the upright page);
text-layer pages give theirs from the PDF (PyMuPDF's words, in points); a page with neither
(a vLLM segment of several pages) falls back to its blocks, one line per line of block text,
each boxed by its block. Boxes here are 0..1 of the page, as a Block's bbox.
"""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from dataclasses import dataclass, field

from ocrq.consumer.engines.base import Word
from ocrq.shared.schemas import Page

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PlacedWord:
    """A word and its box (0..1 of its page)."""

    text: str
    box: Box


@dataclass
class Line:
    """One line of words on a page, left to right."""

    page: int
    words: list[PlacedWord] = field(default_factory=list)
    confidence: float = 1.0

    @property
    def text(self) -> str:
        """The words joined by single spaces."""
        return " ".join(w.text for w in self.words)

    @property
    def box(self) -> Box:
        """The box around every word of the line."""
        return union([w.box for w in self.words])


def union(boxes: list[Box]) -> Box:
    """The smallest box holding every box."""
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def words_in_lines(words: list[PlacedWord], page: int, confidence: float) -> list[Line]:
    """Words grouped into lines: a word joins the line whose vertical middle it straddles."""
    lines: list[Line] = []
    for word in sorted(words, key=lambda w: (w.box[1] + w.box[3]) / 2):
        middle = (word.box[1] + word.box[3]) / 2
        line = next((ln for ln in reversed(lines[-3:]) if _straddles(ln, middle)), None)
        if line is None:
            line = Line(page, confidence=confidence)
            lines.append(line)
        line.words.append(word)
    for line in lines:
        line.words.sort(key=lambda w: w.box[0])
    lines.sort(key=lambda ln: (ln.box[1], ln.box[0]))
    return lines


def _straddles(line: Line, middle: float) -> bool:
    top = min(w.box[1] for w in line.words)
    bottom = max(w.box[3] for w in line.words)
    return top <= middle <= bottom


def engine_lines(page: Page, words: list[Word]) -> list[Line]:
    """An engine page's words (pixels) as lines of 0..1 boxes."""
    w, h = max(page.width, 1), max(page.height, 1)
    placed = [
        PlacedWord(word.text, (word.box[0] / w, word.box[1] / h, word.box[2] / w, word.box[3] / h))
        for word in words
        if word.text.strip()
    ]
    return words_in_lines(placed, page.number, page.confidence or 1.0)


def block_lines(page: Page) -> list[Line]:
    """A page without words: each line of each block's text, boxed by its block."""
    lines: list[Line] = []
    for block in page.blocks:
        if len(block.bbox) != 4 or block.label in ("figure", "table"):
            continue
        box: Box = (block.bbox[0], block.bbox[1], block.bbox[2], block.bbox[3])
        for text in block.text.splitlines():
            if text.strip():
                words = [PlacedWord(t, box) for t in text.split()]
                lines.append(Line(page.number, words, block.confidence or 1.0))
    return lines


def pdf_words(path: str, numbers: list[int]) -> dict[int, list[Line]]:
    """The text layer's lines of the given pages (1-based), read with PyMuPDF (blocking).

    Words are grouped by where they stand, not by the PDF's own blocks: a label and its value
    are often separate blocks of one visual line.
    """
    import pymupdf  # the worker's extra; imported here so the key-value code needs no PDF

    found: dict[int, list[Line]] = {}
    with pymupdf.open(path, filetype="pdf") as doc:
        for number in numbers:
            page = doc[number - 1]
            w, h = max(page.rect.width, 1.0), max(page.rect.height, 1.0)
            placed = []
            for *corners, text, _block, _line, _word in page.get_text("words"):
                # Words come unrotated; a rotated page's blocks are given as shown.
                r = pymupdf.Rect(corners[:4]) * page.rotation_matrix
                placed.append(PlacedWord(text, (r.x0 / w, r.y0 / h, r.x1 / w, r.y1 / h)))
            found[number] = words_in_lines(placed, number, 1.0)
    return found
