"""A scan's printed lines: pieces of one line that the engine read apart are joined again."""

from __future__ import annotations

from ocrq.consumer.layout.words import ReadWord, printed_lines

HEIGHT = 20.0


def _line(texts: list[str], x: float, row: int, line: int, paragraph: int) -> list[ReadWord]:
    """Words of one engine line from ``x``, 60 px apart, on row ``row`` (30 px a row)."""
    top = 100.0 + 30 * row
    return [
        ReadWord(
            text, (x + 60 * i, top, x + 60 * i + 50, top + HEIGHT), 0.95, line, paragraph=paragraph
        )
        for i, text in enumerate(texts)
    ]


def _texts(lines: list[list[ReadWord]]) -> list[str]:
    return [" ".join(word.text for word in line) for line in lines]


def test_a_one_line_paragraph_beside_a_line_joins_it_in_place() -> None:
    # Tesseract cut "Second, because the context encoder is" at a false column boundary and
    # read the second piece after the whole paragraph.
    words = [
        *_line(["weaknesses.", "First,", "ICT"], 0, 0, 0, 1),
        *_line(["function.", "Second,", "becaus"], 0, 1, 1, 1),
        *_line(["not", "fine-tuned", "using"], 0, 2, 2, 1),
        *_line(["the", "context", "encoder"], 205, 1, 3, 2),
    ]

    assert _texts(printed_lines(words)) == [
        "weaknesses. First, ICT",
        "function. Second, becaus the context encoder",
        "not fine-tuned using",
    ]


def test_a_column_of_several_lines_beside_another_stays_apart() -> None:
    left = [*_line(["a", "b"], 0, 0, 0, 1), *_line(["c", "d"], 0, 1, 1, 1)]
    right = [*_line(["e", "f"], 140, 0, 2, 2), *_line(["g", "h"], 140, 1, 3, 2)]

    assert _texts(printed_lines(left + right)) == ["a b", "c d", "e f", "g h"]


def test_a_piece_far_along_the_row_or_on_another_row_stays_apart() -> None:
    paragraph = [*_line(["a", "b"], 0, 0, 0, 1), *_line(["c", "d"], 0, 1, 1, 1)]
    far = _line(["total", "31.00"], 110 + 3.5 * HEIGHT, 0, 2, 2)  # 3.5 line heights away
    below = _line(["note"], 0, 3, 3, 3)

    assert _texts(printed_lines(paragraph + far + below)) == ["a b", "c d", "total 31.00", "note"]


def test_an_engine_without_paragraphs_keeps_its_lines() -> None:
    # RapidOCR's words all carry paragraph 0: no line is a paragraph of its own.
    words = [*_line(["a", "b"], 0, 0, 0, 0), *_line(["c"], 115, 0, 1, 0)]

    assert _texts(printed_lines(words)) == ["a b", "c"]


def test_columns_of_vertical_text_stay_apart() -> None:
    # Japanese set vertically: each line is a tall, narrow column beside the next.
    column = [ReadWord("縦書き", (300.0, 100.0, 330.0, 400.0), 0.9, 0, paragraph=1)]
    beside = [ReadWord("の文章", (260.0, 100.0, 290.0, 380.0), 0.9, 1, paragraph=2)]
    next_one = [ReadWord("です", (220.0, 100.0, 250.0, 300.0), 0.9, 2, paragraph=1)]

    assert _texts(printed_lines(column + beside + next_one)) == ["縦書き", "の文章", "です"]
