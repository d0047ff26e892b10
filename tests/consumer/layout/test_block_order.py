"""Reading order over block boxes: columns one after the other, spanning blocks in place."""

from __future__ import annotations

from ocrq.consumer.layout.block_order import ordered_blocks
from ocrq.consumer.layout.structure import keep_lone_furniture
from ocrq.shared.schemas import Block


def block(name: str, x0: float, y0: float, x1: float, y1: float) -> Block:
    return Block(label="text", text=name, bbox=[x0, y0, x1, y1])


def names(blocks: list[Block]) -> list[str]:
    return [b.text for b in blocks]


def test_a_left_column_longer_than_the_right_is_read_to_its_end_first() -> None:
    # The layout model's order on the benchmark's page 3: the right column's end came
    # before the left column's last paragraphs.
    model_order = [
        block("left 1", 0.11, 0.07, 0.46, 0.40),
        block("left 2", 0.11, 0.42, 0.46, 0.66),
        block("right 1", 0.53, 0.07, 0.88, 0.40),
        block("right 2", 0.53, 0.42, 0.88, 0.68),
        block("left 3", 0.11, 0.68, 0.46, 0.93),
    ]
    assert names(ordered_blocks(model_order)) == [
        "left 1",
        "left 2",
        "left 3",
        "right 1",
        "right 2",
    ]


def test_a_title_and_a_footer_across_the_columns_stay_first_and_last() -> None:
    model_order = [
        block("title", 0.1, 0.02, 0.9, 0.06),
        block("right", 0.53, 0.1, 0.9, 0.5),
        block("left", 0.1, 0.1, 0.46, 0.8),
        block("page 7", 0.45, 0.95, 0.55, 0.97),
    ]
    assert names(ordered_blocks(model_order)) == ["title", "left", "right", "page 7"]


def test_a_figure_across_both_columns_separates_the_columns_above_from_those_below() -> None:
    model_order = [
        block("top left", 0.1, 0.1, 0.46, 0.3),
        block("top right", 0.53, 0.1, 0.9, 0.3),
        block("figure", 0.1, 0.32, 0.9, 0.6),
        block("bottom left", 0.1, 0.62, 0.46, 0.9),
        block("bottom right", 0.53, 0.62, 0.9, 0.9),
    ]
    assert names(ordered_blocks(model_order)) == names(model_order)


def test_blocks_of_one_column_keep_the_model_order_where_their_boxes_overlap() -> None:
    model_order = [
        block("paragraph", 0.1, 0.1, 0.9, 0.3),
        block("caption", 0.1, 0.29, 0.9, 0.35),  # overlaps the block above: no cut
        block("note", 0.1, 0.28, 0.9, 0.31),
    ]
    assert names(ordered_blocks(model_order)) == ["paragraph", "caption", "note"]


def test_blocks_without_boxes_leave_the_order_as_it_was() -> None:
    model_order = [
        block("b", 0.53, 0.1, 0.9, 0.5),
        Block(label="text", text="a"),
        block("c", 0.1, 0.1, 0.4, 0.5),
    ]
    assert names(ordered_blocks(model_order)) == ["b", "a", "c"]


def test_columns_whose_paragraphs_leave_a_common_gap_are_still_read_column_by_column() -> None:
    # tracemonkey page 11: a left and a right paragraph end just above the next ones.
    model_order = [
        block("left 1", 0.09, 0.56, 0.48, 0.619),
        block("right 1", 0.53, 0.56, 0.92, 0.622),
        block("left 2", 0.09, 0.624, 0.48, 0.90),
        block("right 2", 0.53, 0.628, 0.92, 0.75),
    ]
    assert names(ordered_blocks(model_order)) == ["left 1", "left 2", "right 1", "right 2"]


def test_a_page_with_only_a_header_line_keeps_it_as_text() -> None:
    lone = [Block(label="page_header", text="Page 1 Harbour Lantern", bbox=[0.1, 0.05, 0.7, 0.08])]
    keep_lone_furniture(lone)
    assert lone[0].label == "text"


def test_a_header_above_body_text_stays_a_header() -> None:
    blocks = [
        Block(label="page_header", text="Annual report", bbox=[0.1, 0.02, 0.5, 0.04]),
        block("body", 0.1, 0.1, 0.9, 0.5),
    ]
    keep_lone_furniture(blocks)
    assert blocks[0].label == "page_header"


def test_a_left_column_running_on_below_the_right_columns_end_is_read_before_it() -> None:
    # The structure benchmark's two-column page 3: the right column ends just above the
    # left column's last two paragraphs, which leave a horizontal gap across the page.
    model_order = [
        block("left 1", 0.11, 0.07, 0.46, 0.66),
        block("right 1", 0.53, 0.07, 0.88, 0.68),
        block("left 2", 0.11, 0.682, 0.46, 0.86),
        block("left 3", 0.11, 0.88, 0.46, 0.93),
        block("page 3", 0.46, 0.956, 0.54, 0.967),
    ]
    expected = ["left 1", "left 2", "left 3", "right 1", "page 3"]
    assert names(ordered_blocks(model_order)) == expected
