"""Base64 documents: what is accepted, what is refused."""

from __future__ import annotations

import base64

import pytest

from ocrq.producer.jobs.decoding import SLICE, decode_document
from ocrq.shared.errors import ErrorCode, OcrqError

DATA = bytes(range(256)) * 41  # crosses every byte value, odd length
LIMIT = 10 * 1024 * 1024


def decode(text: str, limit: int = LIMIT) -> bytes:
    return decode_document(text, limit)[1]


def test_standard_urlsafe_unpadded_and_wrapped_text_all_decode() -> None:
    std = base64.b64encode(DATA).decode()
    safe = base64.urlsafe_b64encode(DATA).decode().rstrip("=")
    wrapped = "\r\n".join(std[i : i + 76] for i in range(0, len(std), 76))
    for text in (std, safe, wrapped, f"  {std}\n"):
        assert decode(text) == DATA


def test_a_data_uri_prefix_is_stripped_and_its_type_reported() -> None:
    declared, data = decode_document(" data:image/png;name=a.png;base64,AAEC", LIMIT)
    assert declared == "image/png" and data == b"\x00\x01\x02"


@pytest.mark.parametrize("text", ["AAA*", "A", "AA=A", "QUJD\x00", "QUJDé", "QQ==QUJD"])
def test_bad_base64_is_invalid_base64(text: str) -> None:
    with pytest.raises(OcrqError) as err:
        decode(text)
    assert err.value.code is ErrorCode.INVALID_BASE64


def test_nothing_to_decode_is_invalid_request() -> None:
    with pytest.raises(OcrqError) as err:
        decode("data:application/pdf;base64,")
    assert err.value.code is ErrorCode.INVALID_REQUEST


def test_decoding_across_slice_boundaries_is_exact() -> None:
    big = bytes(range(256)) * 20_000  # 5 MB: several slices
    text = base64.b64encode(big).decode()
    assert decode(text) == big
    # whitespace that shifts every slice off the 4-character grid
    assert decode(" " + "\n".join(text[i : i + 999] for i in range(0, len(text), 999))) == big


def test_padding_split_across_a_slice_boundary_decodes() -> None:
    data = b"x" * (SLICE // 4 * 3 - 1)  # base64 ends with one '=' exactly at the slice end
    text = base64.b64encode(data).decode() + "="  # a stray extra pad lands in the next slice
    assert decode(text) == data


def test_a_document_over_the_limit_stops_decoding_with_413() -> None:
    with pytest.raises(OcrqError) as err:
        decode(base64.b64encode(b"\0" * 5000).decode(), limit=4999)
    assert err.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert decode(base64.b64encode(b"\0" * 5000).decode(), limit=5000) == b"\0" * 5000
