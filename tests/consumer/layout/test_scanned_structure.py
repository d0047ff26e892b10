"""Scanned pages come back structured too: the engine's words laid out by the layout model."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import json
import pickle
from itertools import groupby
from pathlib import Path

import pytest
from PIL import Image
from support.tesseract_scans import png_page

from bench.bench_invisible_page import characters, shape_page
from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.consumer.layout.scanned import (
    ReadWord,
    invisible_text_page,
    page_scale,
    scanned_blocks,
)
from ocrq.shared.schemas import Block

DATA = Path(__file__).parents[1] / "data"
LINES = [
    ["Harbour", "Traffic", "Report"],
    ["The", "compilation", "took", "three", "months"],
    ["Привет", "мир", "Café"],  # beyond Latin-1: the Unicode writer
]


def _words(tmp_path: Path) -> tuple[str, list[ReadWord]]:
    """A blank 1000 x 1400 page image and words laid out in three lines."""
    path = tmp_path / "blank.png"
    Image.new("RGB", (1000, 1400), "white").save(path)
    words = []
    for line, texts in enumerate(LINES):
        x, top = 100.0, 100.0 + 80 * line
        for text in texts:
            width = 22.0 * len(text)
            words.append(ReadWord(text, (x, top, x + width, top + 40), 0.9, line))
            x += width + 12
    return str(path), words


def test_words_round_trip_from_the_invisible_page_line_by_line(tmp_path: Path) -> None:
    path, words = _words(tmp_path)
    scale = page_scale(1000, 1400)
    with invisible_text_page(path, 1000, 1400, words) as doc:
        extracted = doc[0].get_text("words")
    lines = [[w[4] for w in group] for _, group in groupby(extracted, key=lambda w: (w[5], w[6]))]
    assert lines == LINES
    for got, word in zip(extracted, words, strict=True):
        x0, _, x1, _ = (v * scale for v in word.box)
        assert got[0] == pytest.approx(x0, abs=1) and got[2] == pytest.approx(x1, abs=2)


def test_invisible_page_extracts_exactly_as_shape_insert_text_writes_it(tmp_path: Path) -> None:
    # The layout model's boxes move when a size changes in its sixth digit: the operators
    # written directly must give what PyMuPDF's own writer gives, to the last digit.
    path, words = _words(tmp_path)
    words.append(ReadWord("東京都", (100.0, 400.0, 220.0, 440.0), 0.9, len(LINES)))
    with (
        invisible_text_page(path, 1000, 1400, words) as ours,
        shape_page(path, 1000, 1400, words) as pymupdfs,
    ):
        written, reference = characters(ours), characters(pymupdfs)
    assert written == reference
    assert len(written) == sum(len(word.text) for word in words) + 8  # and the spaces


async def test_tesseract_finds_title_heading_list_and_table_on_a_scan(
    engine: TesseractEngine, report_scan: Path, report_table: list[list[str]]
) -> None:
    scan = png_page(report_scan)

    output = await engine.recognise([scan])

    [page] = output.pages
    labels = [b.label for b in page.blocks]
    assert labels[:2] == ["title", "heading"]
    assert page.blocks[0].text == "Harbour Traffic Report"
    assert "list_item" in labels  # OCR reads bullets as "+" or "e": not every one is found
    [table] = [b.table for b in page.blocks if b.label == "table"]
    assert table is not None and (table.rows, table.cols) == (4, 3)
    assert [[c.text for c in table.cells if c.row == r] for r in range(4)] == report_table
    read = [b for b in page.blocks if b.label != "figure"]  # a picture has no text to be sure of
    assert all(b.confidence is not None and 0 < b.confidence <= 1 for b in read)
    words = output.words[1]
    assert [w.text for w in words[:3]] == ["Harbour", "Traffic", "Report"]
    assert all(0 <= w.box[0] < w.box[2] <= scan.width for w in words)
    assert pickle.loads(pickle.dumps(output)) == output  # it crosses a process boundary


def receipt_blocks(name: str) -> list[Block]:
    """The blocks of a receipt in tests/consumer/data, laid out from the words the engine
    read from its original image (kept beside it), so that the layout step alone is tested."""
    read = json.loads((DATA / f"{name}.words.json").read_text())
    words = [ReadWord(**{**w, "box": tuple(w["box"])}) for w in read["words"]]
    return scanned_blocks(str(DATA / f"{name}.jpg"), read["width"], read["height"], words)


def test_a_lone_mark_at_a_receipts_edge_is_not_read_before_the_receipt() -> None:
    # SROIE receipt 101 with the words Tesseract read from it: a "1" at the receipt's left
    # edge got a region of its own, the order took it for a column read first, and the
    # leftovers and tables placed against it went before the title.
    blocks = receipt_blocks("sroie-101")

    texts = [b.text for b in blocks]
    assert texts[0].startswith("SYARIKAT PERNIAGAAN GIN KEE")
    doc_no = next(i for i, text in enumerate(texts) if "CS00011926" in text)
    lone = texts.index("1")
    assert blocks[lone].bbox_px[1] > blocks[doc_no].bbox_px[3]  # it lies below the table
    assert lone > doc_no  # and is read there, by its height


def test_a_table_found_inside_a_text_region_is_read_between_its_lines() -> None:
    # SROIE receipt 112 with the words ocrq read from it: the layout model calls its middle
    # one text region; the fee table inferred inside it came after the region's last line
    # ("Thank You"), its rows read after the totals below them.
    blocks = receipt_blocks("sroie-112")

    table = next(i for i, b in enumerate(blocks) if b.label == "table")
    above = next(i for i, b in enumerate(blocks) if "Parking Time" in b.text)
    below = next(i for i, b in enumerate(blocks) if "Thank You" in b.text)
    assert above < table < below
    assert blocks[above].bbox_px[3] <= blocks[table].bbox_px[1] + 2
    assert blocks[table].bbox_px[3] <= blocks[below].bbox_px[1] + 2
