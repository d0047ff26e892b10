"""Properties of sniffing: the type comes from the leading bytes alone, and never raises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ocrq.shared.sniff import SUPPORTED, sniff_media_type

MAGIC = {
    b"%PDF-": "application/pdf",
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"II*\x00": "image/tiff",
    b"MM\x00*": "image/tiff",
}


@given(st.binary(max_size=2048))
def test_any_bytes_sniff_to_a_supported_type_or_none(head: bytes) -> None:
    assert sniff_media_type(head) in SUPPORTED | {None}


@given(st.sampled_from(sorted(MAGIC)), st.binary(max_size=512))
def test_the_magic_bytes_decide_whatever_follows(magic: bytes, rest: bytes) -> None:
    assert sniff_media_type(magic + rest) == MAGIC[magic]


@given(st.binary(min_size=30, max_size=512))
def test_webp_and_bmp_need_their_whole_header(rest: bytes) -> None:
    assert sniff_media_type(b"RIFF" + rest[:4] + b"WEBP" + rest[8:]) == "image/webp"
    assert sniff_media_type(b"BM" + rest) == "image/bmp"
