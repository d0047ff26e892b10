"""Dots and accents read as words of their own, on top of the word they belong to.

On a page straightened by a few degrees (straighten.py), Tesseract's line finding can put
the dots of a line's i's and the accents of its é's on a line of their own, just above it,
and read them as "," "." "8": on the 160F form turned by -4°, the row "J) indemnisation par
la Caisse Nationale de Santé" came with a line ", . . 8" whose every mark sits on one of its
words ("i", "Caisse", "Nationale", "Santé"). The word below is already read with its dots;
the marks are the same ink read twice, and are dropped. A mark beside the words (a
superscript "6)"), or on no sure word, is not touched (BENCHMARKS.md, "Reading quality,
sixteenth pass").
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from ocrq.consumer.layout.rects import centre_inside
from ocrq.consumer.layout.structure import Rect
from ocrq.consumer.layout.words import ReadWord

# A mark is at most this high, of the page's median word height (an i's dot, an accent;
# a printed full stop is as low, but sits on its own line's baseline, not on a word).
MARK_HEIGHT = 0.35
MARK_CHARS = 2  # a mark reads as one or two characters
# The word under it: read this surely, and the mark's centre inside its box (whose top is
# the dots' and accents' top), no further below its top than this share of its height. A
# colon's or a full stop's centre is lower; the full stop ending the line above, just
# above the word's box (tight Japanese lines, a receipt's "Cashier :").
SURE_WORD = 0.85
TOP_SHARE = 0.25


def without_detached_marks(words: Sequence[ReadWord]) -> list[ReadWord]:
    """The words less the marks that sit on a sure word of another line."""
    if not words:
        return []
    height = median(word.box[3] - word.box[1] for word in words)
    sure = [word for word in words if word.confidence >= SURE_WORD and len(word.text) >= 2]
    return [word for word in words if not _on_a_word(word, sure, height)]


def _on_a_word(mark: ReadWord, sure: Sequence[ReadWord], height: float) -> bool:
    """True for a short, low mark whose centre lies on the top of a sure word of another line."""
    if len(mark.text.strip()) > MARK_CHARS or mark.box[3] - mark.box[1] > MARK_HEIGHT * height:
        return False
    return any(word.line != mark.line and centre_inside(mark.box, _top(word.box)) for word in sure)


def _top(box: Rect) -> Rect:
    """The top TOP_SHARE of a box, where a word's dots and accents are."""
    return (box[0], box[1], box[2], box[1] + TOP_SHARE * (box[3] - box[1]))
