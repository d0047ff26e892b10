"""Measuring a page's skew from its text lines, straightening it, and mapping boxes back."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from ocrq.consumer.engines.straighten import measure_skew, straightened, unturn_box

PROSE = (
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. " * 12
)


def prose_page(path: Path) -> Image.Image:
    """A 150 DPI render of an A4 page of prose: lines of real glyphs, nothing askew."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        assert page.insert_textbox(pymupdf.Rect(60, 60, 535, 780), PROSE, fontsize=11) >= 0
        page.get_pixmap(dpi=150).save(str(path))
    return Image.open(path).convert("RGB")


def turned(image: Image.Image, degrees: float) -> Image.Image:
    """The page as a scanner fed crooked makes it: turned, on white."""
    return image.rotate(degrees, resample=Image.Resampling.BICUBIC, expand=True, fillcolor="white")


@pytest.mark.parametrize("degrees", [-8.0, -5.0, -2.5, 3.0, 6.5])
def test_a_skewed_page_measures_the_angle_that_levels_its_lines(
    tmp_path: Path, degrees: float
) -> None:
    page = turned(prose_page(tmp_path / "page.png"), degrees)
    assert measure_skew(page) == pytest.approx(-degrees, abs=0.3)


def test_an_upright_page_measures_no_skew(tmp_path: Path) -> None:
    assert measure_skew(prose_page(tmp_path / "page.png")) == 0.0


def test_a_blank_page_measures_no_skew() -> None:
    assert measure_skew(Image.new("RGB", (1240, 1754), "white")) == 0.0


def test_a_straightened_page_keeps_its_size_and_resolution(tmp_path: Path) -> None:
    skewed = turned(prose_page(tmp_path / "page.png"), 4.0)
    skewed.save(tmp_path / "skewed.png", dpi=(150, 150))
    path = straightened(str(tmp_path / "skewed.png"), -4.0)
    with Image.open(path) as out:
        assert out.size == skewed.size
        assert out.info["dpi"] == pytest.approx((150, 150), abs=0.1)
        assert measure_skew(out) == pytest.approx(0.0, abs=0.3)


def test_a_box_read_on_the_straightened_page_maps_onto_the_ink_it_came_from(
    tmp_path: Path,
) -> None:
    # A black square on white, turned by 5 degrees: straightened by -5, its box maps back
    # to a box that holds the square's ink on the page as it came.
    page = Image.new("L", (800, 600), 255)
    page.paste(0, (500, 100, 560, 160))
    skewed = page.rotate(5.0, resample=Image.Resampling.NEAREST, fillcolor=255)
    skewed.save(tmp_path / "skewed.png")
    with Image.open(straightened(str(tmp_path / "skewed.png"), -5.0)) as level:
        ink = level.convert("L").point(lambda v: 255 if v < 128 else 0).getbbox()
    assert ink is not None
    x0, y0, x1, y1 = unturn_box(tuple(map(float, ink)), -5.0, 800, 600)  # type: ignore[arg-type]
    found = skewed.point(lambda v: 255 if v < 128 else 0).getbbox()
    assert found is not None
    assert x0 <= found[0] + 2 and y0 <= found[1] + 2
    assert x1 >= found[2] - 2 and y1 >= found[3] - 2
    assert (x1 - x0) * (y1 - y0) < 1.5 * (found[2] - found[0]) * (found[3] - found[1])


def test_a_mapped_box_stays_on_the_page() -> None:
    x0, y0, x1, y1 = unturn_box((0.0, 0.0, 800.0, 20.0), 8.0, 800, 600)
    assert 0 <= x0 <= x1 <= 800 and 0 <= y0 <= y1 <= 600
