"""Base64 documents: data-URI prefixes, whitespace and the URL-safe alphabet, decoded in slices."""

from __future__ import annotations

import binascii
import re
from typing import Protocol, TypeVar

import msgspec
import pybase64

from ocrq.shared.errors import ErrorCode, OcrqError

_DATA_URI = re.compile(r"^\s*data:([\w.+-]+/[\w.+-]+)?((?:;[\w-]+=[^;,]*)*);base64,", re.I)
_WHITESPACE = b" \t\r\n\f\v"
_URLSAFE = bytes.maketrans(b"-_", b"+/")
# 1 MiB of text per step: each step (encode, translate, a2b) holds the GIL for a few ms at
# most, so a thread decoding 10 MB lets the event loop run between steps.
SLICE = 1 << 20


def too_large(limit: int) -> OcrqError:
    """The 413 for a document over the limit."""
    return OcrqError(ErrorCode.PAYLOAD_TOO_LARGE, f"document exceeds {limit} bytes")


def decode_plain(raw: msgspec.Raw) -> bytes | None:
    """A JSON string of standard padded base64 without escapes, decoded; None otherwise.

    pybase64's SIMD decoder reads 13 MB in under a millisecond (msgspec's own decoder holds
    the GIL about 11 ms for it, stalling the event loop); every other spelling, and every
    error, is left to decode_document, which says what is wrong.
    """
    text = memoryview(raw)
    if len(text) < 2 or text[0] != 0x22 or text[-1] != 0x22:  # not a string
        return None
    try:
        return pybase64.b64decode(text[1:-1], validate=True)
    except (binascii.Error, ValueError):
        return None


class PlainBody(Protocol):
    """An inbound body struct whose document is left as JSON text (msgspec.Raw)."""

    document: msgspec.Raw


P = TypeVar("P", bound=PlainBody)


def plain_document(body: bytes, kind: type[P]) -> tuple[P, bytes] | None:
    """The body as ``kind`` and its document's bytes, when both take the fast path
    (decode_plain); None for any other spelling or any error, which the slow path explains."""
    try:
        plain = msgspec.json.decode(body, type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    data = decode_plain(plain.document)
    return None if data is None else (plain, data)


def split_data_uri(text: str) -> tuple[str | None, int]:
    """The declared type of a ``data:<type>;base64,`` prefix and where the base64 starts."""
    match = _DATA_URI.match(text[:512])
    if not match:
        return None, 0
    declared = match.group(1).lower() if match.group(1) else None
    return declared, match.end()


def clean_slice(text: str, start: int) -> bytes:
    """One slice as strict standard base64 bytes: whitespace dropped, URL-safe mapped."""
    try:
        raw = text[start : start + SLICE].encode("ascii")
    except UnicodeEncodeError as e:
        where = start + e.start
        raise OcrqError(
            ErrorCode.INVALID_BASE64, f"document: not base64 at character {where}"
        ) from e
    return raw.translate(_URLSAFE, _WHITESPACE)


def decode_quartets(clean: bytes, where: int) -> bytes:
    """Strictly decode whole 4-character groups; invalid_base64 names where it failed."""
    try:
        return binascii.a2b_base64(clean, strict_mode=True)
    except binascii.Error as e:
        raise OcrqError(
            ErrorCode.INVALID_BASE64, f"document: not valid base64 near character {where} ({e})"
        ) from e


def decode_document(text: str, max_document: int) -> tuple[str | None, bytes]:
    """(declared type, bytes) of a base64 or data-URI document; 413 as soon as it passes max."""
    declared, offset = split_data_uri(text)
    out, carry = bytearray(), b""
    for start in range(offset, len(text), SLICE):
        piece = carry + clean_slice(text, start)
        cut = len(piece) - len(piece) % 4
        out += decode_quartets(piece[:cut], start)
        carry = piece[cut:]
        if len(out) > max_document:
            raise too_large(max_document)
    tail = carry.rstrip(b"=")
    if len(tail) == 1:
        raise OcrqError(ErrorCode.INVALID_BASE64, "document: base64 text has a dangling character")
    if tail:
        out += decode_quartets(tail + b"=" * (-len(tail) % 4), len(text))
    if not out:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "document: empty")
    if len(out) > max_document:
        raise too_large(max_document)
    return declared, bytes(out)
