"""Markdown from blocks: each label's form, lists, tables, figures, furniture, warnings."""

from __future__ import annotations

from support.render_inputs import grid_of, spanned_grid

from ocrq.shared.render.markdown import NOTE, document_markdown, page_markdown
from ocrq.shared.schemas import Block, Page, Segment

GRID = grid_of([["Item", "Price"], ["Tea", "2.50"]])
SPANNING = spanned_grid("Total", "a", "b")


def page(*blocks: Block, warnings: list[str] | None = None) -> Page:
    return Page(
        number=1, width=100, height=100, markdown="", blocks=list(blocks), warnings=warnings or []
    )


def md(*blocks: Block, keep_furniture: bool = False) -> str:
    return page_markdown(page(*blocks), keep_furniture=keep_furniture)


def test_title_becomes_a_level_one_heading() -> None:
    assert md(Block(label="title", text="Annual Report", level=1)) == "# Annual Report"


def test_heading_levels_are_clamped_to_two_through_six() -> None:
    blocks = [Block(label="heading", text=f"H{n}", level=n) for n in (None, 1, 3, 9)]

    assert md(*blocks) == "## HNone\n\n## H1\n\n### H3\n\n###### H9"


def test_hashes_an_engine_left_in_a_heading_are_not_doubled() -> None:
    assert md(Block(label="heading", text="## Abstract", level=2)) == "## Abstract"


def test_paragraphs_are_separated_by_a_blank_line() -> None:
    assert md(Block(label="text", text="One."), Block(label="text", text="Two.")) == "One.\n\nTwo."


def test_consecutive_list_items_form_one_list_and_keep_their_own_numbers() -> None:
    blocks = [
        Block(label="text", text="Steps:"),
        Block(label="list_item", text="1. Boil water"),
        Block(label="list_item", text="2) Add tea"),
        Block(label="list_item", text="\u2022 Wait"),
        Block(label="text", text="Done."),
        Block(label="list_item", text="- again"),
    ]

    assert md(*blocks) == "Steps:\n\n1. Boil water\n2) Add tea\n- Wait\n\nDone.\n\n- again"


def test_table_becomes_a_markdown_table_from_its_cells() -> None:
    block = Block(label="table", text="ignored", table=GRID)

    assert md(block) == "| Item | Price |\n| --- | --- |\n| Tea | 2.50 |"


def test_table_with_a_spanning_cell_becomes_html() -> None:
    text = md(Block(label="table", text="", table=SPANNING))

    assert text == (
        '<table><tr><td colspan="2">Total</td></tr><tr><td>a</td><td>b</td></tr></table>'
    )


def test_table_without_cells_keeps_its_text() -> None:
    assert md(Block(label="table", text="Item  Price\nTea  2.50")) == "Item  Price\nTea  2.50"


def test_formula_is_wrapped_in_display_math_unless_already_delimited() -> None:
    blocks = [Block(label="formula", text="E = mc^2"), Block(label="formula", text="$$a+b$$")]

    assert md(*blocks) == "$$\nE = mc^2\n$$\n\n$$a+b$$"


def test_figure_links_its_image_and_numbers_figures_in_order() -> None:
    blocks = [
        Block(label="figure", text="", image="p1-1.png"),
        Block(label="caption", text="Figure 1: sales"),
        Block(label="figure", text="", image="p1-2.png"),
    ]

    assert md(*blocks) == (
        "![figure 1](images/p1-1.png)\n\nFigure 1: sales\n\n![figure 2](images/p1-2.png)"
    )


def test_figure_without_an_image_shows_its_text_or_nothing() -> None:
    blocks = [Block(label="figure", text=""), Block(label="figure", text="![x](page-1-image-1)")]

    assert md(*blocks) == "![x](page-1-image-1)"


def test_furniture_leaves_the_body_unless_kept() -> None:
    blocks = [
        Block(label="page_header", text="ACME"),
        Block(label="text", text="Body"),
        Block(label="page_number", text="7"),
    ]

    assert md(*blocks) == "Body"
    assert md(*blocks, keep_furniture=True) == "ACME\n\nBody\n\n7"


def test_page_warnings_open_the_page_as_quoted_notes() -> None:
    warned = page(Block(label="text", text="Body"), warnings=["low confidence", "odd script"])

    assert NOTE == "> **ocrq warning:** "
    assert page_markdown(warned) == (
        "> **ocrq warning:** low confidence\n> **ocrq warning:** odd script\n\nBody"
    )


def test_a_page_without_blocks_keeps_its_own_markdown() -> None:
    own = Page(number=1, width=1, height=1, markdown="# As the engine wrote it")

    assert page_markdown(own) == "# As the engine wrote it"


def test_document_gives_a_segment_once_at_its_first_page() -> None:
    pages = [
        Page(number=1, width=1, height=1, markdown=None),
        Page(number=2, width=1, height=1, markdown=None),
        Page(number=3, width=1, height=1, markdown="", blocks=[Block(label="text", text="P3")]),
        Page(number=4, width=1, height=1, markdown="Own text"),
    ]
    segments = [Segment(first_page=1, last_page=2, markdown="Pages one and two")]

    assert document_markdown(pages, segments) == "Pages one and two\n\nP3\n\nOwn text\n"


def test_document_leaves_out_furniture_unless_kept() -> None:
    pages = [page(Block(label="page_footer", text="Confidential"), Block(label="text", text="x"))]

    assert document_markdown(pages, []) == "x\n"
    assert document_markdown(pages, [], keep_furniture=True) == "Confidential\n\nx\n"


def test_an_empty_document_is_empty() -> None:
    assert document_markdown([], []) == ""
