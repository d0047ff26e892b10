"""Decimal points a reading dropped from a number come back where the pixels show them."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy
import pymupdf
import pytest
from PIL import Image, ImageDraw
from support.tesseract_scans import png_page, running_tesseract

from ocrq.consumer.engines.decimal_points import ink_blots, with_decimal_points
from ocrq.consumer.engines.readings import read_image
from ocrq.consumer.engines.tesseract import TesseractEngine, tessdata_dir
from ocrq.consumer.layout.words import ReadWord

DPI = 150
# A results table's row in 9 pt Times at 150 DPI: Tesseract reads its last two numbers as
# "34 12", their points two pixels each.
GAINS = "Gain 1.3 1.7 2.3 1.4 2.5 3.4 1.2"


def rendered(
    tmp_path: Path, *lines: str, size: float = 9, font: str = "tiro"
) -> tuple[str, pymupdf.Document]:
    """The lines in Times (or ``font``) at 150 DPI (a PNG) and the page they were drawn on."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for number, line in enumerate(lines):
        page.insert_text((60, 80 + number * size * 1.8), line, fontsize=size, fontname=font)
    path = tmp_path / "page.png"
    page.get_pixmap(dpi=DPI).save(str(path))
    return str(path), doc


def read_as(doc: pymupdf.Document, printed: str, text: str, line: int = 0) -> ReadWord:
    """A word read as ``text`` over the pixels where ``printed`` is drawn (the first match)."""
    rect = doc[0].search_for(printed)[0] * (DPI / 72)
    box = (float(rect.x0), float(rect.y0), float(rect.x1), float(rect.y1))
    return ReadWord(text, box, 0.9, line)


def test_a_tables_points_tesseract_dropped_come_back(tmp_path: Path) -> None:
    from tesserocr import PyTessBaseAPI

    path, _ = rendered(tmp_path, GAINS)
    with PyTessBaseAPI(path=tessdata_dir(), lang="eng+fra") as api:
        words = read_image(api, path).words

    texts = [word.text for word in with_decimal_points(path, words)]

    assert texts == GAINS.split(), [w.text for w in words]


@pytest.fixture(scope="module")
def plain_engine() -> Iterator[TesseractEngine]:
    """The engine with OCRQ_LOCAL_REREAD off: the re-read reads this module's row right on
    its own, so only this step can mend it there."""
    with running_tesseract(workers=1, reread=False) as engine:
        yield engine


async def test_the_engine_writes_a_point_back_that_its_reading_dropped(
    plain_engine: TesseractEngine, tmp_path: Path
) -> None:
    path, _ = rendered(tmp_path, "Method Speedup", GAINS)  # Tesseract reads 1.4 as "14"

    [page] = (await plain_engine.recognise([png_page(Path(path))])).pages

    assert page.markdown is not None
    assert "1.4" in page.markdown.split(), page.markdown


def test_a_receipts_amount_gets_its_point_where_the_page_has_two_places(tmp_path: Path) -> None:
    path, doc = rendered(tmp_path, "Total 80.91", "Rounding 0.01", size=10)
    words = [read_as(doc, "80.91", "8091"), read_as(doc, "0.01", "0.01", line=1)]

    assert [w.text for w in with_decimal_points(path, words)] == ["80.91", "0.01"]


@pytest.mark.parametrize(
    ("lines", "printed", "read"),
    [
        # No number on the page has a point: nothing says this one had.
        (["Total 80.91"], "80.91", "8091"),
        # The point would leave one place where the page's numbers have two.
        (["Tax 15.00 20.00", "Rate 76.6"], "76.6", "766"),
        # A colon's lower dot is on the baseline too.
        (["Time 12:30 Tax 15.00"], "12:30", "1230"),
        # A hyphen sits at mid height, and so does a middle dot, as small as a point.
        (["Code 12-30 Tax 15.00"], "12-30", "1230"),
        (["Code 12\u00b730 Tax 15.00"], "12\u00b730", "1230"),
        # Digits without a mark between them.
        (["Year 2018 Tax 15.00"], "2018", "2018"),
    ],
)
def test_no_point_is_added_without_a_point_on_the_baseline_and_the_pages_places(
    tmp_path: Path, lines: list[str], printed: str, read: str
) -> None:
    path, doc = rendered(tmp_path, *lines, size=10)
    others = [
        ReadWord(word, (0.0, 0.0, 1.0, 1.0), 0.9, 1)
        for word in " ".join(lines).split()
        if word != printed
    ]
    word = read_as(doc, printed, read)

    assert with_decimal_points(path, [word, *others])[0].text == read


