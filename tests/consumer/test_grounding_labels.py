"""The models' grounding labels map into the block vocabulary; tables become cells."""

from __future__ import annotations

import pytest

from ocrq.consumer.grounding import block_label, parse_page
from ocrq.shared.schemas import BLOCK_LABELS, Block, Cell


def parse(text: str) -> list[Block]:
    return parse_page(text, coord_scale=1000, width=1000, height=1000).blocks


def ref(label: str, text: str, box: str = "[[10, 10, 900, 50]]") -> str:
    return f"<|ref|>{label}<|/ref|><|det|>{box}<|/det|>\n{text}\n\n"


@pytest.mark.parametrize(
    ("label", "block"),
    [
        ("title", "title"),
        ("sub_title", "heading"),
        ("text", "text"),
        ("table", "table"),
        ("image", "figure"),
        ("figure", "figure"),
        ("chart", "figure"),
        ("image_caption", "caption"),
        ("table_caption", "caption"),
        ("equation", "formula"),
        ("formula", "formula"),
        ("header", "page_header"),
        ("footer", "page_footer"),
        ("page_number", "page_number"),
        ("list", "list_item"),
        ("list_item", "list_item"),
        ("Page-Header", "page_header"),
        ("watermark", "text"),
    ],
)
def test_each_model_label_maps_into_the_block_vocabulary(label: str, block: str) -> None:
    assert block_label(label) == block
    assert block in BLOCK_LABELS


def test_title_becomes_a_level_one_title_without_its_hashes() -> None:
    [title] = parse(ref("title", "# Annual Report"))

    assert (title.label, title.level, title.text) == ("title", 1, "Annual Report")


def test_sub_title_becomes_a_heading_at_the_level_its_hashes_say() -> None:
    blocks = parse(ref("sub_title", "## Abstract") + ref("sub_title", "### 2.1. Encoders"))

    assert [(b.label, b.level, b.text) for b in blocks] == [
        ("heading", 2, "Abstract"),
        ("heading", 3, "2.1. Encoders"),
    ]


def test_sub_title_without_hashes_is_a_level_two_heading() -> None:
    [heading] = parse(ref("sub_title", "Lernziele"))

    assert (heading.label, heading.level) == ("heading", 2)


def test_table_html_becomes_cells_and_a_markdown_table() -> None:
    html = "<table><tr><td>k</td><td>G(x)</td></tr><tr><td>1</td><td>-6 &lt; 0</td></tr></table>"

    [table] = parse(ref("table", html))

    assert table.label == "table" and table.table is not None
    assert (table.table.rows, table.table.cols) == (2, 2)
    assert [c.text for c in table.table.cells] == ["k", "G(x)", "1", "-6 < 0"]
    assert table.text == "| k | G(x) |\n| --- | --- |\n| 1 | -6 < 0 |"
    assert table.table.html.startswith("<table><tr><td>k</td>")


def test_table_with_a_spanning_cell_keeps_html_as_its_text() -> None:
    html = '<table><tr><td colspan="2">Total</td></tr><tr><td>a</td><td>b</td></tr></table>'

    [table] = parse(ref("table", f"<center>{html}</center>"))

    assert table.table is not None
    assert table.table.cells[0] == Cell(row=0, col=0, col_span=2, text="Total")
    assert table.text == table.table.html
    assert 'colspan="2"' in table.text and "<center>" not in table.text


def test_table_html_written_after_its_caption_goes_back_to_the_table() -> None:
    # DeepSeek-OCR on its own paper: the table's box, the caption, then the table's HTML.
    text = (
        "<|ref|>table<|/ref|><|det|>[[167, 431, 828, 535]]<|/det|>\n"
        "<|ref|>table_caption<|/ref|><|det|>[[115, 386, 881, 420]]<|/det|>\n"
        "Table 1 | Multi resolution support.   \n\n"
        "<table><tr><td>Mode</td><td>Tiny</td></tr><tr><td>Tokens</td><td>64</td></tr></table>"
    )

    table, caption = parse(text)

    assert (table.label, table.bbox) == ("table", [0.167, 0.431, 0.828, 0.535])
    assert table.table is not None and table.table.cells[3].text == "64"
    assert (caption.label, caption.text) == ("caption", "Table 1 | Multi resolution support.")


def test_html_that_holds_no_cells_stays_the_table_text() -> None:
    [table] = parse(ref("table", "<table></table>"))

    assert (table.label, table.text, table.table) == ("table", "<table></table>", None)


def test_text_written_after_a_figure_follows_it_as_text() -> None:
    figure, text = parse(ref("image", "Sales 2024"))

    assert (figure.label, figure.text, figure.image) == ("figure", "", None)
    assert (text.label, text.text, text.bbox) == ("text", "Sales 2024", [])


def test_caption_loses_the_center_tags_the_model_wraps_it_in() -> None:
    [caption] = parse(ref("image_caption", "<center>Figure 1 | Overview </center>"))

    assert caption.text == "Figure 1 | Overview"


def test_page_furniture_stays_in_the_blocks_but_leaves_the_markdown() -> None:
    text = ref("header", "ACME Corp") + ref("text", "Body") + ref("page_number", "7")

    parsed = parse_page(text, coord_scale=1000, width=100, height=100)

    assert [b.label for b in parsed.blocks] == ["page_header", "text", "page_number"]
    assert parsed.markdown == "Body"


def test_a_text_block_of_bullet_lines_is_a_list_item() -> None:
    text = ref("text", "- Sie können Extrema bestimmen.") + ref("text", "- Und Sattelpunkte.")

    parsed = parse_page(text, coord_scale=1000, width=100, height=100)

    assert [b.label for b in parsed.blocks] == ["list_item", "list_item"]
    assert parsed.markdown == "- Sie können Extrema bestimmen.\n- Und Sattelpunkte."


def test_equation_is_a_formula_kept_in_its_delimiters() -> None:
    parsed = parse_page(
        ref("equation", "\\[y' = 1 - y^2\\]"), coord_scale=1000, width=100, height=100
    )

    assert parsed.blocks[0].label == "formula"
    assert parsed.markdown == "\\[y' = 1 - y^2\\]"


def test_unlimited_ocr_label_inside_the_det_is_read_with_its_box() -> None:
    text = (
        "<PAGE><|det|>page_number [818, 9, 907, 35]<|/det|>E13.1\n"
        "<|det|>title [48, 60, 600, 90]<|/det|># Car hire\n"
        "<|det|>text [48, 234, 581, 301]<|/det|>Cars are hired by the day.\n"
    )

    parsed = parse_page(text, coord_scale=1000, width=1000, height=1000)

    assert [(b.label, b.text, b.bbox_px) for b in parsed.blocks] == [
        ("page_number", "E13.1", [818, 9, 907, 35]),
        ("title", "Car hire", [48, 60, 600, 90]),
        ("text", "Cars are hired by the day.", [48, 234, 581, 301]),
    ]
    assert parsed.markdown == "# Car hire\n\nCars are hired by the day."


@pytest.mark.parametrize(
    "text",
    [
        "Done.\n<|det|>tex",
        "Done.\n<|det|>text [48, 2",
        "Done.\n<|det|>text [48, 234, 581, 301]<|/de",
        "Done.\n<PAGE><|det|>image [0, 0, 999, 999]<|/det|>",
    ],
)
def test_unlimited_ocr_answer_cut_off_mid_tag_leaves_no_fragment(text: str) -> None:
    assert parse_page(text, coord_scale=1000, width=10, height=10).markdown == "Done."
