"""Page furniture and two columns: headers and page numbers are not body, columns read in turn."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from bench.document_structure import (
    FurnitureLine,
    Structure,
    structure_of_blocks,
    structure_of_markdown,
)
from bench.structure_documents import (
    A4,
    LAYOUTS,
    Layout,
    body_band,
    footer_band,
    header_band,
    load,
    render_pdf,
    truth_of,
)
from bench.structure_scores import furniture_score, order_score, structure_score, total

DOCUMENTS = Path(__file__).resolve().parents[2] / "bench" / "documents" / "structure"
HEADER = "Annual Report: Northern Region"
BODY = [
    "Revenue grew in every region this quarter, led by the northern stores.",
    "Costs stayed flat across the whole company for the third year running.",
]


def truth_with_furniture(pages: int = 2) -> Structure:
    truth = structure_of_markdown("\n\n".join(BODY) + "\n")
    truth.furniture = [
        line
        for page in range(1, pages + 1)
        for line in (
            FurnitureLine(page, "page_header", HEADER),
            FurnitureLine(page, "page_number", f"Page {page} of {pages}"),
        )
    ]
    return truth


def result_pages(furniture_label: str | None) -> list[dict[str, Any]]:
    """Two Result pages, one body paragraph each, with the header and page number on each:
    labelled as furniture, or (None) as plain text, as a reader that knows no furniture does."""
    pages = []
    for number, text in enumerate(BODY, 1):
        header = {"label": furniture_label or "text", "text": HEADER}
        footer = {"label": furniture_label or "text", "text": f"Page {number} of 2"}
        pages.append(
            {"number": number, "blocks": [header, {"label": "text", "text": text}, footer]}
        )
    return pages


def test_headers_and_page_numbers_read_as_body_cost_cer_and_count_as_leaked() -> None:
    truth = truth_with_furniture()
    score = structure_score(truth, structure_of_blocks(result_pages(None)))
    assert score.cer > 0.3
    assert (score.furniture.truth, score.furniture.labelled, score.furniture.in_body) == (4, 0, 4)
    assert score.furniture.share_kept_out == 0.0


def test_furniture_labelled_and_left_out_of_the_body_costs_nothing() -> None:
    truth = truth_with_furniture()
    score = structure_score(truth, structure_of_blocks(result_pages("page_header")))
    assert score.cer == 0.0
    assert (score.furniture.labelled, score.furniture.found, score.furniture.in_body) == (4, 4, 0)
    assert (score.furniture.share_labelled, score.furniture.share_kept_out) == (1.0, 1.0)


def test_furniture_labelled_in_the_blocks_but_left_in_the_markdown_still_leaks() -> None:
    markdown = "\n\n".join(f"{HEADER}\n\n{text}\n\nPage {n} of 2" for n, text in enumerate(BODY, 1))
    score = structure_score(truth_with_furniture(), structure_of_markdown(markdown))
    assert (score.furniture.labelled, score.furniture.in_body) == (0, 4)
    assert score.cer > 0.3


def test_a_furniture_text_the_truth_body_says_too_is_no_leak_where_the_body_says_it() -> None:
    truth = [FurnitureLine(1, "page_header", "Quarterly report")]
    body = "Quarterly report\nRevenue grew."
    assert furniture_score(truth, [], body, body).in_body == 0
    assert furniture_score(truth, [], body, "Quarterly report\n" + body).in_body == 1


def test_a_page_number_read_without_its_spaces_still_counts_as_leaked() -> None:
    truth = [FurnitureLine(3, "page_number", "Page 3 of 3")]
    assert furniture_score(truth, [], "", "compile.\nPage3of 3\nThe Book").in_body == 1


def test_a_header_found_on_another_page_is_not_a_match() -> None:
    truth = [FurnitureLine(1, "page_header", HEADER)]
    assert furniture_score(truth, [FurnitureLine(2, "page_header", HEADER)], "", "").labelled == 0
    one_slip = HEADER.replace("o", "0", 1)
    assert furniture_score(truth, [FurnitureLine(1, "page_header", one_slip)], "", "").labelled == 1


def test_totals_add_up_the_furniture_counts() -> None:
    truth = truth_with_furniture()
    both = total(
        [
            structure_score(truth, structure_of_blocks(result_pages("page_footer"))),
            structure_score(truth, structure_of_blocks(result_pages(None))),
        ]
    )
    assert (both.furniture.truth, both.furniture.labelled, both.furniture.in_body) == (8, 4, 4)
    assert both.furniture.share_kept_out == 0.5


def words_in(page: pymupdf.Page, where: pymupdf.Rect) -> str:
    return " ".join(w[4] for w in page.get_text("words", clip=where))


def sentences(text: str) -> list[tuple[int, int]]:
    """The filler sentences' numbers, as read."""
    return [(int(a), int(b)) for a, b in re.findall(r"Sentence (\d+)\.(\d+)", text)]