def test_a_speck_among_broken_and_joined_digits_is_no_point(tmp_path: Path) -> None:
    # Faint print as on a receipt's postcode: one "0" broken in two, "00" run together and a
    # speck on the baseline between them make five blots for five digits.
    image, word, digits = courier_number(tmp_path, "Postcode 40300", "40300")
    zero, three, end = digits[1], digits[2], digits[4]
    assert len(digits) == 5 and three[0] - (zero[0] + zero[2]) >= 4  # room for a speck
    foot, middle = zero[1] + zero[3] - 1, zero[0] + zero[2] // 2
    gap = (zero[0] + zero[2] + three[0]) // 2
    draw = ImageDraw.Draw(image)
    draw.line((middle, word.box[1], middle, foot), "white", 2)
    draw.rectangle((gap - 1, foot - 1, gap, foot), fill="black")
    draw.rectangle((digits[3][0] + digits[3][2] - 2, foot - 8, end[0] + 2, foot - 6), "black")

    assert read_with_two_places(image, word, tmp_path) == "40300"


def test_a_speck_that_touches_a_digits_box_is_no_point(tmp_path: Path) -> None:
    # A serif "1"'s foot broken off its stem (SROIE 379's "100") lies on the baseline too,
    # but against the digit: a point stands clear of both its neighbours.
    image, word, digits = courier_number(tmp_path, "Rate 760", "760")
    seven = digits[0]
    right, foot = seven[0] + seven[2], seven[1] + seven[3] - 1
    ImageDraw.Draw(image).rectangle((right - 1, foot - 1, right, foot), fill="black")

    assert read_with_two_places(image, word, tmp_path) == "760"


def test_a_dash_on_the_baseline_is_no_point(tmp_path: Path) -> None:
    # An underscore's stub between two digits is small and on the baseline, but no dot.
    image, word, digits = courier_number(tmp_path, "Rate 760", "760")
    seven, six = digits[0], digits[1]
    gap, foot = (seven[0] + seven[2] + six[0]) // 2, seven[1] + seven[3] - 1
    assert six[0] - (seven[0] + seven[2]) >= 6  # room for a dash standing clear
    ImageDraw.Draw(image).rectangle((gap - 2, foot, gap + 1, foot), fill="black")

    assert read_with_two_places(image, word, tmp_path) == "760"


def courier_number(
    tmp_path: Path, line: str, number: str
) -> tuple[Image.Image, ReadWord, list[tuple[int, int, int, int]]]:
    """The line in Courier 14 pt as a page image, its number read as printed, and the
    number's blots of ink left to right in page pixels (x, y, width, height)."""
    path, doc = rendered(tmp_path, line, size=14, font="cour")
    word = read_as(doc, number, number)
    x0, y0, x1, y1 = (round(v) for v in word.box)
    with Image.open(path) as opened:
        image = opened.convert("RGB")
    blots = ink_blots(numpy.asarray(image.crop((x0, y0, x1, y1)).convert("L")))
    return image, word, [(x0 + x, y0 + y, w, h) for x, y, w, h in blots]


def read_with_two_places(image: Image.Image, word: ReadWord, tmp_path: Path) -> str:
    """The word's text after with_decimal_points on the image, on a page whose numbers have
    two places."""
    path = tmp_path / "drawn.png"
    image.save(path)
    amount = ReadWord("15.00", (0.0, 0.0, 1.0, 1.0), 0.9, 1)
    return with_decimal_points(str(path), [word, amount])[0].text


def word_at(text: str, x0: float, x1: float, line: int = 0) -> ReadWord:
    """A word read on a receipt's line, 20 px tall, between x0 and x1."""
    return ReadWord(text, (x0, 100.0 + 30 * line, x1, 120.0 + 30 * line), 0.9, line)


