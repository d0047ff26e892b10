"""Faint print is stretched to full contrast before a weak page is read again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from support.tesseract_scans import read_scan, running_tesseract

from ocrq.consumer.engines.faint_print import faint_ink_level, stretched
from ocrq.consumer.engines.readings import read_image
from ocrq.consumer.engines.tesseract import TesseractEngine, tessdata_dir

DATA = Path(__file__).parent / "data"


def printed(tmp_path: Path, ink: int) -> str:
    """A page of lines printed in grey level ``ink`` on white paper."""
    image = Image.new("L", (600, 400), 255)
    draw = ImageDraw.Draw(image)
    for k in range(8):
        draw.rectangle((40, 40 + 40 * k, 560, 52 + 40 * k), fill=ink)
    path = tmp_path / f"page-{ink}.png"
    image.save(path)
    return str(path)


def test_faded_print_is_faint_and_black_print_is_not(tmp_path: Path) -> None:
    assert faint_ink_level(printed(tmp_path, 190)) == 190
    assert faint_ink_level(printed(tmp_path, 30)) is None


def test_a_blank_page_has_no_faint_ink(tmp_path: Path) -> None:
    path = tmp_path / "blank.png"
    Image.new("L", (300, 200), 250).save(path)

    assert faint_ink_level(str(path)) is None


def test_stretching_makes_the_ink_black_and_keeps_the_paper_white(tmp_path: Path) -> None:
    path = printed(tmp_path, 190)

    with Image.open(stretched(path, 190.0)) as image:
        pixels = np.asarray(image)

    assert pixels[45, 300] == 0 and pixels[0, 0] == 255
    assert Path(path).with_name("page-190-stretched.png").is_file()


@pytest.fixture(scope="module")
def engine() -> Iterator[TesseractEngine]:
    with running_tesseract(workers=1) as tesseract:
        yield tesseract


async def test_a_faded_receipt_beside_a_dark_note_is_read_whole(
    engine: TesseractEngine, tmp_path: Path
) -> None:
    # sroie-314: faded thermal print and a dark handwritten note. Tesseract alone reads the
    # till roll at 0.48 and leaves out the shop's name and address; stretched, they are read.
    from tesserocr import PSM, PyTessBaseAPI

    path = tmp_path / "sroie-314.png"
    with Image.open(DATA / "sroie-314.jpg") as image:
        image.convert("RGB").save(path)
    with PyTessBaseAPI(path=tessdata_dir(), lang="eng+fra", psm=PSM.SINGLE_BLOCK) as api:
        first = read_image(api, str(path))
    assert (first.confidence or 0.0) < 0.6
    assert "CHECKERS" not in " ".join(w.text for w in first.words)

    page = await read_scan(engine, path)

    unspaced = page.markdown.replace(" ", "")
    assert "CHECKERSHYPERMARKET" in unspaced and "KUALALUMPUR" in unspaced
    assert page.reread
