"""Pages far larger than Tesseract needs are read reduced; their boxes land on the full page."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from support.page_blocks import assert_blocks_fit_the_page
from support.tesseract_scans import png_page, running_tesseract

from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.read_scale import (
    MAX_PIXELS,
    enlarged_words,
    print_too_small,
    reduced_copy,
    reduction,
)
from ocrq.consumer.engines.readings import read_image
from ocrq.consumer.engines.tesseract import TesseractEngine, tessdata_dir
from ocrq.consumer.layout.words import ReadWord

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank"
TEXT_RECT = (72, 100, 523, 300)  # points on an A4 page


def a4_at(path: Path, dpi: int, points: float) -> PageImage:
    """An A4 page with SENTENCE in TEXT_RECT at ``points``, rendered at ``dpi`` as a PNG."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        assert page.insert_textbox(pymupdf.Rect(*TEXT_RECT), SENTENCE, fontsize=points) >= 0
        page.get_pixmap(dpi=dpi).save(str(path))
    return png_page(path)


@pytest.fixture(scope="module")
def engine() -> Iterator[TesseractEngine]:
    with running_tesseract(workers=1) as tesseract:
        yield tesseract


def test_a_page_within_the_pixel_budget_is_read_as_it_is_and_a_larger_one_reduced_to_it() -> None:
    assert reduction(2480 * 3508) == 1.0  # A4 at 300 DPI
    scale = reduction(4961 * 7016)  # A4 at 600 DPI
    assert 0.5 < scale < 0.51
    assert round(4961 * scale) * round(7016 * scale) <= MAX_PIXELS * 1.001


def test_the_reduced_copy_keeps_the_page_shape_and_says_its_lower_resolution(
    tmp_path: Path,
) -> None:
    page = a4_at(tmp_path / "page.png", 600, 12)

    reduced = reduced_copy(page.path, 0.5)

    with Image.open(reduced) as image:
        assert image.size == (round(page.width * 0.5), round(page.height * 0.5))
        assert [round(v) for v in image.info["dpi"]] == [300, 300]


@pytest.mark.parametrize(("points", "too_small"), [(12, False), (3, True)])
def test_print_too_small_to_reduce_is_told_from_the_reduced_reading(
    points: float, too_small: bool, tmp_path: Path
) -> None:
    from tesserocr import PyTessBaseAPI

    page = a4_at(tmp_path / "page.png", 600, points)
    reduced = reduced_copy(page.path, reduction(page.width * page.height))
    with PyTessBaseAPI(path=tessdata_dir(), lang="eng") as api:
        words = read_image(api, reduced).words

    assert words  # read either way; only its size decides
    assert print_too_small(words) is too_small


def test_a_reduced_reading_with_no_sure_word_counts_as_too_small() -> None:
    faint = ReadWord("nn", (10.0, 10.0, 60.0, 40.0), 0.2, 0)

    assert print_too_small([faint]) and print_too_small([])


def test_words_read_reduced_are_scaled_back_box_size_and_baseline() -> None:
    word = ReadWord("TOTAL", (100.0, 50.0, 180.0, 70.0), 0.9, 3, size=22.0, baseline=68.0)

    [back] = enlarged_words([word], 0.5)

    assert back.box == (200.0, 100.0, 360.0, 140.0)
    assert (back.size, back.baseline, back.text, back.line) == (44.0, 136.0, "TOTAL", 3)


@pytest.mark.parametrize("points", [12, 3])
async def test_a_600_dpi_page_is_read_whole_with_its_boxes_on_the_full_page(
    engine: TesseractEngine, tmp_path: Path, points: float
) -> None:
    image = a4_at(tmp_path / "page.png", 600, points)

    [page] = (await engine.recognise([image])).pages

    assert page.markdown is not None and SENTENCE in " ".join(page.markdown.split())
    assert_blocks_fit_the_page(page.blocks, image.width, image.height)
    [block] = [b for b in page.blocks if "quick" in b.text]
    x0, y0, _, _ = block.bbox_px
    pixels_per_point = 600 / 72
    # The text starts at the text box's left edge and a line below its top (PyMuPDF).
    assert abs(x0 - TEXT_RECT[0] * pixels_per_point) < 2 * points * pixels_per_point
    assert TEXT_RECT[1] * pixels_per_point <= y0 < (TEXT_RECT[1] + 2 * points) * pixels_per_point
