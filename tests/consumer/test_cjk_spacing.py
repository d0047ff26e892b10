"""Spaces Tesseract puts between Japanese and Chinese tokens are dropped, and only those."""

from __future__ import annotations

from ocrq.consumer.engines.cjk_spacing import unspaced, unspaced_block
from ocrq.shared.schemas import Block, Cell, Table


def test_spaces_between_kana_and_kanji_are_dropped() -> None:
    assert (
        unspaced("標準 マー ケッ トモ デル は 2 次 元 で 説明 する")
        == "標準マーケットモデルは 2 次元で説明する"
    )


def test_chinese_with_full_width_punctuation_is_joined() -> None:
    assert (
        unspaced("人工 智能 是 计算机 科学 的 一个 分支 。 它")
        == "人工智能是计算机科学的一个分支。它"
    )


def test_latin_korean_and_line_breaks_keep_their_spaces() -> None:
    assert unspaced("Total due 12.50 EUR") == "Total due 12.50 EUR"
    assert unspaced("한국어 문장 입니다") == "한국어 문장 입니다"
    assert unspaced("東京 Tokyo 大阪") == "東京 Tokyo 大阪"
    assert unspaced("東京\n大阪") == "東京\n大阪"


def test_a_tables_cells_and_html_are_unspaced_with_its_text() -> None:
    table = Table(
        rows=1,
        cols=1,
        cells=[Cell(row=0, col=0, text="売上 高")],
        html="<table><tr><td>売上 高</td></tr></table>",
    )
    block = Block(label="table", text="| 売上 高 |", table=table)

    out = unspaced_block(block)

    assert out.text == "| 売上高 |"
    assert out.table is not None
    assert [c.text for c in out.table.cells] == ["売上高"]
    assert out.table.html == "<table><tr><td>売上高</td></tr></table>"


def test_a_block_with_nothing_to_join_is_returned_as_it_is() -> None:
    block = Block(label="text", text="plain words")
    assert unspaced_block(block) is block
