"""Lines the first reading missed: ink no word covers is read as a line and put in place."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from PIL import Image
from support.tesseract_scans import read_scan, running_tesseract

from ocrq.consumer.engines.line_reader import LineText
from ocrq.consumer.engines.missed_lines import read_missed_lines
from ocrq.consumer.engines.readings import read_image
from ocrq.consumer.engines.tesseract import TesseractEngine, tessdata_dir
from ocrq.consumer.layout.words import ReadWord

DATA = Path(__file__).parent / "data"
DPI = 150
# A till roll's lines: (text, font size); the total printed double height, as receipts do.
RECEIPT = [
    ("Service Chrg RM 5.83", 10),
    ("Rounding Adjustment RM 0.02", 10),
    ("TOTAL RM 64.15", 20),
    ("CASH RM 100.00", 10),
    ("Thank you, come again", 10),
]


@pytest.fixture(scope="module")
def line_api() -> Iterator[Any]:
    """Tesseract set for single lines, as the engine reads a band."""
    from tesserocr import PSM, PyTessBaseAPI

    with PyTessBaseAPI(path=tessdata_dir(), lang="eng", psm=PSM.SINGLE_LINE) as api:
        yield api


def receipt(tmp_path: Path, rule: bool = False) -> tuple[Path, list[ReadWord]]:
    """A narrow page of RECEIPT's lines at 150 DPI, and every word on it with its line."""
    doc = pymupdf.open()
    page = doc.new_page(width=220, height=60 + 30 * len(RECEIPT))
    for k, (text, size) in enumerate(RECEIPT):
        page.insert_text((12, 40 + 30 * k), text, fontsize=size, fontname="cour")
    if rule:  # a solid bar as tall as the text, between the first two lines
        page.draw_rect(pymupdf.Rect(12, 44, 200, 52), color=(0, 0, 0), fill=(0, 0, 0))
    path = tmp_path / "receipt.png"
    page.get_pixmap(dpi=DPI).save(path)
    scale = DPI / 72
    found = page.get_text("words", sort=True)
    numbers = {key: k for k, key in enumerate(dict.fromkeys((w[5], w[6]) for w in found))}
    words = [
        ReadWord(w[4], (w[0] * scale, w[1] * scale, w[2] * scale, w[3] * scale), 0.9, line)
        for w in found
        for line in [numbers[(w[5], w[6])]]
    ]
    return path, words


def lines_of(words: list[ReadWord]) -> list[str]:
    out: dict[int, list[str]] = {}
    for word in words:
        out.setdefault(word.line, []).append(word.text)
    return [" ".join(texts) for texts in out.values()]


def test_a_line_the_first_reading_missed_is_read_and_put_in_its_place(
    line_api: Any, tmp_path: Path
) -> None:
    path, every = receipt(tmp_path)
    first = [w for w in every if w.line != 2]  # the double-height total, missed

    placed = read_missed_lines(line_api, str(path), first, join_rows=True)

    read = lines_of(placed)
    assert read[:2] == ["Service Chrg RM 5.83", "Rounding Adjustment RM 0.02"]
    assert read[2].replace(" ", "") == "TOTALRM64.15"
    assert read[3:] == ["CASH RM 100.00", "Thank you, come again"]
    new = [w for w in placed if w not in first]
    assert len({w.line for w in new}) == 1 and new[0].line not in {w.line for w in first}
    # Its boxes and baseline are the page's, not the cut-out band's.
    [total] = [w for w in every if w.line == 2][:1]
    assert total.box[1] <= new[0].box[1] < new[0].box[3] <= total.box[3]
    assert all(w.box[1] <= w.baseline <= w.box[3] + 2 for w in new if w.baseline)


def test_the_missed_end_of_a_line_joins_its_line_on_a_till_roll(
    line_api: Any, tmp_path: Path
) -> None:
    path, every = receipt(tmp_path)
    first = [w for w in every if w.text != "64.15"]  # "TOTAL RM" read, its sum missed

    placed = read_missed_lines(line_api, str(path), first, join_rows=True)

    total = [w for w in placed if w.line == 2]
    assert [w.text for w in total] == ["TOTAL", "RM", "64.15"]
    assert len(placed) == len(every)


def test_on_a_page_of_columns_the_rest_of_a_row_stays_a_line_of_its_own(
    line_api: Any, tmp_path: Path
) -> None:
    # On a page of columns a band beside a line may be the next column's: it is not joined.
    path, every = receipt(tmp_path)
    first = [w for w in every if w.text != "64.15"]

    placed = read_missed_lines(line_api, str(path), first, join_rows=False)

    [found] = [w for w in placed if w.text == "64.15"]
    assert found.line not in {w.line for w in first}


def test_a_page_read_whole_is_left_as_it_was(line_api: Any, tmp_path: Path) -> None:
    path, every = receipt(tmp_path)

    assert read_missed_lines(line_api, str(path), every, join_rows=True) == every


def test_a_bar_of_ink_no_word_covers_adds_no_text(line_api: Any, tmp_path: Path) -> None:
    path, every = receipt(tmp_path, rule=True)

    assert read_missed_lines(line_api, str(path), every, join_rows=True) == every


@pytest.fixture(scope="module")
def engine() -> Iterator[TesseractEngine]:
    with running_tesseract(workers=1) as tesseract:
        yield tesseract


