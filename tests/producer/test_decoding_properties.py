"""Properties of base64 decoding: every encoding of the bytes gives the bytes back, junk fails."""

from __future__ import annotations

import base64

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ocrq.producer.jobs.decoding import SLICE, decode_document, decode_plain
from ocrq.shared.errors import ErrorCode, OcrqError

DATA = st.binary(min_size=1, max_size=3000)


def wrapped(text: str, width: int, newline: str) -> str:
    return newline.join(text[i : i + width] for i in range(0, len(text), width))


@settings(max_examples=200, deadline=None)
@given(DATA, st.sampled_from([0, 4, 60, 76]), st.sampled_from(["\n", "\r\n", " "]),
       st.booleans(), st.booleans(), st.booleans())  # fmt: skip
def test_every_accepted_spelling_decodes_to_the_same_bytes(
    data: bytes, width: int, newline: str, urlsafe: bool, unpadded: bool, data_uri: bool
) -> None:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    if unpadded:
        text = text.rstrip("=")
    if width:
        text = wrapped(text, width, newline)
    if data_uri:
        text = "data:application/pdf;base64," + text
    declared, decoded = decode_document(text, max_document=len(data))
    assert decoded == data
    assert declared == ("application/pdf" if data_uri else None)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_decodes_or_fails_with_a_catalogue_code(text: str) -> None:
    try:
        decode_document(text, max_document=1000)
    except OcrqError as e:
        assert e.code in {ErrorCode.INVALID_BASE64, ErrorCode.INVALID_REQUEST,
                          ErrorCode.PAYLOAD_TOO_LARGE}  # fmt: skip


@given(st.integers(min_value=1, max_value=64))
def test_a_document_one_byte_over_the_limit_is_413(extra: int) -> None:
    data = b"x" * (SLICE + extra)
    with pytest.raises(OcrqError) as caught:
        decode_document(base64.b64encode(data).decode(), max_document=SLICE + extra - 1)
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_fast_path_decodes_only_what_the_slow_path_decodes_the_same(text: str) -> None:
    decoded = decode_plain(msgspec.Raw(msgspec.json.encode(text)))
    if decoded is None:
        return  # left to the slow path, whatever it says
    if not decoded:  # the callers refuse it as empty, as the slow path does
        assert text == ""
        return
    assert decode_document(text, max_document=1000)[1] == decoded


@settings(max_examples=200, deadline=None)
@given(DATA)
def test_the_usual_spelling_takes_the_fast_path(data: bytes) -> None:
    assert decode_plain(msgspec.Raw(msgspec.json.encode(base64.b64encode(data).decode()))) == data


@pytest.mark.parametrize(
    "spelling",
    ['"QUJD\\/w=="', '"QUJD"x', "12", '"QUJD\n"', '"QUJ"', '"QU=D"', '"data:;base64,QUJD"'],
)
def test_every_other_spelling_is_left_to_the_slow_path(spelling: str) -> None:
    assert decode_plain(msgspec.Raw(spelling.encode())) is None
