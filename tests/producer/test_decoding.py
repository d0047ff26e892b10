"""Base64 documents: what is accepted, what is refused."""

from __future__ import annotations

import base64

import pytest

from producer.decoding import clean_base64, decode_base64, decoded_size, split_data_uri
from shared.errors import ErrorCode, OcrqError

DATA = bytes(range(256)) * 41  # crosses every byte value, odd length


def decode(text: str) -> bytes:
    _, b64 = split_data_uri(text.encode())
    return decode_base64(clean_base64(b64))


def test_standard_urlsafe_unpadded_and_wrapped_text_all_decode() -> None:
    std = base64.b64encode(DATA).decode()
    safe = base64.urlsafe_b64encode(DATA).decode().rstrip("=")
    wrapped = "\r\n".join(std[i : i + 76] for i in range(0, len(std), 76))
    for text in (std, safe, wrapped, f"  {std}\n"):
        assert decode(text) == DATA


def test_a_data_uri_prefix_is_stripped_and_its_type_reported() -> None:
    declared, b64 = split_data_uri(b"data:image/png;name=a.png;base64,AAAA")
    assert declared == "image/png" and b64 == b"AAAA"


def test_decoded_size_is_known_before_decoding() -> None:
    assert decoded_size(clean_base64(base64.b64encode(DATA))) == len(DATA)


@pytest.mark.parametrize("text", ["AAA*", "A", "AA=A", "QUJD\x00"])
def test_bad_base64_is_invalid_base64(text: str) -> None:
    with pytest.raises(OcrqError) as err:
        decode(text)
    assert err.value.code is ErrorCode.INVALID_BASE64


def test_decoding_across_slice_boundaries_is_exact() -> None:
    big = bytes(range(256)) * 20_000  # 5 MB: several 1 MiB slices
    assert decode(base64.b64encode(big).decode()) == big
