"""Properties of the grounding parser: it never raises, and boxes it is given come back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ocrq.consumer.grounding import block_label, parse_page
from ocrq.shared.schemas import BLOCK_LABELS

LABELS = st.sampled_from(["title", "text", "table", "sub_title", "equation", "image_caption"])
COORD = st.integers(min_value=0, max_value=1000)
# Plain words: no hashes, bullets or numbering that would make a title a heading or a text a
# list item (test_grounding_labels.py covers those).
WORDS = st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_parses_without_raising(text: str) -> None:
    page = parse_page(text, coord_scale=1000, width=800, height=1000)
    for block in page.blocks:
        assert all(0.0 <= v <= 1.0 for v in block.bbox)
        assert "<|ref|>" not in block.text and "<|det|>" not in block.text
        assert block.label in BLOCK_LABELS


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(LABELS, COORD, COORD, COORD, COORD, WORDS), min_size=1, max_size=8))
def test_the_boxes_written_are_the_boxes_read(
    pieces: list[tuple[str, int, int, int, int, str]],
) -> None:
    text = "".join(
        f"<|ref|>{label}<|/ref|><|det|>[[{x1}, {y1}, {x2}, {y2}]]<|/det|>\n{words}\n\n"
        for label, x1, y1, x2, y2, words in pieces
    )
    page = parse_page(text, coord_scale=1000, width=1000, height=1000)
    expected = [
        [min(x1, x2) / 1000, min(y1, y2) / 1000, max(x1, x2) / 1000, max(y1, y2) / 1000]
        for _, x1, y1, x2, y2, _ in pieces
    ]
    assert [b.bbox for b in page.blocks] == [[round(v, 4) for v in box] for box in expected]
    assert [b.label for b in page.blocks] == [block_label(label) for label, *_ in pieces]
    assert [b.bbox_px for b in page.blocks] == [[round(v * 1000) for v in box] for box in expected]
