"""Tables on scanned pages: a grid inferred from the words where no rules draw one."""
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from pathlib import Path

import pytest
from support.tesseract_scans import read_scan

from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.consumer.layout.scan_tables import find_tables
from ocrq.consumer.layout.scanned import ReadWord

CHAR = 18.0  # a character's width in the synthetic pages' pixels
LINE = 50.0  # their line pitch


def _line(k: int, pieces: list[tuple[float, str]]) -> list[ReadWord]:
    """Words of line ``k``: each piece's words from its x, a space (one character) apart."""
    words = []
    for x, text in pieces:
        for word in text.split():
            width = CHAR * len(word)
            words.append(ReadWord(word, (x, 100 + LINE * k, x + width, 132 + LINE * k), 0.9, k))
            x += width + CHAR
    return words


def _page(lines: list[list[tuple[float, str]]]) -> list[ReadWord]:
    return [word for k, pieces in enumerate(lines) for word in _line(k, pieces)]


GRID = [
    ["Vessel", "Berth", "Tonnes", "Days"],
    ["Aurora", "East 4", "1200", "3"],
    ["Borealis", "West 1", "860", "2"],
    ["Cormorant", "", "15300", "6"],
]
PROSE = "the ferries run a reduced timetable for the winter months ahead"


def test_words_aligned_in_columns_make_a_table_with_its_cells() -> None:
    xs = [100.0, 400.0, 650.0, 900.0]
    words = _page([[(x, t) for x, t in zip(xs, row, strict=True) if t] for row in GRID])

    [found] = find_tables(words, 1200, 1600)

    table = found.block.table
    assert table is not None and (table.rows, table.cols) == (4, 4)
    assert [[c.text for c in table.cells if c.row == r] for r in range(4)] == GRID
    assert found.block.label == "table" and found.block.text.startswith("| Vessel | Berth |")
    assert "<table" in table.html and all(len(c.bbox) == 4 for c in table.cells)
    assert found.words == set(range(len(words)))


def test_a_table_ends_at_the_running_text_below_it() -> None:
    xs = [100.0, 400.0, 650.0, 900.0]
    rows = [[(x, t) for x, t in zip(xs, row, strict=True) if t] for row in GRID]
    words = _page([[(100.0, PROSE)], *rows, [(100.0, PROSE)]])

    [found] = find_tables(words, 1200, 1600)

    assert found.block.table is not None and found.block.table.rows == 4
    assert not any(words[i].text == "ferries" for i in found.words)


def test_two_columns_of_prose_are_no_table() -> None:
    assert find_tables(_page([[(100.0, PROSE), (1300.0, PROSE)]] * 8), 2600, 1600) == []


def test_three_columns_of_prose_are_no_table() -> None:
    lines = [[(100.0, PROSE), (1300.0, PROSE), (2500.0, PROSE)]] * 8
    assert find_tables(_page(lines), 3800, 1600) == []


def test_a_bulleted_list_is_no_table() -> None:
    lines = [[(100.0, "\u2022"), (160.0, PROSE)], [(160.0, "winter months")]] * 4
    assert find_tables(_page(lines), 1400, 1600) == []


def test_two_aligned_lines_are_too_few_for_a_table() -> None:
    xs = [100.0, 400.0, 650.0, 900.0]
    words = _page([[(x, t) for x, t in zip(xs, row, strict=True) if t] for row in GRID[:2]])
    assert find_tables(words, 1200, 1600) == []


TOTALS = [("Total Amount:", "31.00"), ("Cash Received", "RM 101.00"), ("Change :", "70.00")]


def test_labels_with_their_amounts_make_a_table_of_two_columns() -> None:
    # One gutter, as two columns of prose have: the amounts make it a table, read row by row.
    words = _page([[(100.0, label), (700.0, amount)] for label, amount in TOTALS])

    [found] = find_tables(words, 1000, 1600)

    table = found.block.table
    assert table is not None and (table.rows, table.cols) == (3, 2)
    assert [[c.text for c in table.cells if c.row == r] for r in range(3)] == [
        list(row) for row in TOTALS
    ]


def test_labels_end_where_their_amounts_do() -> None:
    lines = [[(100.0, label), (700.0, amount)] for label, amount in TOTALS]
    words = _page([*lines, [(100.0, "Thank You"), (700.0, "Come Again")]])

    [found] = find_tables(words, 1000, 1600)

    assert found.block.table is not None and found.block.table.rows == 3
    assert not any(words[i].text == "Thank" for i in found.words)


def test_labels_beside_words_are_no_table() -> None:
    lines = [[(100.0, "Vessel"), (700.0, "Aurora")], [(100.0, "Berth"), (700.0, "East four")]]
    assert find_tables(_page(lines * 2), 1000, 1600) == []


async def test_an_unruled_table_on_a_scan_comes_back_with_its_cells(
    engine: TesseractEngine, scans: dict[str, Path], unruled_rows: list[list[str]]
) -> None:
    page = await read_scan(engine, scans["unruled_table"])

    [table] = [b.table for b in page.blocks if b.label == "table"]
    assert table is not None and (table.rows, table.cols) == (5, 4)
    assert [[c.text for c in table.cells if c.row == r] for r in range(5)] == unruled_rows
    assert [b.label for b in page.blocks] == ["heading", "text", "table", "text"]


@pytest.mark.parametrize("name", ["two_column", "bulleted_list", "text_only"])
async def test_prose_and_lists_on_a_scan_stay_text(
    engine: TesseractEngine, scans: dict[str, Path], name: str
) -> None:
    page = await read_scan(engine, scans[name])

    assert [b for b in page.blocks if b.label == "table"] == []
    assert all(
        b.label in ("title", "heading", "text", "list_item", "page_header", "page_number")
        for b in page.blocks
    )
