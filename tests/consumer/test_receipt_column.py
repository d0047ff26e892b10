"""A receipt scanned on a sheet is read on its column; its boxes land back on the sheet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from support.page_blocks import assert_blocks_fit_the_page
from support.tesseract_scans import png_page, running_tesseract

from ocrq.consumer.engines.readings import PSM_AUTO, is_till_roll, read_image
from ocrq.consumer.engines.receipt_column import column_box, cut_column, in_column, on_page
from ocrq.consumer.engines.tesseract import TesseractEngine, tessdata_dir
from ocrq.consumer.layout.words import ReadWord

RECEIPTS = Path(__file__).parents[2] / "bench" / "documents" / "fields"
# SROIE 037: a till roll on an A4-shaped scan (1080 by 1527), its text at x 300-725, and
# a faint "Thank You! Please Come Again" footer that Tesseract reads weakly.
ON_A_SHEET = RECEIPTS / "sroie-037.jpg"


@pytest.fixture(scope="module")
def engine() -> Iterator[TesseractEngine]:
    with running_tesseract(workers=1) as tesseract:
        yield tesseract


@pytest.fixture(scope="module")
def sheet_words() -> list[ReadWord]:
    from tesserocr import PyTessBaseAPI

    with PyTessBaseAPI(path=tessdata_dir(), lang="eng+fra", psm=PSM_AUTO) as api:
        return read_image(api, str(ON_A_SHEET)).words


def test_the_column_is_the_receipts_width_and_the_sheets_height(
    sheet_words: list[ReadWord],
) -> None:
    assert is_till_roll(sheet_words, 1080, 1527)

    x0, y0, x1, y1 = column_box(sheet_words, 1080, 1527)

    assert (y0, y1) == (0, 1527)  # a faint header or footer is still on it
    assert 250 < x0 < 310 and 720 < x1 < 800  # the till roll, with a margin
    sure = [w for w in sheet_words if w.confidence >= 0.5]
    assert all(x0 <= w.box[0] and w.box[2] <= x1 for w in sure)


def test_words_moved_onto_the_column_and_back_keep_their_boxes(
    sheet_words: list[ReadWord], tmp_path: Path
) -> None:
    page = tmp_path / "sheet.png"
    with Image.open(ON_A_SHEET) as image:
        image.convert("RGB").save(page, dpi=(150, 150))

    path, box = cut_column(str(page), sheet_words)

    with Image.open(path) as column:
        assert column.size == (box[2] - box[0], box[3] - box[1])
        assert [round(v) for v in column.info["dpi"]] == [150, 150]
    inside = in_column(sheet_words, box)
    assert {w.text for w in on_page(inside, (box[0], box[1]))} <= {w.text for w in sheet_words}
    assert on_page(inside, (box[0], box[1])) == [
        w for w in sheet_words if box[0] <= w.box[0] and w.box[2] <= box[2]
    ]


async def test_a_receipt_on_a_sheet_keeps_its_footer_and_its_boxes_on_the_sheet(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    page_file = tmp_path / "sheet.png"
    with Image.open(ON_A_SHEET) as image:
        image.convert("RGB").save(page_file)
    image_page = png_page(page_file)

    [page] = (await engine.recognise([image_page])).pages

    assert page.markdown is not None and "Please Co" in page.markdown
    assert_blocks_fit_the_page(page.blocks, image_page.width, image_page.height)
    [total] = [b for b in page.blocks if "RM 57.80" in b.text]
    assert 300 <= total.bbox_px[0] and total.bbox_px[2] <= 730  # on the till roll, not left of it
