"""The grounding parser on DeepSeek-OCR-style answers: blocks, boxes and tag-free Markdown."""

from __future__ import annotations

import pytest

from ocrq.consumer.grounding import parse_page, strip_tags
from ocrq.shared.schemas import Block

# A page as DeepSeek-OCR / Unlimited-OCR write it (boxes in 0..1000 of the page).
SAMPLE = (
    "<|ref|>title<|/ref|><|det|>[[60, 40, 940, 90]]<|/det|>\n"
    "# Annual Report 2024\n\n"
    "<|ref|>sub_title<|/ref|><|det|>[[60, 100, 500, 115]]<|/det|>\n"
    "## Revenue\n\n"
    "<|ref|>text<|/ref|><|det|>[[60, 120, 940, 300]]<|/det|>\n"
    "Revenue grew by 12% over the previous year.\n\n"
    "<|ref|>table<|/ref|><|det|>[[60, 320, 940, 560]]<|/det|>\n"
    "<table><tr><td>Q1</td><td>10</td></tr><tr><td>Q2</td><td>12</td></tr></table>\n\n"
    "<|ref|>image<|/ref|><|det|>[[0, 600, 1000, 1000]]<|/det|>\n\n"
    "<|ref|>image_caption<|/ref|><|det|>[[100, 960, 900, 990]]<|/det|>\n"
    "<center>Figure 1: sales by region</center>"
    "<\uff5cend\u2581of\u2581sentence\uff5c>"
)
SAMPLE_MARKDOWN = (
    "# Annual Report 2024\n\n"
    "## Revenue\n\n"
    "Revenue grew by 12% over the previous year.\n\n"
    "| Q1 | 10 |\n| --- | --- |\n| Q2 | 12 |\n\n"
    "Figure 1: sales by region"
)
LABELS = ("title", "heading", "text", "table", "figure", "caption")


def assert_clean(markdown: str) -> None:
    """No grounding tag, special token or coordinate list survives in Markdown."""
    for fragment in ("<|", "|>", "<\uff5c", "\uff5c>", "[[", "]]", "ref", "det"):
        assert fragment not in markdown, f"{fragment!r} leaked into {markdown!r}"


def parse(text: str, *, scale: float = 1000, width: int = 1240, height: int = 1754) -> list[Block]:
    return parse_page(text, coord_scale=scale, width=width, height=height).blocks


def test_realistic_page_becomes_clean_markdown_in_reading_order() -> None:
    parsed = parse_page(SAMPLE, coord_scale=1000, width=1240, height=1754, image_prefix="page-3")

    assert parsed.markdown == SAMPLE_MARKDOWN
    assert_clean(parsed.markdown)
    assert [b.label for b in parsed.blocks] == list(LABELS)


def test_label_words_do_not_leak_into_block_or_markdown_text() -> None:
    text = "<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\nHello\n"
    text += "<|ref|>sub_title<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\n## World"

    parsed = parse_page(text, coord_scale=1000, width=100, height=100)

    assert [b.text for b in parsed.blocks] == ["Hello", "World"]
    assert parsed.markdown == "Hello\n\n## World"


def test_title_with_deeper_hashes_becomes_a_heading_of_that_level() -> None:
    blocks = parse("<|ref|>title<|/ref|><|det|>[[0, 0, 10, 10]]<|/det|>\n### Deep title\n")

    assert [(b.label, b.level, b.text) for b in blocks] == [("heading", 3, "Deep title")]


def test_box_is_normalised_to_fractions_and_page_pixels() -> None:
    title = parse(SAMPLE)[0]

    assert title.bbox == [0.06, 0.04, 0.94, 0.09]
    # 0.06*1240=74.4, 0.04*1754=70.16, 0.94*1240=1165.6, 0.09*1754=157.86
    assert title.bbox_px == [74, 70, 1166, 158]


def test_coordinates_on_a_999_scale_reach_the_page_edge() -> None:
    block = parse("<|ref|>image<|/ref|><|det|>[[0, 599, 999, 999]]<|/det|>", scale=999)[0]

    assert block.bbox == [0.0, 0.5996, 1.0, 1.0]
    assert block.bbox_px == [0, 1052, 1240, 1754]


def test_fractions_are_rounded_to_four_places() -> None:
    block = parse("<|ref|>text<|/ref|><|det|>[[1, 2, 333, 667]]<|/det|>\nx", scale=999)[0]

    assert block.bbox == [0.001, 0.002, 0.3333, 0.6677]


def test_reversed_corners_are_swapped() -> None:
    block = parse("<|ref|>text<|/ref|><|det|>[[900, 800, 100, 200]]<|/det|>\nx", width=1000)[0]

    assert block.bbox == [0.1, 0.2, 0.9, 0.8]
    assert block.bbox_px == [100, 351, 900, 1403]


def test_out_of_range_coordinates_are_clamped_to_the_page() -> None:
    block = parse("<|ref|>text<|/ref|><|det|>[[-50, 10, 1500, 99999]]<|/det|>\nx")[0]

    assert block.bbox == [0.0, 0.01, 1.0, 1.0]
    assert block.bbox_px == [0, 18, 1240, 1754]


def test_several_boxes_in_one_det_give_one_block_each_and_the_text_once() -> None:
    text = "<|ref|>text<|/ref|><|det|>[[0, 0, 500, 100]], [[500, 0, 1000, 100]]<|/det|>\nSplit"

    parsed = parse_page(text, coord_scale=1000, width=1000, height=1000)

    assert [b.bbox_px for b in parsed.blocks] == [[0, 0, 500, 100], [500, 0, 1000, 100]]
    assert [b.text for b in parsed.blocks] == ["Split", ""]
    assert parsed.markdown == "Split"


