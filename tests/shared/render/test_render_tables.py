"""Table grids as Markdown, HTML and CSV, and HTML tables read back into grids."""

from __future__ import annotations

import csv
import io

from hypothesis import given, settings
from hypothesis import strategies as st
from support.render_inputs import grid_of

from ocrq.shared.render.tables import (
    table_csv,
    table_from_html,
    table_html,
    table_markdown,
    table_tsv,
)
from ocrq.shared.schemas import Cell, Table

# Row 0: "Region" spans two rows, "Sales" two columns; row 1 fills the two columns under it.
SPANNING = Table(
    rows=3,
    cols=3,
    cells=[
        Cell(row=0, col=0, row_span=2, text="Region", header=True),
        Cell(row=0, col=1, col_span=2, text="Sales", header=True),
        Cell(row=1, col=1, text="2023", header=True),
        Cell(row=1, col=2, text="2024", header=True),
        Cell(row=2, col=0, text='North, "east"'),
        Cell(row=2, col=1, text="10"),
        Cell(row=2, col=2, text="12"),
    ],
)
PLAIN = grid_of([["a|b", "two\nlines"], ["1", "2"]])


def test_csv_puts_a_spanning_cell_in_its_top_left_slot_and_leaves_the_rest_empty() -> None:
    text = table_csv(SPANNING)

    assert text == 'Region,Sales,\r\n,2023,2024\r\n"North, ""east""",10,12\r\n'
    assert list(csv.reader(io.StringIO(text))) == [
        ["Region", "Sales", ""],
        ["", "2023", "2024"],
        ['North, "east"', "10", "12"],
    ]


def test_html_keeps_spans_and_marks_header_cells() -> None:
    html = table_html(SPANNING)

    assert html.startswith('<table><tr><th rowspan="2">Region</th><th colspan="2">Sales</th></tr>')
    assert "<tr><th>2023</th><th>2024</th></tr>" in html
    assert html.endswith('<tr><td>North, "east"</td><td>10</td><td>12</td></tr></table>')


def test_html_escapes_cell_text_and_fills_slots_no_cell_covers() -> None:
    table = Table(rows=1, cols=2, cells=[Cell(row=0, col=1, text="<script>x</script>")])

    assert (
        table_html(table)
        == "<table><tr><td></td><td>&lt;script&gt;x&lt;/script&gt;</td></tr></table>"
    )


def test_markdown_table_has_the_first_row_as_header_and_escapes_pipes() -> None:
    assert table_markdown(PLAIN) == "| a\\|b | two lines |\n| --- | --- |\n| 1 | 2 |"


def test_tsv_gives_one_line_per_row() -> None:
    assert table_tsv(PLAIN) == "a|b\ttwo lines\n1\t2"


def test_html_reads_back_rows_columns_spans_and_header_cells() -> None:
    html = (
        '<table><thead><tr><th rowspan=2>Mode</th><td colspan="3">Native</td></tr></thead>'
        "<tr><td>Tiny</td><td>Small<br>x</td><td>&lt;Base&gt;</td></tr></table>"
    )

    table = table_from_html(html)

    assert (table.rows, table.cols) == (2, 4)
    assert table.cells == [
        Cell(row=0, col=0, row_span=2, text="Mode", header=True),
        Cell(row=0, col=1, col_span=3, text="Native", header=True),
        Cell(row=1, col=1, text="Tiny"),
        Cell(row=1, col=2, text="Small x"),
        Cell(row=1, col=3, text="<Base>"),
    ]
    assert table.html == table_html(table)


def test_html_reading_survives_garbage_and_a_table_cut_off() -> None:
    table = table_from_html('<table><tr><td colspan="x">a</td><td rowspan="999">b<table><tr><td>c')

    assert [(c.text, c.row_span, c.col_span) for c in table.cells] == [("a", 1, 1), ("b c", 1, 1)]


def test_a_cell_before_any_row_opens_one() -> None:
    table = table_from_html("<td>lonely</td>")

    assert (table.rows, table.cols, table.cells[0].text) == (1, 1, "lonely")


GRIDS = st.lists(
    st.lists(
        st.text(alphabet="abc <>&\"'", max_size=5).map(lambda s: " ".join(s.split())),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=100, deadline=None)
@given(GRIDS)
def test_a_grid_written_as_html_reads_back_the_same(grid: list[list[str]]) -> None:
    cols = max(len(row) for row in grid)

    back = table_from_html(table_html(grid_of(grid)))

    padded = [[*row, *[""] * (cols - len(row))] for row in grid]
    assert [[c.text for c in back.cells if c.row == r] for r in range(len(grid))] == padded
    assert (back.rows, back.cols) == (len(grid), cols)
