"""The JSON batch scanner hands back each document as soon as its closing brace arrives."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ocrq.producer.batches.json_stream import DocumentArrayScanner
from ocrq.shared.errors import ErrorCode, OcrqError

DOCS = [{"document": "QUJD", "filename": 'a "quoted" {name}'}, {"document": "REVG\\n}"}]


def scan(body: bytes, piece: int) -> list[dict[str, object]]:
    scanner = DocumentArrayScanner(max_element=10_000)
    out = []
    for i in range(0, len(body), piece):
        out += [json.loads(raw) for raw in scanner.feed(body[i : i + piece])]
    scanner.close()
    return out


@pytest.mark.parametrize("piece", [1, 3, 1000])
def test_documents_come_out_whole_however_the_body_is_cut(piece: int) -> None:
    body = json.dumps({"documents": DOCS}).encode()
    assert scan(body, piece) == DOCS
    assert scan(json.dumps(DOCS).encode(), piece) == DOCS  # the bare array


def test_a_document_comes_out_before_the_body_ends() -> None:
    scanner = DocumentArrayScanner(max_element=10_000)
    head = b'{"documents": [{"document": "QUJD"}, '
    assert [json.loads(raw) for raw in scanner.feed(head)] == [{"document": "QUJD"}]


@pytest.mark.parametrize(
    "body",
    [
        b'{"documents": [1, 2]}',
        b'{"documents": {"document": "x"}}',
        b'{"x": 1}',
        b"[",
        b'{"documents": ["x"]}',
        b'["x", {"document": "x"}]',
    ],
)
def test_bodies_of_another_shape_are_400(body: bytes) -> None:
    with pytest.raises(OcrqError) as caught:
        scan(body, 7)
    assert caught.value.code is ErrorCode.INVALID_REQUEST


def test_an_element_over_the_limit_is_413() -> None:
    scanner = DocumentArrayScanner(max_element=100)
    with pytest.raises(OcrqError) as caught:
        list(scanner.feed(b'[{"document": "' + b"A" * 200 + b'"}]'))
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({"document": st.text(), "filename": st.text()}), max_size=5),
       st.integers(min_value=1, max_value=50))  # fmt: skip
def test_any_documents_round_trip(docs: list[dict[str, str]], piece: int) -> None:
    assert scan(json.dumps({"documents": docs}).encode(), piece) == docs


@pytest.mark.parametrize(
    "head",
    [
        b'{"' + b"k" * 70_000,
        b'{"documents": [], "note": "' + b"v" * 70_000,
        b'{"x": ["' + b"v" * 70_000,
    ],
)
def test_a_string_outside_documents_is_refused_at_64_kib_before_it_is_held_whole(
    head: bytes,
) -> None:
    scanner = DocumentArrayScanner(max_element=10_000)
    fed = 0
    with pytest.raises(OcrqError) as caught:
        for i in range(0, 64 * 1024 * 1024, 16 * 1024):  # a 64 MiB key, never sent whole
            piece = head[i : i + 16 * 1024] or b"k" * 16 * 1024
            fed += len(piece)
            list(scanner.feed(piece))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert "64 KiB" in caught.value.message
    assert fed <= 64 * 1024 + 32 * 1024


def test_an_escaped_quote_does_not_end_a_string() -> None:
    body = b'{"a\\"]}": "\\\\", "documents": [{"document": "x\\"}]"}]}'
    assert scan(body, 1) == scan(body, 1000) == [{"document": 'x"}]'}]


def test_a_document_element_cut_anywhere_comes_out_byte_for_byte() -> None:
    element = b'{"document": "QUJD\\r\\n\\"", "filename": "a\\\\b", "n": [1, {"x": "]"}]}'
    body = b' {\n"documents" : [ ' + element + b" ,\n" + element + b" ] }"
    for piece in (1, 2, 5, 17, len(body)):
        scanner = DocumentArrayScanner(max_element=10_000)
        raws = [
            raw for i in range(0, len(body), piece) for raw in scanner.feed(body[i : i + piece])
        ]
        scanner.close()
        assert raws == [element, element]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({"document": st.text(), "filename": st.text()}), max_size=3),
       st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=3),
       st.integers(min_value=1, max_value=50))  # fmt: skip
def test_documents_round_trip_among_other_keys(
    docs: list[dict[str, str]], others: dict[str, str], piece: int
) -> None:
    others.pop("documents", None)
    body = {**others, "documents": docs, **{f"{k}~": v for k, v in others.items()}}
    assert scan(json.dumps(body).encode(), piece) == docs
