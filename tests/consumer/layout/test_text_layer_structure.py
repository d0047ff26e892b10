"""Born-digital pages come back structured: title, headings, paragraphs, lists, tables, figures."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from support.figure_pages import chart_and_photo_pdf

from ocrq.consumer.layout.figures import crop_figures, crop_pdf_figures
from ocrq.consumer.layout.structure import compact_heading_levels, join_lines
from ocrq.consumer.textlayer import extract_text_page
from ocrq.shared.schemas import Block, Page

DPI = 144


@pytest.fixture(scope="module")
def page(report: Path) -> Page:
    """The report page read from its text layer."""
    read = extract_text_page(str(report), 0, dpi=DPI)
    assert read is not None
    return read


def _one(page: Page, label: str) -> Block:
    [block] = [b for b in page.blocks if b.label == label]
    return block


def test_title_becomes_a_level_one_title(page: Page) -> None:
    title = _one(page, "title")
    assert (title.text, title.level) == ("Harbour Traffic Report", 1)
    assert page.blocks[0] is title  # reading order: it comes first


def test_smaller_heading_is_a_heading_below_the_title(page: Page) -> None:
    heading = _one(page, "heading")
    assert heading.text == "1 Introduction"
    assert heading.level is not None and heading.level > 1


def test_paragraph_lines_are_joined_and_broken_words_made_whole(page: Page) -> None:
    paragraph = next(b for b in page.blocks if b.text.startswith("The harbour authority"))
    assert paragraph.label == "text"
    assert "The compilation took three months" in paragraph.text
    assert "\n" not in paragraph.text and "com-" not in paragraph.text
    assert sum(b.label == "text" for b in page.blocks) == 2  # two paragraphs, not five lines


def test_bullets_become_list_items_without_their_bullet_glyph(page: Page) -> None:
    items = [b.text for b in page.blocks if b.label == "list_item"]
    assert items == ["Container ships used the eastern quay", "Ferries kept to the west"]


def test_ruled_table_carries_its_cells_html_and_markdown(
    page: Page, report_table: list[list[str]]
) -> None:
    block = _one(page, "table")
    assert block.table is not None
    assert (block.table.rows, block.table.cols) == (4, 3)
    grid = [[""] * 3 for _ in range(4)]
    for cell in block.table.cells:
        grid[cell.row][cell.col] = cell.text
        assert cell.header == (cell.row == 0)
        assert block.bbox[0] - 0.01 <= cell.bbox[0] < cell.bbox[2] <= block.bbox[2] + 0.01
    assert grid == report_table
    assert "<th>Region</th>" in block.table.html and "<td>1530</td>" in block.table.html
    assert block.text.splitlines()[0] == "| Region | Units | Revenue |"


def test_lone_footer_number_is_a_page_number(page: Page) -> None:
    assert _one(page, "page_number").text == "7"


def test_picture_is_a_figure_cropped_at_the_dpi(
    page: Page, report: Path, report_picture: tuple[float, float, float, float]
) -> None:
    files = crop_pdf_figures(str(report), 0, DPI, page)
    block = _one(page, "figure")
    assert list(files) == ["p1-1.png"]
    assert (block.image, block.text) == ("p1-1.png", "![figure 1](images/p1-1.png)")
    with Image.open(io.BytesIO(files["p1-1.png"])) as image:
        x0, y0, x1, y1 = report_picture
        zoom = DPI / 72
        assert image.width == pytest.approx((x1 - x0) * zoom, abs=3)
        assert image.height == pytest.approx((y1 - y0) * zoom, abs=3)


def test_figure_crops_from_a_page_image_take_the_pixel_box(tmp_path: Path) -> None:
    path = tmp_path / "page.png"
    Image.new("RGB", (400, 300), (250, 250, 250)).save(path)
    blocks = [
        Block(label="figure", text="", bbox_px=[10, 20, 110, 70]),
        Block(label="figure", text="", bbox_px=[10, 100, 20, 105]),  # too small: skipped
        Block(label="text", text="words", bbox_px=[0, 200, 300, 220]),
        Block(label="figure", text="", bbox_px=[200, 100, 390, 290]),
    ]
    page = Page(number=3, width=400, height=300, blocks=blocks)
    files = crop_figures(str(path), page)
    assert list(files) == ["p3-1.png", "p3-2.png"]
    with Image.open(io.BytesIO(files["p3-1.png"])) as image:
        assert image.size == (100, 50)
    assert [b.image for b in blocks] == ["p3-1.png", None, None, "p3-2.png"]
    assert blocks[3].text == "![figure 2](images/p3-2.png)"


@pytest.mark.parametrize(
    ("lines", "joined"),
    [
        (["difficult to com-", "pile than others"], "difficult to compile than others"),
        (["Trace-based Just-in-", "Time compilation"], "Trace-based Just-in-Time compilation"),
        (["costs rose 5 -", "10 percent"], "costs rose 5 - 10 percent"),
        (["Just-in-Time type", "specialisation"], "Just-in-Time type specialisation"),
    ],
)
def test_lines_join_into_a_paragraph_keeping_real_hyphens(lines: list[str], joined: str) -> None:
    assert join_lines(lines) == joined


def test_heading_levels_close_their_gaps_over_the_document() -> None:
    def heading(level: int) -> Block:
        return Block(label="heading", text="h", level=level)

    pages = [
        Page(number=1, width=1, height=1, blocks=[heading(4), heading(6)]),
        Page(
            number=2,
            width=1,
            height=1,
            blocks=[heading(6), Block(label="title", text="t", level=1)],
        ),
    ]
    compact_heading_levels(pages)
    assert [b.level for p in pages for b in p.blocks] == [2, 3, 3, 1]


def test_vertical_text_the_layout_cannot_read_keeps_plain_blocks(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=600)
    words = "Quarterly revenue grew by twelve percent across all regions"
    page.insert_textbox(pymupdf.Rect(20, 20, 200, 120), words, fontsize=10)
    page.set_rotation(90)  # displayed, the lines run downwards
    path = tmp_path / "rotated.pdf"
    doc.save(path)
    read = extract_text_page(str(path), 0, dpi=72)
    assert read is not None
    assert " ".join(" ".join(b.text for b in read.blocks).split()) == words


def test_layout_off_keeps_the_text_layer_blocks_as_plain_text(report: Path) -> None:
    page = extract_text_page(str(report), 0, 144, layout=False)
    assert page is not None and {b.label for b in page.blocks} == {"text"}
    assert "Harbour Traffic Report" in (page.markdown or "")


def test_words_inside_a_figure_follow_it_before_its_caption(tmp_path: Path) -> None:
    (tmp_path / "chart.pdf").write_bytes(chart_and_photo_pdf())
    read = extract_text_page(str(tmp_path / "chart.pdf"), 0, dpi=DPI)
    assert read is not None

    labels = [b.label for b in read.blocks]
    caption = labels.index("caption")
    assert labels[caption - 2] == "figure"
    ticks = read.blocks[caption - 1]
    assert (ticks.label, ticks.text) == ("text", "Q1 Q2 Q3 Q4 Q5 0 50 100")
    prose = [b.text for b in read.blocks if b.text.startswith("The harbour")]
    assert len(prose) == 3 and not any("Q1" in text for text in prose)
