"""Born-digital pages come from their text layer; scans and junk text go to OCR."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
from support.documents import garbage_pdf, scanned_pdf, text_pdf

from ocrq.consumer.textlayer import extract_text_page, text_is_good
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import BLOCK_LABELS

WORDS = ["Quarterly", "revenue", "grew", "by", "twelve", "percent", "across", "all", "regions"]


def _write(tmp_path: Path, data: bytes, name: str = "doc.pdf") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_text_pdf_page_comes_from_its_text_layer(tmp_path: Path) -> None:
    path = _write(tmp_path, text_pdf(pages=2, words=WORDS))
    page = extract_text_page(path, 1, dpi=144)
    assert page is not None
    assert page.source == "text_layer"
    assert page.number == 2
    assert (page.width, page.height) == (1190, 1684)  # 595 x 842 pt at 2x
    assert page.markdown is not None
    assert "Page 2" in page.markdown
    assert all(word in page.markdown for word in WORDS)


def test_text_layer_blocks_carry_normalised_and_pixel_boxes(tmp_path: Path) -> None:
    page = extract_text_page(_write(tmp_path, text_pdf(words=WORDS)), 0, dpi=144)
    assert page is not None and page.blocks
    for block in page.blocks:
        assert block.label in BLOCK_LABELS
        assert block.text
        x0, y0, x1, y1 = block.bbox
        assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
        assert block.bbox_px[0] == pytest.approx(x0 * page.width, abs=2)
        assert block.bbox_px[3] == pytest.approx(y1 * page.height, abs=2)
    assert page.markdown == "\n\n".join(block.text for block in page.blocks)


def test_scanned_page_has_no_text_layer_and_returns_none(tmp_path: Path) -> None:
    assert extract_text_page(_write(tmp_path, scanned_pdf(words=WORDS)), 0, dpi=150) is None


def test_page_with_only_a_page_number_returns_none(tmp_path: Path) -> None:
    assert extract_text_page(_write(tmp_path, text_pdf(words=[])), 0, dpi=150) is None


def test_scan_with_a_short_caption_returns_none(tmp_path: Path) -> None:
    doc = pymupdf.open("pdf", scanned_pdf(words=WORDS))
    doc[0].insert_text((40, 820), "Figure 1: scanned quarterly report, page one", fontsize=9)
    page = extract_text_page(_write(tmp_path, doc.tobytes()), 0, dpi=150)
    assert page is None


def test_rotated_page_blocks_are_in_displayed_coordinates(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=600)
    # Top-left of the unrotated page: after a 90° turn it is displayed at the top right.
    page.insert_textbox(pymupdf.Rect(20, 20, 200, 120), " ".join(WORDS), fontsize=10)
    page.set_rotation(90)
    result = extract_text_page(_write(tmp_path, doc.tobytes()), 0, dpi=72)
    assert result is not None
    assert (result.width, result.height) == (600, 400)
    x0, _, _, y1 = result.blocks[0].bbox
    assert x0 > 0.5 and y1 < 0.6


@pytest.mark.parametrize(
    "text",
    [
        "\ufffd" * 80,  # glyphs without a Unicode mapping
        "\ue000\ue001\ue002" * 30,  # private-use code points from a custom font encoding
        "!#$%&()*+,-./:;<=>?@[]^_{|}~" * 4,  # a broken encoding read as punctuation
        "Page 7",  # too short to trust
    ],
)
def test_junk_text_is_not_a_good_text_layer(text: str) -> None:
    assert not text_is_good(text, image_cover=0.0)


def test_plain_prose_is_a_good_text_layer() -> None:
    assert text_is_good(" ".join(WORDS), image_cover=0.0)


def test_unreadable_pdf_fails_with_corrupt_document(tmp_path: Path) -> None:
    with pytest.raises(OcrqError) as caught:
        extract_text_page(_write(tmp_path, garbage_pdf()), 0, dpi=150)
    assert caught.value.code is ErrorCode.CORRUPT_DOCUMENT
