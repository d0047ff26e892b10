"""Dots and accents read as a line of their own, on top of the words they belong to, go."""

from __future__ import annotations

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


def test_a_full_stop_ending_the_line_above_is_kept() -> None:
    # issue16538 (Japanese, tight lines): the full stop at a line's end sits just above a
    # word of the next line, outside that word's box.
    stop = word(".", (793, 315, 796, 317), 0.91, 1)
    below = word("取引", (776, 327, 867, 349), 0.95, 2)

    assert without_detached_marks([stop, below]) == [stop, below]


def test_a_colon_read_on_a_line_of_its_own_is_kept() -> None:
    # A colon's centre is at mid-height of the words beside it, not at their top.
    label = word("Cashier", (40, 300, 100, 314), 0.95, 8)
    colon = word(":", (110, 303, 112, 311), 0.78, 9)
    value = word("MANIS", (120, 300, 170, 314), 0.95, 8)
    inside = word(":", (60, 306, 62, 308), 0.6, 9)  # inside a word, below its top quarter

    assert without_detached_marks([label, colon, value, inside]) == [label, colon, value, inside]


def test_a_mark_on_a_word_read_without_confidence_is_kept() -> None:
    # The word under it may be the misreading: nothing says the mark is its ink.
    weak = word("Santc", (1081, 883, 1123, 895), 0.5, 41)
    accent = word("'", (1118, 883, 1121, 885), 0.3, 40)

    assert without_detached_marks([accent, weak]) == [accent, weak]


def test_a_mark_on_its_own_lines_word_is_kept() -> None:
    # Tesseract's own word splits ("l" "." in one line) are not another line's ink.
    name = word("Nationale", (982, 883, 1051, 895), 0.96, 41)
    dot = word(".", (1008, 883, 1010, 885), 0.8, 41)

    assert without_detached_marks([name, dot]) == [name, dot]


def test_a_page_without_words_is_empty() -> None:
    assert without_detached_marks([]) == []
