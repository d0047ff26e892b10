"""Plain text: the body's blocks separated by blank lines, tables as tab-separated rows."""

from __future__ import annotations

from support.render_inputs import result_of, spanned_grid

from ocrq.shared.render.text import document_text
from ocrq.shared.schemas import Block, Page, Segment


def test_blocks_are_separated_by_blank_lines_and_the_text_ends_with_a_newline() -> None:
    page = Page(
        number=1,
        width=1,
        height=1,
        markdown="",
        blocks=[
            Block(label="title", text="# Report", level=1),
            Block(label="text", text="Body."),
            Block(label="figure", text="![figure 1](images/p1-1.png)", image="p1-1.png"),
            Block(label="page_number", text="1"),
            Block(
                label="table",
                text="| a | b |",
                table=spanned_grid("ab", "1", "2"),
            ),
        ],
    )

    assert document_text(result_of([page])) == "Report\n\nBody.\n\nab\t\n1\t2\n"
    assert document_text(result_of([page]), keep_furniture=True) == (
        "Report\n\nBody.\n\n1\n\nab\t\n1\t2\n"
    )


def test_text_without_blocks_comes_from_the_page_or_its_segment_once() -> None:
    pages = [
        Page(number=1, width=1, height=1, markdown=None),
        Page(number=2, width=1, height=1, markdown=None),
        Page(number=3, width=1, height=1, markdown="Third\n\n\npage"),
    ]
    segments = [Segment(first_page=1, last_page=2, markdown="One and two")]

    assert document_text(result_of(pages, segments)) == "One and two\n\nThird\n\npage\n"


def test_an_empty_result_has_no_text() -> None:
    assert document_text(result_of([])) == ""
