"""Marks at a line's ends that are not text: a rule, a box's side, a receipt's torn edge.

Tesseract reads the vertical rule of a receipt's box, the shadow of its edge or a fold
beside a line as "|", at 0.9 confidence and more, and the line is then too sure to be read
again (line_rereads.py). Measured on 90 SROIE receipts (000-049, 100-139): 100 such words
at the start or end of a line, or alone on one, and no transcript line of 130 receipts
starts or ends with one; dropping them took CER from 8.92 % to 8.76 %. It runs after the
re-reads: on a weak line PP-OCRv6 reads a bar that is a "1" ("| MAKANAN") as "1". Inside a
line they are kept: a form's column rule and a menu's "Home | Contact" stay where they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from ocrq.consumer.layout.words import ReadWord, engine_lines

# Shapes a line or an edge takes when read as characters. Not "[", "]" or "~": on receipts
# they stand for a misread "1" or "-" ("Cover : ]", "~ LION FILE"), which a substitution
# costs less than a deletion; not "_" (a form's blank), "/" ("RM / litre") or quotes.
EDGE_MARKS = frozenset("|\\")


def is_edge_mark(text: str) -> bool:
    """True for a word made of rule-like characters only ("|", "||", "\\")."""
    return bool(text) and set(text) <= EDGE_MARKS


def without_edge_marks(words: Sequence[ReadWord]) -> list[ReadWord]:
    """The words less the marks at each line's start and end (a line of marks goes whole)."""
    kept: list[ReadWord] = []
    for line in engine_lines(words):
        start, end = 0, len(line)
        while start < end and is_edge_mark(line[start].text):
            start += 1
        while end > start and is_edge_mark(line[end - 1].text):
            end -= 1
        kept.extend(line[start:end])
    return kept
