"""The structure benchmark's scores: a found heading, a matched cell, text in order, CER."""

# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import json
import random
from pathlib import Path

import pymupdf
import pytest

from bench.document_structure import (
    GridCell,
    Heading,
    Structure,
    structure_from_json,
    structure_of_blocks,
    structure_of_markdown,
)
from bench.edit_distance import levenshtein
from bench.structure_documents import (
    LAYOUTS,
    Layout,
    body_band,
    render_pdf,
    truth_of,
)
from bench.structure_scores import (
    cell_score,
    heading_score,
    order_score,
    structure_score,
    text_edits,
    total,
)

DOCUMENTS = Path(__file__).resolve().parents[2] / "bench" / "documents" / "structure"

PAGE = """# Quarterly report

Revenue grew in every region this quarter, led by the northern stores.

## Sales by region

| Region | Units |
|--------|-------|
| North  | 120   |
| South  | 95    |

1. Open the new warehouse before the summer.
2. Hire two more drivers for the southern routes.
"""


def grid(rows: list[list[str]]) -> list[GridCell]:
    return [GridCell(r, c, text) for r, row in enumerate(rows) for c, text in enumerate(row)]


def test_markdown_headings_tables_and_lists_become_the_structure() -> None:
    found = structure_of_markdown(PAGE)
    assert found.headings == [Heading("Quarterly report", 1), Heading("Sales by region", 2)]
    assert found.tables == [grid([["Region", "Units"], ["North", "120"], ["South", "95"]])]
    assert found.units[2:] == [
        "Sales by region",
        "Region Units North 120 South 95",
        "1. Open the new warehouse before the summer.",
        "2. Hire two more drivers for the southern routes.",
    ]


def test_an_html_table_cell_after_a_column_span_takes_the_next_free_column() -> None:
    html = "<table><tr><th colspan=2>Both</th><th>Third</th></tr><tr><td>a</td><td>b</td></tr>"
    found = structure_of_markdown(html + "</table>\n")
    assert found.tables == [
        [GridCell(0, 0, "Both"), GridCell(0, 2, "Third"), GridCell(1, 0, "a"), GridCell(1, 1, "b")]
    ]


def test_a_heading_read_with_one_wrong_letter_still_counts() -> None:
    truth = [Heading("Sales by region", 2)]
    assert heading_score(truth, [Heading("Sa1es by region", 2)]).recall == 1.0
    assert heading_score(truth, [Heading("Costs by region", 2)]).recall == 0.0


def test_extra_headings_lower_precision_and_levels_compare_relative_to_the_top() -> None:
    truth = [Heading("Data Types", 2), Heading("Scalar Types", 3)]
    found = [Heading("Data Types", 1), Heading("Scalar Types", 2), Heading("Let's jump", 2)]
    score = heading_score(truth, found)
    assert (score.recall, score.level_accuracy) == (1.0, 1.0)
    assert score.precision == pytest.approx(2 / 3)
    flat = heading_score(truth, [Heading("Data Types", 2), Heading("Scalar Types", 2)])
    assert flat.level_accuracy == 0.5


def test_a_heading_found_twice_is_matched_once() -> None:
    score = heading_score([Heading("Scope", 2)], [Heading("Scope", 2), Heading("Scope", 2)])
    assert (score.matched, score.precision, score.recall) == (1, 0.5, 1.0)


def test_blocks_all_labelled_text_give_no_headings_and_no_tables() -> None:
    pages = [{"blocks": [{"label": "text", "text": line} for line in PAGE.splitlines() if line]}]
    score = structure_score(structure_of_markdown(PAGE), structure_of_blocks(pages))
    assert (score.headings.recall, score.cells.f1, score.cells.tables_found) == (0.0, 0.0, 0)


def test_blocks_give_headings_by_label_and_tables_by_cells_and_leave_furniture_out() -> None:
    cells = [{"row": c.row, "col": c.col, "text": c.text} for c in grid([["Region", "Units"]])]
    blocks = [
        {"label": "page_header", "text": "ACME confidential"},
        {"label": "title", "text": "Quarterly report"},
        {"label": "heading", "text": "Sales by region", "level": 2},
        {"label": "table", "text": "| Region | Units |", "table": {"cells": cells}},
        {"label": "page_number", "text": "1"},
    ]
    found = structure_of_blocks([{"blocks": blocks}])
    assert found.headings == [Heading("Quarterly report", 1), Heading("Sales by region", 2)]
    assert found.tables == [grid([["Region", "Units"]])]
    assert found.units == ["Quarterly report", "Sales by region", "Region Units"]