COLUMNS = Layout(columns=2, header=HEADER, footer="Page {page} of {pages}")
SECTIONS = "\n\n".join(
    f"## Section {n}\n\n" + " ".join(f"Sentence {n}.{i} of the filler text." for i in range(40))
    for n in range(1, 7)
)


def test_two_columns_run_under_a_full_width_title_left_column_first() -> None:
    markdown = f"# A Title Wide Enough To Cross The Middle Of The Page\n\n{SECTIONS}\n"
    with pymupdf.open(stream=render_pdf(markdown, COLUMNS), filetype="pdf") as doc:
        assert doc.page_count >= 2
        page = doc[0]
        middle = A4.width / 2
        title = [b for b in page.get_text("blocks") if b[4].startswith("A Title")]
        assert title and title[0][0] < middle < title[0][2]  # spans both columns
        bottom = footer_band().y0
        left = sentences(words_in(page, pymupdf.Rect(0, title[0][3], middle, bottom)))
        right = sentences(words_in(page, pymupdf.Rect(middle, title[0][3], A4.width, bottom)))
        assert left[0] == (1, 0) and right  # the text starts under the title, on the left
        assert left == sorted(left) and right == sorted(right) and left[-1] < right[0]
        for number, page in enumerate(doc, 1):
            assert words_in(page, header_band()) == HEADER
            assert words_in(page, footer_band()) == f"Page {number} of {doc.page_count}"
        pages = doc.page_count
    truth = truth_of(markdown, COLUMNS, pages)
    assert len(truth.furniture) == 2 * pages
    assert HEADER not in truth.text and "Page 1 of" not in truth.text


def test_two_columns_keep_every_word_over_several_pages() -> None:
    paragraph = " ".join(f"w{i} alpha beta gamma delta" for i in range(60))
    markdown = "\n\n".join([paragraph] * 12) + "\n"
    with pymupdf.open(stream=render_pdf(markdown, COLUMNS), filetype="pdf") as doc:
        assert doc.page_count >= 3
        text = " ".join(page.get_text() for page in doc)
    assert text.count("alpha") == 12 * 60


def test_the_stored_two_column_document_reads_in_order_only_column_by_column() -> None:
    (document,) = load(only="rust-introduction")
    assert LAYOUTS[document.name].columns == 2
    body = body_band()
    columns_first, lines = [], []
    with pymupdf.open(stream=document.pdf, filetype="pdf") as doc:
        for page in doc:
            columns_first.append(page.get_text(clip=body))
            for block in page.get_text("dict", clip=body)["blocks"]:
                for line in block.get("lines", []):
                    text = "".join(span["text"] for span in line["spans"])
                    lines.append((page.number, round(line["bbox"][1]), line["bbox"][0], text))
    across = "\n".join(text for *_, text in sorted(lines))  # line by line over both columns
    in_columns = order_score(document.truth.units, "\n".join(columns_first))
    read_across = order_score(document.truth.units, across)
    assert in_columns.share_in_order == 1.0 and in_columns.share_located == 1.0
    assert read_across.share_in_order < 0.8


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_laid_out_document_lists_its_header_and_page_number_on_every_page(name: str) -> None:
    (document,) = load(only=name)
    labels = [(line.page, line.label) for line in document.truth.furniture]
    pages = range(1, document.pages + 1)
    assert labels == [(p, label) for p in pages for label in ("page_header", "page_number")]
    with pymupdf.open(stream=document.pdf, filetype="pdf") as doc:
        for line in document.truth.furniture:
            where = header_band() if line.label == "page_header" else footer_band()
            assert words_in(doc[line.page - 1], where) == line.text