def png_copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / f"{Path(name).stem}.png"
    with Image.open(DATA / name) as image:
        image.convert("RGB").save(target)
    return target


async def test_a_receipts_double_height_total_and_change_are_read(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # sroie-042 (a till roll): Tesseract's one-block reading leaves out the double-height
    # "TOTAL RM 64.15" and "CHANGE RM 35.85" and keeps the "CASH" line between them.
    from tesserocr import PSM, PyTessBaseAPI

    path = png_copy("sroie-042.jpg", tmp_path)
    with PyTessBaseAPI(path=tessdata_dir(), lang="eng+fra", psm=PSM.SINGLE_BLOCK) as api:
        first = " ".join(w.text for w in read_image(api, str(path)).words)
    assert "CASH" in first and "TOTAL RM" not in first and "CHANGE" not in first

    page = await read_scan(engine, path)

    lines = page.markdown.splitlines()
    total = next(i for i, line in enumerate(lines) if line.startswith("TOTAL RM 64"))
    assert lines[total + 1].startswith("CASH RM 100")
    assert lines[total + 2].replace(" ", "") == "CHANGERM35.85"


async def test_a_receipts_lines_read_again_surely_are_no_figure(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # sroie-032 (a receipt on a sheet): its GST summary, weakly read by Tesseract, was taken
    # for a figure and left out; PP-OCRv6 reads those lines surely, so they are text.
    page = await read_scan(engine, png_copy("sroie-032.jpg", tmp_path))

    assert "GST REG #000656" in page.markdown
    assert "BAR WANG RICE@PERMAS JAYA" in page.markdown
    assert [block for block in page.blocks if block.label == "figure"] == []


async def test_a_faint_line_tesseract_reads_as_noise_is_read_by_the_second_recogniser(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # sroie-001's "CHANGE ........ RM 10.00" is printed faintly: at the ink threshold its
    # rows come in three pieces, each too low for a line, and Tesseract reads the band
    # "CUANGE csasccsecssecccsse WH 10.00" at 0.05-0.5; PP-OCRv6 reads it surely.
    path = png_copy("sroie-001.jpg", tmp_path)

    page = await read_scan(engine, path)

    lines = [line.replace(" ", "") for line in page.markdown.splitlines()]
    cash = next(i for i, line in enumerate(lines) if line.startswith("CASH"))
    assert lines[cash + 1].startswith("CHANGE") and lines[cash + 1].endswith("RM10.00")


class SureReader:
    """A second recogniser that reads every band as ``text``, surely (the gate under test
    is where such a reading may be used, not what the model reads)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def read(self, line: Image.Image) -> LineText:
        self.calls += 1
        step = line.width / (len(self.text) + 1)
        centres = [step * (k + 1) for k in range(len(self.text))]
        return LineText(list(self.text), [0.99] * len(self.text), centres)


def scribbled(tmp_path: Path, height_pt: float, beside: bool) -> tuple[Path, list[ReadWord]]:
    """A page with a read line and a scribble (a zigzag, as a pen leaves) ``height_pt``
    tall, on that line's row (``beside``) or on a row of its own; and the line's words."""
    doc = pymupdf.open()
    page = doc.new_page(width=300, height=200)
    page.insert_text((12, 40), "CASH RM 70.30", fontsize=10, fontname="cour")
    top = 40 - height_pt if beside else 80
    points = [pymupdf.Point(150 + 6 * k, top + height_pt * (k % 2)) for k in range(21)]
    page.draw_polyline(points, color=(0, 0, 0), width=1.2)
    path = tmp_path / "scribble.png"
    page.get_pixmap(dpi=DPI).save(path)
    scale = DPI / 72
    words = [
        ReadWord(w[4], (w[0] * scale, w[1] * scale, w[2] * scale, w[3] * scale), 0.9, 0)
        for w in page.get_text("words", sort=True)
    ]
    return path, words


def test_a_band_the_second_recogniser_reads_surely_becomes_a_line(
    line_api: Any, tmp_path: Path
) -> None:
    path, words = scribbled(tmp_path, height_pt=8, beside=False)

    placed = read_missed_lines(line_api, str(path), words, True, SureReader("CHANGE RM 10.00"))

    # Its characters are the second reading's (the spaces are both readings').
    assert [line.replace(" ", "") for line in lines_of(placed)] == ["CASHRM70.30", "CHANGERM10.00"]
    assert read_missed_lines(line_api, str(path), words, join_rows=True) == words


def test_the_second_recogniser_is_not_asked_about_a_band_on_a_line_already_read(
    line_api: Any, tmp_path: Path
) -> None:
    # Ink beside a line that was read may be that line's, read into other words.
    path, words = scribbled(tmp_path, height_pt=8, beside=True)
    second = SureReader("Pelabur 23/1,")

    assert read_missed_lines(line_api, str(path), words, True, second) == words
    assert second.calls == 0


def test_ink_far_taller_than_the_text_is_not_vouched_for(line_api: Any, tmp_path: Path) -> None:
    # A handwritten "A04114" over a receipt reads surely too, but it is not the print.
    path, words = scribbled(tmp_path, height_pt=24, beside=False)

    assert read_missed_lines(line_api, str(path), words, True, SureReader("A041")) == words