def test_a_table_read_one_row_off_matches_no_cell() -> None:
    truth = [grid([["Region", "Units"], ["North", "120"]])]
    shifted = [grid([["", ""], ["Region", "Units"], ["North", "120"]])]
    assert cell_score(truth, truth).f1 == 1.0
    assert cell_score(truth, shifted).f1 == 0.0


def test_tables_pair_by_shared_cells_whatever_order_they_come_in() -> None:
    first, second = grid([["a", "b"], ["c", "d"]]), grid([["wxyz", "stuv"]])
    score = cell_score([first, second], [second, first])
    assert (score.hits, score.f1) == (6, 1.0)


def test_a_missed_table_costs_recall_and_a_spurious_one_precision() -> None:
    table = grid([["alpha", "beta"], ["gamma", "delta"]])
    missed = cell_score([table, grid([["one", "two"]])], [table])
    spurious = cell_score([table], [table, grid([["noise", "more"]])])
    assert (missed.hits, missed.truth_cells, missed.found_cells) == (4, 6, 4)
    assert (spurious.hits, spurious.truth_cells, spurious.found_cells) == (4, 4, 6)


UNITS = [
    "Revenue grew in every region this quarter",
    "The northern stores led the growth again",
    "Costs stayed flat across the whole company",
]


def test_order_ignores_how_the_found_text_is_split_into_lines() -> None:
    as_lines = "\n".join(" ".join(UNITS).replace(" the", "\nthe").split("\n"))
    score = order_score(UNITS, as_lines)
    assert (score.in_order, score.located, score.locatable) == (3, 3, 3)


def test_two_paragraphs_read_the_wrong_way_round_are_out_of_order() -> None:
    score = order_score(UNITS, "\n".join([UNITS[1], UNITS[0], UNITS[2]]))
    assert (score.in_order, score.located) == (2, 3)
    assert order_score(UNITS, UNITS[0]).share_located == pytest.approx(1 / 3)


def test_cer_is_the_edit_distance_over_the_truth_length() -> None:
    assert text_edits("sitting", "kitten") == (3, 6)
    assert text_edits("a  b\nc", "a b c") == (0, 5)  # whitespace runs are one space
    assert text_edits("it\u2019s", "it's") == (0, 4)  # a typographic apostrophe reads as '


def test_levenshtein_agrees_with_the_textbook_dynamic_programme() -> None:
    rng = random.Random(7)
    for _ in range(200):
        a = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 90)))
        b = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 90)))
        row = list(range(len(b) + 1))
        for i, x in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, y in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
        assert levenshtein(a, b) == row[-1]


def test_totals_sum_the_counts_so_a_long_document_weighs_more() -> None:
    truth = structure_of_markdown(PAGE)
    perfect = structure_score(truth, truth)
    empty = structure_score(truth, Structure())
    both = total([perfect, empty, empty])
    assert both.headings.recall == pytest.approx(1 / 3)
    assert both.cer == pytest.approx(2 / 3)


STORED = ["contributor-covenant", "rust-data-types", "rust-introduction", "rust-operators"]


@pytest.mark.parametrize("name", STORED)
def test_each_stored_truth_is_its_markdown_read_again_and_its_pdf_says_it(name: str) -> None:
    truth = structure_from_json(json.loads((DOCUMENTS / f"{name}.truth.json").read_text()))
    markdown = (DOCUMENTS / f"{name}.md").read_text()
    layout = LAYOUTS.get(name, Layout())
    with pymupdf.open(DOCUMENTS / f"{name}.pdf") as doc:
        assert truth == truth_of(markdown, layout, doc.page_count)
        # The body lies between the margins; the furniture, where there is any, outside them.
        body = body_band()
        text_layer = "\n".join(page.get_text(clip=body) for page in doc)
    edits, chars = text_edits(text_layer, truth.text)
    assert edits / chars < 0.01
    assert truth.headings and (truth.tables or name == "contributor-covenant")


def test_every_stored_document_is_in_the_tests_and_renders_the_same_twice() -> None:
    assert sorted(p.stem for p in DOCUMENTS.glob("*.pdf")) == STORED
    markdown = (DOCUMENTS / "rust-introduction.md").read_text()
    layout = LAYOUTS["rust-introduction"]
    assert render_pdf(markdown, layout) == render_pdf(markdown, layout)  # no random /ID