def test_each_figure_box_is_a_figure_block_without_text_or_image_until_cropped() -> None:
    text = "<|ref|>image<|/ref|><|det|>[[0, 0, 10, 10]], [[20, 20, 30, 30]]<|/det|>\n"
    text += "<|ref|>figure<|/ref|><|det|>[[40, 40, 50, 50]]<|/det|>\n"

    parsed = parse_page(text, coord_scale=1000, width=100, height=100, image_prefix="page-7")

    assert [(b.label, b.text, b.image) for b in parsed.blocks] == [("figure", "", None)] * 3
    assert [b.bbox_px for b in parsed.blocks] == [[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5]]
    assert parsed.markdown == ""


def test_text_without_tags_is_one_block_without_a_box() -> None:
    parsed = parse_page("Just text.\n\nSecond paragraph.", coord_scale=1000, width=10, height=10)

    assert parsed.blocks == [Block(label="text", text="Just text.\n\nSecond paragraph.")]
    assert parsed.markdown == "Just text.\n\nSecond paragraph."


def test_text_before_the_first_ref_is_kept_as_a_block() -> None:
    blocks = parse("Preamble\n<|ref|>text<|/ref|><|det|>[[0, 0, 1, 1]]<|/det|>\nBody")

    assert [(b.text, b.bbox == []) for b in blocks] == [("Preamble", True), ("Body", False)]


def test_empty_answer_gives_no_blocks_and_empty_markdown() -> None:
    parsed = parse_page("", coord_scale=1000, width=10, height=10)

    assert parsed.blocks == []
    assert parsed.markdown == ""


@pytest.mark.parametrize(
    ("text", "markdown"),
    [
        ("Done.\n<|ref|>tab", "Done."),
        ("Done.\n<|ref|>table<|/ref|>", "Done."),
        ("Done.\n<|ref|>table<|/ref|><|det|>[[60, 320, 9", "Done."),
        ("Done.\n<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/de", "Done."),
        ("<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\nHalf a sent<|", "Half a sent"),
        ("<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\nCut <\uff5cend\u2581of", "Cut"),
    ],
)
def test_answer_cut_off_mid_tag_leaves_no_fragment(text: str, markdown: str) -> None:
    assert parse_page(text, coord_scale=1000, width=10, height=10).markdown == markdown


def test_every_prefix_of_a_page_parses_without_leaking_tags() -> None:
    for end in range(len(SAMPLE) + 1):
        parsed = parse_page(SAMPLE[:end], coord_scale=1000, width=1240, height=1754)
        assert_clean(parsed.markdown)
        assert all(len(b.bbox) in (0, 4) for b in parsed.blocks)


def test_box_with_three_numbers_is_dropped_but_its_text_kept() -> None:
    blocks = parse("<|ref|>text<|/ref|><|det|>[[10, 20, 30]]<|/det|>\nStill here")

    assert blocks == [Block(label="text", text="Still here")]


def test_garbage_inside_det_never_reaches_the_text() -> None:
    text = "<|ref|>text<|/ref|><|det|>[[a, b, c, d]], [[1, 2, 3, 4, 5]]<|/det|>\nFine"

    parsed = parse_page(text, coord_scale=1000, width=10, height=10)

    assert parsed.blocks == [Block(label="text", text="Fine")]


def test_only_valid_boxes_of_a_mixed_det_are_kept() -> None:
    blocks = parse("<|ref|>text<|/ref|><|det|>[[1, 2]], [[0, 0, 100, 100]]<|/det|>\nOk", width=10)

    assert [(b.text, b.bbox_px) for b in blocks] == [("Ok", [0, 0, 1, 175])]


def test_label_missing_its_close_still_counts_when_a_box_follows() -> None:
    blocks = parse("<|ref|>table<|det|>[[0, 0, 1000, 1000]]<|/det|>\n<table></table>")

    assert [(b.label, b.text, b.bbox) for b in blocks] == [
        ("table", "<table></table>", [0.0, 0.0, 1.0, 1.0])
    ]


def test_det_missing_its_close_keeps_the_box_and_the_following_line() -> None:
    blocks = parse("<|ref|>text<|/ref|><|det|>[[0, 0, 500, 500]]\nBody line", width=100)

    assert [(b.text, b.bbox_px) for b in blocks] == [("Body line", [0, 0, 50, 877])]


def test_grounding_and_other_special_tokens_are_removed() -> None:
    text = "<|grounding|>Intro<|end|> text<\uff5cend\u2581of\u2581sentence\uff5c>"

    assert parse_page(text, coord_scale=1000, width=10, height=10).markdown == "Intro text"


def test_multiline_label_garbage_falls_back_to_text_label() -> None:
    blocks = parse("<|ref|>this is not a label<|/ref|><|det|>[[0, 0, 1, 1]]<|/det|>\nBody")

    assert [(b.label, b.text) for b in blocks] == [("text", "Body")]


def test_strip_tags_removes_labels_boxes_and_tokens_but_not_html() -> None:
    stripped = strip_tags(SAMPLE)

    assert_clean(stripped)
    for label in ("title", "sub_title", "image_caption"):
        assert label not in stripped
    assert "<table><tr><td>Q1</td>" in stripped
    assert "# Annual Report 2024" in stripped


def test_strip_tags_leaves_plain_text_alone() -> None:
    text = "a < b and c > d; x|y; [1, 2] <b>bold</b>"

    assert strip_tags(text) == text
