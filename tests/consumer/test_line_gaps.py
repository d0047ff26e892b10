"""Blank paper between a row's words is cut down before the second recogniser reads it."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from pathlib import Path

import numpy
import pymupdf
import pytest
from PIL import Image, ImageDraw

from ocrq.consumer.engines.line_gaps import KEPT_GAP, squeezed, unsqueezed
from ocrq.consumer.engines.line_reader import LineReader, LineText
from ocrq.consumer.layout.structure import Rect

HEIGHT = 30  # the text's height in the line images below


def line_with_ink(width: int, boxes: list[Rect]) -> Image.Image:
    """A white line image with a black bar where each word is (x in the image)."""
    image = Image.new("RGB", (width, 40), "white")
    draw = ImageDraw.Draw(image)
    for x0, _, x1, _ in boxes:
        draw.rectangle((x0, 5, x1 - 1, 34), fill="black")
    return image


def ink(image: Image.Image) -> int:
    return int((numpy.asarray(image.convert("L")) < 128).sum())


def test_a_wide_gap_between_words_is_cut_down_and_all_ink_kept() -> None:
    boxes: list[Rect] = [(10, 5, 100, 35), (500, 5, 580, 35)]
    line = line_with_ink(600, boxes)

    cut = squeezed(line, boxes, left=0, height=HEIGHT)

    kept = KEPT_GAP * HEIGHT  # half of it after the first word, half before the second
    assert cut.image.width == round(100 + kept / 2) + (600 - round(500 - kept / 2))
    assert ink(cut.image) == ink(line)


def test_ink_the_first_reading_missed_in_a_gap_is_kept_with_blank_round_it() -> None:
    # "Total :   80.91": the first reading boxed "Total" and "80.91", not the colon.
    boxes: list[Rect] = [(10, 5, 100, 35), (500, 5, 580, 35)]
    line = line_with_ink(600, [*boxes, (110, 5, 116, 35), (300, 5, 310, 35)])

    cut = squeezed(line, boxes, left=0, height=HEIGHT)

    assert ink(cut.image) == ink(line)
    assert len(cut.starts) == 3  # cut after the colon, and on each side of the middle mark


def test_the_gaps_between_words_of_a_phrase_are_left_alone() -> None:
    boxes: list[Rect] = [(10, 5, 100, 35), (115, 5, 200, 35), (215, 5, 260, 35)]
    line = line_with_ink(300, boxes)

    cut = squeezed(line, boxes, left=0, height=HEIGHT)

    assert cut.image is line


def test_boxes_in_page_pixels_are_placed_by_the_lines_left_edge() -> None:
    # The line was cut from the page at x = 1000: its words' page boxes lie 1000 px right.
    boxes: list[Rect] = [(1010, 5, 1100, 35), (1500, 5, 1580, 35)]
    line = line_with_ink(600, [(10, 5, 100, 35), (500, 5, 580, 35)])

    cut = squeezed(line, boxes, left=1000, height=HEIGHT)

    assert cut.image.width < 300
    assert ink(cut.image) == ink(line)


def test_characters_read_in_the_squeezed_line_go_back_where_they_are_in_the_line() -> None:
    boxes: list[Rect] = [(10, 5, 100, 35), (500, 5, 580, 35)]
    cut = squeezed(line_with_ink(600, boxes), boxes, left=0, height=HEIGHT)
    second_word_starts = cut.starts[1]
    reading = LineText(list("ab"), [0.9, 0.9], [50.0, second_word_starts + 30])

    back = unsqueezed(reading, cut)

    assert back.centres[0] == 50.0
    assert 500 < back.centres[1] < 580
    assert (back.chars, back.probabilities) == (reading.chars, reading.probabilities)


@pytest.fixture(scope="module")
def reader() -> LineReader:
    return LineReader()


def receipt_row(tmp_path: Path) -> tuple[Image.Image, list[Rect]]:
    """A receipt's row rendered at 150 DPI: a label at the left, its amount far right, and
    the words' boxes found from the ink (columns with dark pixels, split at blank runs)."""
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=20)
    page.insert_text((6, 15), "TOTAL", fontsize=14, fontname="helv")
    page.insert_text((340, 15), "60.31", fontsize=14, fontname="helv")
    page.get_pixmap(dpi=150).save(tmp_path / "row.png")
    image = Image.open(tmp_path / "row.png").convert("RGB")
    columns = (numpy.asarray(image.convert("L")) < 128).any(axis=0)
    inked = numpy.flatnonzero(columns)
    breaks = numpy.flatnonzero(numpy.diff(inked) > 30)  # blank runs wider than a space
    starts = [inked[0], *inked[breaks + 1]]
    ends = [*inked[breaks], inked[-1]]
    pairs = zip(starts, ends, strict=True)
    return image, [(float(a), 0.0, float(b + 1), float(image.height)) for a, b in pairs]


def test_a_receipt_row_reads_the_same_in_fewer_columns_with_its_amount_in_place(
    reader: LineReader, tmp_path: Path
) -> None:
    image, boxes = receipt_row(tmp_path)
    assert len(boxes) == 2

    whole = reader.read(image)
    cut = squeezed(image, boxes, left=0, height=boxes[0][3] / 1.5)
    read = unsqueezed(reader.read(cut.image), cut)

    assert cut.image.width < image.width / 2
    assert read.text.replace(" ", "") == whole.text.replace(" ", "") == "TOTAL60.31"
    assert " " in read.text  # the gap left is still read as a space
    amount = boxes[1]
    three = read.chars.index("3")
    assert amount[0] < read.centres[three] < amount[2]
