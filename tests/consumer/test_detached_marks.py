"""Dots and accents read as a line of their own, on top of the words they belong to, go."""

from __future__ import annotations

import pytest

from ocrq.consumer.engines.detached_marks import without_detached_marks
from ocrq.consumer.layout.words import ReadWord


def word(
    text: str, box: tuple[float, float, float, float], confidence: float, line: int
) -> ReadWord:
    return ReadWord(text, box, confidence, line)


# The row "J) indemnisation par la Caisse Nationale de Santé 6)" of the 160F form turned by
# -4° and straightened, as Tesseract read it (boxes in page pixels): the i's dots and the
# é's accent came back as a line of their own, above the row.
ROW = [
    word("J)", (752, 883, 765, 898), 0.37, 41),
    word("indemnisation", (771, 883, 873, 895), 0.91, 41),
    word("par", (880, 886, 903, 898), 0.97, 41),
    word("la", (908, 883, 920, 895), 0.95, 41),
    word("Caisse", (926, 883, 976, 895), 0.95, 41),
    word("Nationale", (982, 883, 1051, 895), 0.96, 41),
    word("de", (1057, 883, 1074, 895), 0.97, 41),
    word("Santé", (1081, 883, 1123, 895), 0.95, 41),
]
DOTS = [
    word(",", (771, 883, 773, 885), 0.45, 40),
    word(".", (947, 883, 949, 885), 0.48, 40),
    word(".", (1008, 883, 1010, 885), 0.8, 40),
    word("8", (1118, 883, 1121, 885), 0.28, 40),
]
SUPERSCRIPT = word("9", (1143, 879, 1152, 889), 0.55, 40)  # "6)", beside the words


def test_dots_and_accents_read_as_a_line_above_their_words_are_dropped() -> None:
    page = [*DOTS, SUPERSCRIPT, *ROW]

    kept = without_detached_marks(page)

    assert kept == [SUPERSCRIPT, *ROW]


KEPT = {
    # issue16538 (Japanese, tight lines): the full stop at a line's end sits just above a
    # word of the next line, outside that word's box.
    "a full stop ending the line above": [
        word(".", (793, 315, 796, 317), 0.91, 1),
        word("取引", (776, 327, 867, 349), 0.95, 2),
    ],
    # A colon's centre is at mid-height of the words beside it, not at their top; inside a
    # word, below its top quarter, it is kept too.
    "a colon read on a line of its own": [
        word("Cashier", (40, 300, 100, 314), 0.95, 8),
        word(":", (110, 303, 112, 311), 0.78, 9),
        word("MANIS", (120, 300, 170, 314), 0.95, 8),
        word(":", (60, 306, 62, 308), 0.6, 9),
    ],
    # The word under it may be the misreading: nothing says the mark is its ink.
    "a mark on a word read without confidence": [
        word("'", (1118, 883, 1121, 885), 0.3, 40),
        word("Santc", (1081, 883, 1123, 895), 0.5, 41),
    ],
    # Tesseract's own word splits ("l" "." in one line) are not another line's ink.
    "a mark on its own line's word": [
        word("Nationale", (982, 883, 1051, 895), 0.96, 41),
        word(".", (1008, 883, 1010, 885), 0.8, 41),
    ],
}


@pytest.mark.parametrize("page", KEPT.values(), ids=KEPT.keys())
def test_marks_that_are_not_a_sure_words_ink_on_another_line_are_kept(
    page: list[ReadWord],
) -> None:
    assert without_detached_marks(page) == page


def test_a_page_without_words_is_empty() -> None:
    assert without_detached_marks([]) == []
