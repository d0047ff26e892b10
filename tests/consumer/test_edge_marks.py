"""Marks at a line's ends that are not text: a rule or an edge read as "|" is dropped."""

from __future__ import annotations

import pytest

from ocrq.consumer.engines.edge_marks import without_edge_marks
from ocrq.consumer.layout.words import ReadWord


def page(*lines: str) -> list[ReadWord]:
    """Words of these lines, one ReadWord a word, each line its own engine line."""
    out = []
    for number, text in enumerate(lines):
        for x, word in enumerate(text.split()):
            box = (x * 100.0, number * 40.0, x * 100.0 + 80, number * 40.0 + 30)
            out.append(ReadWord(word, box, 0.95, number))
    return out


def lines_of(words: list[ReadWord]) -> list[str]:
    out: dict[int, list[str]] = {}
    for word in words:
        out.setdefault(word.line, []).append(word.text)
    return [" ".join(texts) for texts in out.values()]


def test_a_bar_read_from_a_receipts_edge_is_dropped_at_either_end_of_its_line() -> None:
    words = page("MALAYSIA |", "| TEL : 03-40210276", "| | Total : 22.00 1.32 ||")

    assert lines_of(without_edge_marks(words)) == [
        "MALAYSIA",
        "TEL : 03-40210276",
        "Total : 22.00 1.32",
    ]


def test_a_line_of_bars_alone_goes_whole() -> None:
    words = page("Change Due 0.00", "|", "\\", "THANK YOU")

    assert lines_of(without_edge_marks(words)) == ["Change Due 0.00", "THANK YOU"]


def test_a_bar_inside_a_line_is_kept_as_read() -> None:
    # A form's column rule, a menu's separator: what stands between words is left alone.
    words = page("10 | cotisations sociales", "Home | Contact")

    assert lines_of(without_edge_marks(words)) == ["10 | cotisations sociales", "Home | Contact"]


@pytest.mark.parametrize("mark", ["]", "~", "/", "_", "!", "-", "*", "I", "l"])
def test_a_mark_that_may_be_text_is_kept_at_a_lines_end(mark: str) -> None:
    # "Cover : ]" was a "1", "~ LION FILE" a dash: a substitution costs less than a deletion.
    words = page(f"Cover : {mark}", f"{mark} LION FILE")

    assert lines_of(without_edge_marks(words)) == [f"Cover : {mark}", f"{mark} LION FILE"]