def amounts_page(tmp_path: Path, *words: ReadWord) -> list[str]:
    """The words' texts after with_decimal_points, on a page that also holds five amounts
    written with a point (each on a line of its own)."""
    path = tmp_path / "blank.png"
    Image.new("L", (600, 400), 255).save(path)
    amounts = [
        word_at(text, 10, 60, line=5 + n)
        for n, text in enumerate(("14.99", "-5.00", "9.90SR", "0.02", "31.60"))
    ]
    return [w.text for w in with_decimal_points(str(path), [*words, *amounts])][: -len(amounts)]


def test_an_amount_read_with_a_comma_gets_its_point_but_a_printed_comma_stays(
    tmp_path: Path,
) -> None:
    # SROIE 302 reads "98,37" beside "98.37"; SROIE 000's address "No.53 55,57 & 59" has a
    # comma, whose tail goes below the digits.
    lines = [
        "Total 98.37 Cash 100.00",
        "Change 1.63 Tax 0.30 Due 5.00 Paid 9.00",
        "No.53 55,57 & 59",
    ]
    path, doc = rendered(tmp_path, *lines, size=10, font="cour")
    amount, address = read_as(doc, "98.37", "98,37"), read_as(doc, "55,57", "55,57", line=2)
    others = [
        read_as(doc, text, text, line=1) for text in ("100.00", "1.63", "0.30", "5.00", "9.00")
    ]

    texts = [w.text for w in with_decimal_points(path, [amount, address, *others])]

    assert texts[:2] == ["98.37", "55,57"]


def test_commas_stay_where_the_page_writes_amounts_with_them_or_they_part_thousands(
    tmp_path: Path,
) -> None:
    path = tmp_path / "blank.png"
    Image.new("L", (600, 400), 255).save(path)
    french = [
        word_at(text, 10, 60, line=n) for n, text in enumerate(("55,57", "33,92", "4,50", "1.25"))
    ]
    assert [w.text for w in with_decimal_points(str(path), french)] == [
        "55,57",
        "33,92",
        "4,50",
        "1.25",
    ]
    # Amounts with a comma too many to be misreads: a page of both (a point, more often, in
    # its other numbers).
    mixed = ("1.5", "2.5", "3.5", "4.5", "7.80", "8.80", "9.80", "12,50", "3,20")
    both = [word_at(text, 10, 60, line=n) for n, text in enumerate(mixed)]
    assert [w.text for w in with_decimal_points(str(path), both)] == list(mixed)
    # A thousands comma has three digits after it.
    assert amounts_page(tmp_path, word_at("1,000", 100, 150)) == ["1,000"]


def test_an_amount_split_at_its_point_is_joined_again(tmp_path: Path) -> None:
    # SROIE 302 "21." "10SR" (0.9 of a character apart), SROIE 316 "RM1." "38" (0.8), SROIE 326
    # "21" ".60" (0.6): a fixed-width font gives the point a whole character's cell.
    split = [
        (word_at("21.", 100, 130), word_at("10SR", 139, 179)),
        (word_at("RM1.", 100, 140, line=1), word_at("38", 148, 168, line=1)),
        (word_at("21", 100, 120, line=2), word_at(".60", 126, 156, line=2)),
    ]
    texts = amounts_page(tmp_path, *(w for pair in split for w in pair))

    assert texts == ["21.10SR", "RM1.38", "21.60"]


def test_numbers_a_space_apart_or_on_two_lines_stay_apart(tmp_path: Path) -> None:
    apart = [word_at("2.", 100, 120), word_at("40", 140, 160)]  # 2 characters apart
    two_lines = [word_at("3.", 100, 120, line=1), word_at("50", 125, 145, line=2)]
    not_cents = [word_at("12.", 100, 130, line=3), word_at("500", 132, 162, line=3)]

    assert amounts_page(tmp_path, *apart, *two_lines, *not_cents) == [
        "2.",
        "40",
        "3.",
        "50",
        "12.",
        "500",
    ]
