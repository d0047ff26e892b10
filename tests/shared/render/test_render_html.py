"""Semantic HTML: elements per label, each with its page and box; text always escaped."""

from __future__ import annotations

from html.parser import HTMLParser

from support.render_inputs import result_of

from ocrq.shared.render.html import document_html
from ocrq.shared.schemas import Block, Cell, Page, Segment, Table


class Elements(HTMLParser):
    """Every start tag with its attributes, and whether each opened tag was closed."""

    VOID = frozenset({"meta", "img", "br"})

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, (tag, self.open)
        self.open.pop()


def elements(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    assert parser.open == []
    return parser


PAGE = Page(
    number=2,
    width=100,
    height=100,
    markdown="",
    blocks=[
        Block(label="page_header", text="ACME", bbox=[0.1, 0.0, 0.9, 0.05]),
        Block(label="title", text="Report <2024>", level=1, bbox=[0.1, 0.06, 0.9, 0.1]),
        Block(label="heading", text="Sales", level=3, bbox=[0.1, 0.11, 0.5, 0.13]),
        Block(label="text", text="A & B", bbox=[0.1, 0.14, 0.9, 0.3]),
        Block(label="list_item", text="- one", bbox=[0.1, 0.31, 0.9, 0.33]),
        Block(label="list_item", text="- two", bbox=[0.1, 0.34, 0.9, 0.36]),
        Block(
            label="table",
            text="",
            bbox=[0.1, 0.4, 0.9, 0.5],
            table=Table(rows=1, cols=1, cells=[Cell(row=0, col=0, text="x", header=True)]),
        ),
        Block(label="figure", text="", image="p2-1.png", bbox=[0.1, 0.5, 0.9, 0.8]),
        Block(label="caption", text="Figure 1", bbox=[0.1, 0.81, 0.9, 0.84]),
        Block(label="page_number", text="2", bbox=[0.45, 0.95, 0.55, 0.99]),
    ],
)


def test_every_block_element_carries_its_page_and_its_box_to_four_places() -> None:
    html = document_html(result_of([PAGE]))

    tags = elements(html).tags
    boxed = [(tag, attrs["data-bbox"]) for tag, attrs in tags if "data-bbox" in attrs]
    assert boxed == [
        ("h1", "0.1000 0.0600 0.9000 0.1000"),
        ("h3", "0.1000 0.1100 0.5000 0.1300"),
        ("p", "0.1000 0.1400 0.9000 0.3000"),
        ("li", "0.1000 0.3100 0.9000 0.3300"),
        ("li", "0.1000 0.3400 0.9000 0.3600"),
        ("table", "0.1000 0.4000 0.9000 0.5000"),
        ("figure", "0.1000 0.5000 0.9000 0.8000"),
        ("figcaption", "0.1000 0.8100 0.9000 0.8400"),
    ]
    assert all(attrs.get("data-page") == "2" for tag, attrs in tags if "data-bbox" in attrs)


def test_document_is_html5_with_a_section_per_page_and_escaped_text() -> None:
    html = document_html(result_of([Page(number=1, width=1, height=1, markdown="x"), PAGE]))

    assert html.startswith("<!DOCTYPE html>\n<html>")
    assert '<section data-page="1">' in html and '<section data-page="2">' in html
    assert "<title>Report &lt;2024&gt;</title>" in html
    assert "A &amp; B" in html and "<2024>" not in html
    assert '<ul>\n<li data-page="2"' in html and ">one</li>" in html
    assert '<img src="images/p2-1.png" alt="figure 1">' in html
    assert "<th>x</th>" in html


def test_the_words_read_inside_a_figure_sit_in_its_element_before_its_caption() -> None:
    figure = Block(label="figure", text="", image="p1-1.png", bbox=[0.1, 0.1, 0.9, 0.5])
    labels = Block(label="text", text="Monitor Record <LIR>", bbox=[0.2, 0.2, 0.8, 0.4])
    caption = Block(label="caption", text="Figure 2. States", bbox=[0.1, 0.52, 0.9, 0.55])
    below = Block(label="text", text="Body text", bbox=[0.1, 0.6, 0.9, 0.7])
    page = Page(
        number=1, width=100, height=100, markdown="", blocks=[figure, labels, caption, below]
    )

    html = document_html(result_of([page]))

    assert (
        '<figure data-page="1" data-bbox="0.1000 0.1000 0.9000 0.5000">'
        '<img src="images/p1-1.png" alt="figure 1">'
        '<p data-page="1" data-bbox="0.2000 0.2000 0.8000 0.4000">Monitor Record &lt;LIR&gt;</p>'
        '<figcaption data-page="1" data-bbox="0.1000 0.5200 0.9000 0.5500">Figure 2. States'
        "</figcaption></figure>"
    ) in html
    # Text below the figure is no part of it.
    assert '<p data-page="1" data-bbox="0.1000 0.6000 0.9000 0.7000">Body text</p>' in html
    assert '<figure data-page="1" data-bbox="0.1000 0.6000' not in html


def test_furniture_is_left_out_unless_kept_then_header_and_footer() -> None:
    assert "ACME" not in document_html(result_of([PAGE]))

    kept = document_html(result_of([PAGE]), keep_furniture=True)

    assert '<header class="page-header" data-page="2"' in kept and ">ACME</header>" in kept
    assert '<footer class="page-number" data-page="2"' in kept


def test_engine_markup_never_reaches_the_page() -> None:
    evil = Page(
        number=1,
        width=1,
        height=1,
        markdown="",
        blocks=[Block(label="text", text="<script>alert(1)</script>")],
        warnings=["<b>bad</b>"],
    )

    html = document_html(result_of([evil]))

    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html
    assert '<aside class="ocrq-warning" data-page="1">ocrq warning: &lt;b&gt;' in html


def test_a_segment_is_given_once_in_its_first_page_section() -> None:
    pages = [Page(number=n, width=1, height=1) for n in (1, 2)]

    html = document_html(
        result_of(pages, [Segment(first_page=1, last_page=2, markdown="Both\n\npages")])
    )

    assert html.count("Both") == 1
    assert '<p data-page="1-2">Both</p>' in html and '<p data-page="1-2">pages</p>' in html
