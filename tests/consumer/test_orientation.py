"""Pages rendered sideways or upside down are turned upright before any engine reads them."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.orientation import load_classifier, turn_upright

PROSE = (
    "Orientation matters for every engine. A scan fed into the feeder sideways or upside "
    "down must still be read, and the result must say how the page was turned. "
) * 6


def upright_page(path: Path, dpi: int = 150) -> Image.Image:
    """A page of prose, upright, rendered at ``dpi``."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(60, 60, 540, 780), PROSE, fontsize=13)
        page.get_pixmap(dpi=dpi).save(str(path))
    return Image.open(path).convert("RGB")


def page_image(path: Path, image: Image.Image) -> PageImage:
    image.save(path)
    return PageImage(
        number=3, path=str(path), media_type="image/png", width=image.width, height=image.height
    )


@pytest.mark.parametrize("turned", [90, 180, 270])
def test_a_turned_page_is_turned_back_and_says_so(tmp_path: Path, turned: int) -> None:
    upright = upright_page(tmp_path / "upright.png")
    sideways = page_image(tmp_path / "page-0003.png", upright.rotate(-turned, expand=True))

    fixed = turn_upright(sideways)

    assert fixed.rotation == turned
    assert (fixed.width, fixed.height) == upright.size
    with Image.open(fixed.path) as result:
        assert result.size == upright.size
        # The same pixels as the upright render: turned back exactly, not mirrored.
        assert result.convert("L").tobytes() == upright.convert("L").tobytes()


@pytest.mark.parametrize("turned", [0, 90, 180])
def test_a_600_dpi_page_is_judged_from_a_reduced_copy_and_turned_whole(
    tmp_path: Path, turned: int
) -> None:
    upright = upright_page(tmp_path / "upright.png", dpi=600)  # 4961 by 7016: reduced by 4
    page = page_image(tmp_path / "page-0003.png", upright.rotate(-turned, expand=True))

    fixed = turn_upright(page)

    assert fixed.rotation == turned
    assert (fixed.width, fixed.height) == upright.size


def test_an_upright_page_is_left_alone(tmp_path: Path) -> None:
    page = page_image(tmp_path / "page-0003.png", upright_page(tmp_path / "upright.png"))

    assert turn_upright(page) == page


def test_a_page_whose_orientation_cannot_be_read_is_passed_on_unturned(tmp_path: Path) -> None:
    broken = tmp_path / "page-0003.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    page = PageImage(number=3, path=str(broken), media_type="image/png", width=10, height=10)

    assert turn_upright(page) == page


@pytest.mark.parametrize("size", [(320, 200), (80, 120), (1240, 1754)])
def test_a_page_without_text_is_never_turned(tmp_path: Path, size: tuple[int, int]) -> None:
    # Blank pages and plain pictures score every rotation alike: no guess is made.
    page = page_image(tmp_path / "page-0003.png", Image.new("RGB", size, (120, 130, 140)))

    assert turn_upright(page) == page


def test_the_classifier_runs_on_one_thread() -> None:
    # The rasteriser's processes run side by side; onnxruntime's default would add a thread
    # per core to each, pinned to cores outside the process's own.
    options = load_classifier().session.session.get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
