"""Reading order: lines, paragraphs, columns and spanning blocks, on synthetic boxes and on the
word boxes of a two-column page laid out by PyMuPDF."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import random
from pathlib import Path

import pymupdf

from ocrq.consumer.reading_order import Box, find_column_cut, group_lines, order_lines, to_markdown

LINE = 30.0  # box height in pixels
STEP = 40.0  # baseline-to-baseline distance of consecutive lines


def column(x0: float, x1: float, top: float, words: list[str], step: float = STEP) -> list[Box]:
    """One box per word, each on its own line, stacked from ``top``."""
    return [Box(x0, top + i * step, x1, top + i * step + LINE, w) for i, w in enumerate(words)]


def flat_text(paragraphs: list[list[Box]]) -> list[str]:
    return [line.text for paragraph in paragraphs for line in paragraph]


def shuffled(boxes: list[Box]) -> list[Box]:
    boxes = list(boxes)
    random.Random(7).shuffle(boxes)
    return boxes


def test_words_on_one_line_merge_left_to_right_into_one_line() -> None:
    words = [
        Box(300, 12, 380, 40, "lazy"),
        Box(10, 10, 90, 40, "the"),
        Box(100, 8, 290, 41, "quick"),
    ]

    lines = group_lines(words)

    assert [line.text for line in lines] == ["the quick lazy"]
    assert (lines[0].x0, lines[0].y0, lines[0].x1, lines[0].y1) == (10, 8, 380, 41)
    assert [part.text for part in lines[0].parts] == ["the", "quick", "lazy"]


def test_merged_line_keeps_its_lowest_confidence() -> None:
    words = [Box(0, 0, 50, 30, "a", confidence=0.9), Box(60, 0, 90, 30, "b", confidence=0.6)]

    assert group_lines(words)[0].confidence == 0.6


def test_lines_are_ordered_top_to_bottom_whatever_the_input_order() -> None:
    boxes = column(10, 500, 0, ["one", "two", "three", "four"])

    assert flat_text(order_lines(shuffled(boxes))) == ["one", "two", "three", "four"]


def test_large_vertical_gap_starts_a_new_paragraph() -> None:
    first = column(10, 500, 0, ["a1", "a2", "a3"])
    second = column(10, 500, 3 * STEP + 50, ["b1", "b2"])  # one blank line (+50 px) between

    paragraphs = order_lines(first + second)

    assert [[line.text for line in p] for p in paragraphs] == [["a1", "a2", "a3"], ["b1", "b2"]]


def test_evenly_spaced_lines_stay_one_paragraph_even_when_double_spaced() -> None:
    boxes = column(10, 500, 0, ["l1", "l2", "l3", "l4", "l5"], step=2 * LINE)

    assert len(order_lines(boxes)) == 1


def test_two_columns_with_aligned_rows_are_read_column_by_column() -> None:
    left = column(50, 280, 100, ["L1", "L2", "L3", "L4", "L5"])
    right = column(320, 550, 100, ["R1", "R2", "R3", "R4", "R5"])

    text = flat_text(order_lines(shuffled(left + right)))

    assert text == ["L1", "L2", "L3", "L4", "L5", "R1", "R2", "R3", "R4", "R5"]


def test_short_right_column_is_still_a_column() -> None:
    left = column(50, 280, 100, [f"L{i}" for i in range(12)])
    right = column(320, 550, 100, ["R1", "R2"])

    text = flat_text(order_lines(left + right))

    assert text == [*(f"L{i}" for i in range(12)), "R1", "R2"]


def test_spanning_title_and_footer_frame_the_columns() -> None:
    title = Box(150, 20, 450, 60, "Title")
    footer = Box(50, 400, 550, 430, "Footer")
    left = column(50, 280, 100, ["L1", "L2", "L3"])
    right = column(320, 550, 100, ["R1", "R2", "R3"])

    text = flat_text(order_lines(shuffled([footer, *left, *right, title])))

    assert text == ["Title", "L1", "L2", "L3", "R1", "R2", "R3", "Footer"]


def test_spanning_block_mid_page_splits_the_columns_into_bands() -> None:
    upper = column(50, 280, 0, ["A1", "A2"]) + column(320, 550, 0, ["B1", "B2"])
    caption = Box(50, 120, 550, 150, "Caption")
    lower = column(50, 280, 200, ["C1", "C2"]) + column(320, 550, 200, ["D1", "D2"])

    text = flat_text(order_lines(shuffled([*upper, caption, *lower])))

    assert text == ["A1", "A2", "B1", "B2", "Caption", "C1", "C2", "D1", "D2"]


def test_three_columns_are_read_left_to_right() -> None:
    boxes = (
        column(20, 180, 0, ["a1", "a2", "a3"])
        + column(220, 380, 0, ["b1", "b2", "b3"])
        + column(420, 580, 0, ["c1", "c2", "c3"])
    )

    assert flat_text(order_lines(shuffled(boxes))) == [
        *("a1", "a2", "a3"),
        *("b1", "b2", "b3"),
        *("c1", "c2", "c3"),
    ]


def test_line_poking_into_the_gutter_stays_in_its_column() -> None:
    left = column(50, 280, 100, ["L1", "L2", "L3", "L4"])
    left[1] = Box(50, left[1].y0, 300, left[1].y1, "L2")  # 20 px into the 40 px gutter
    right = column(320, 550, 100, ["R1", "R2", "R3", "R4"])

    assert flat_text(order_lines(left + right)) == [
        *("L1", "L2", "L3", "L4"),
        *("R1", "R2", "R3", "R4"),
    ]


def test_single_column_with_ragged_line_ends_has_no_gutter() -> None:
    widths = [500, 480, 200, 510, 490, 150, 505]  # short lines end paragraphs
    boxes = [Box(50, i * STEP, 50 + w, i * STEP + LINE, f"l{i}") for i, w in enumerate(widths)]

    assert find_column_cut(boxes) is None
    assert flat_text(order_lines(boxes)) == [f"l{i}" for i in range(len(widths))]


def test_block_below_another_block_is_not_a_column() -> None:
    # Indented quotation under a paragraph: disjoint x ranges but no shared height.
    top = column(50, 250, 0, ["p1", "p2", "p3"])
    below = column(300, 550, 200, ["q1", "q2", "q3"])

    assert find_column_cut(top + below) is None


def words(x0: float, y0: float, text: str, height: float = LINE, space: float = 0.3) -> list[Box]:
    """One box per word of a line starting at (x0, y0): a word is 0.5 height per letter."""
    boxes = []
    for word in text.split():
        width = 0.5 * height * len(word)
        boxes.append(Box(x0, y0, x0 + width, y0 + height, word))
        x0 += width + space * height
    return boxes


def test_two_columns_under_a_full_width_title_and_abstract_read_title_first() -> None:
    title = Box(150, 0, 450, 60, "Title")
    abstract = column(50, 550, 80, ["Abstract across the page", "and its second line"])
    left = column(50, 280, 200, ["L1", "L2", "L3", "L4"])
    right = column(320, 550, 200, ["R1", "R2", "R3", "R4"])

    text = flat_text(order_lines(shuffled([*left, *right, *abstract, title])))

    assert text == [
        *("Title", "Abstract across the page", "and its second line"),
        *("L1", "L2", "L3", "L4"),
        *("R1", "R2", "R3", "R4"),
    ]


def test_title_with_a_word_gap_over_the_gutter_is_not_split_into_the_columns() -> None:
    title = words(80, 0, "Columns kept apart", height=2 * LINE)  # gap from 290 to 308
    left = column(50, 280, 100, ["L1", "L2", "L3"])
    right = column(320, 550, 100, ["R1", "R2", "R3"])

    text = flat_text(order_lines(shuffled([*left, *right, *title])))

    assert text == ["Columns kept apart", "L1", "L2", "L3", "R1", "R2", "R3"]


def test_wide_line_of_words_is_never_split_into_columns() -> None:
    boxes = words(50, 0, "one wide line of words") + words(50, STEP, "and another wide line")

    assert find_column_cut(boxes) is None
    assert flat_text(order_lines(boxes)) == ["one wide line of words", "and another wide line"]


def test_column_heading_above_the_first_row_stays_in_its_column() -> None:
    # The right column starts a line higher than the left one.
    heading = Box(320, 60, 450, 90, "Heading")
    left = column(50, 280, 100, ["L1", "L2", "L3"])
    right = column(320, 550, 100, ["R1", "R2", "R3"])

    text = flat_text(order_lines(shuffled([heading, *left, *right])))

    assert text == ["L1", "L2", "L3", "Heading", "R1", "R2", "R3"]


def test_single_column_with_indented_lines_stays_in_order() -> None:
    lefts = [90, 50, 50, 50, 90, 50, 120, 120, 50]  # paragraph indents and a quotation
    boxes = [Box(x, i * STEP, 550, i * STEP + LINE, f"l{i}") for i, x in enumerate(lefts)]

    assert find_column_cut(boxes) is None
    assert flat_text(order_lines(shuffled(boxes))) == [f"l{i}" for i in range(len(lefts))]


def test_list_markers_stay_on_the_lines_they_mark() -> None:
    markers = [Box(50, i * STEP, 70, i * STEP + LINE, f"{i + 1}.") for i in range(4)]
    items = column(100, 550, 0, ["first item", "second item", "third item", "fourth item"])

    text = flat_text(order_lines(shuffled(markers + items)))

    assert text == ["1. first item", "2. second item", "3. third item", "4. fourth item"]


def test_table_like_grid_is_read_column_by_column_each_top_to_bottom() -> None:
    caption = Box(50, 0, 500, 30, "Table 1: fruit by season")
    cells = [
        [
            Box(50 + 180 * c, 60 + i * STEP, 50 + 180 * c + w, 90 + i * STEP, f"c{c}r{i}")
            for i, w in enumerate([120, 90, 140, 100])
        ]
        for c in range(3)
    ]

    text = flat_text(order_lines(shuffled([caption, *(box for col in cells for box in col)])))

    assert text == [caption.text, *(box.text for col in cells for box in col)]


def test_ragged_right_column_is_read_after_the_whole_left_column() -> None:
    left = column(50, 280, 100, [f"L{i}" for i in range(6)])
    # Shorter lines of uneven length, set off by half a line from the left column's rows.
    ends = [550, 430, 520, 380, 400]
    right = [
        Box(320, 120 + i * STEP, end, 120 + i * STEP + LINE, f"R{i}") for i, end in enumerate(ends)
    ]

    text = flat_text(order_lines(shuffled(left + right)))

    assert text == [*(f"L{i}" for i in range(6)), *(f"R{i}" for i in range(5))]


LEFT_WORDS = "apricot basil cedar damson elderflower fennel ginger hazel iris juniper".split()
RIGHT_WORDS = "kestrel lapwing merlin nightjar osprey plover quail redstart swift teal".split()


def lay_out_two_columns(page: pymupdf.Page) -> None:
    """A centred title over two justified columns of distinct words, rows aligned."""
    title = pymupdf.Rect(72, 50, 540, 90)
    assert (
        page.insert_textbox(
            title, "A Title Across Both Columns", fontsize=20, align=pymupdf.TEXT_ALIGN_CENTER
        )
        >= 0
    )
    for rect, vocabulary in (
        ((72, 110, 296, 700), LEFT_WORDS),
        ((316, 110, 540, 700), RIGHT_WORDS),
    ):
        text = " ".join(vocabulary[i % len(vocabulary)] for i in range(120))
        assert (
            page.insert_textbox(
                pymupdf.Rect(*rect), text, fontsize=10, align=pymupdf.TEXT_ALIGN_JUSTIFY
            )
            >= 0
        )


def two_column_page(tmp_path: Path) -> list[Box]:
    """PyMuPDF's word boxes of a two-column page, in pixels of its 150 DPI render."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    lay_out_two_columns(page)
    pixmap = page.get_pixmap(dpi=150)
    pixmap.save(str(tmp_path / "page.png"))
    scale = pixmap.width / page.rect.width
    boxes = [
        Box(x0 * scale, y0 * scale, x1 * scale, y1 * scale, word)
        for x0, y0, x1, y1, word, *_ in page.get_text("words")
    ]
    doc.close()
    return boxes


def test_two_column_pdf_page_reads_all_of_the_left_column_first(tmp_path: Path) -> None:
    boxes = two_column_page(tmp_path)

    markdown = to_markdown(order_lines(boxes))

    found = markdown.split()
    left_at = [i for i, word in enumerate(found) if word in LEFT_WORDS]
    right_at = [i for i, word in enumerate(found) if word in RIGHT_WORDS]
    assert markdown.startswith("A Title Across Both Columns\n\n")
    assert len(left_at) + len(right_at) == len(boxes) - 5
    assert max(left_at) < min(right_at)


def test_markdown_joins_lines_with_newlines_and_paragraphs_with_blank_lines() -> None:
    paragraphs = [
        [Box(0, 0, 1, 1, "first line"), Box(0, 2, 1, 3, "second line")],
        [Box(0, 9, 1, 10, "next paragraph")],
    ]

    assert to_markdown(paragraphs) == "first line\nsecond line\n\nnext paragraph"


def test_no_boxes_give_no_paragraphs_and_empty_markdown() -> None:
    assert order_lines([]) == []
    assert to_markdown(order_lines([])) == ""
