"""Base64 documents: data-URI prefixes, whitespace and the URL-safe alphabet, decoded in slices."""

from __future__ import annotations

import binascii
import re

from shared.errors import ErrorCode, OcrqError

_DATA_URI = re.compile(rb"^data:([\w.+-]+/[\w.+-]+)?((?:;[\w-]+=[^;,]*)*);base64,", re.I)
_WHITESPACE = b" \t\r\n\f\v"
_URLSAFE = bytes.maketrans(b"-_", b"+/")
# 1 MiB of base64 per C call: each slice holds the GIL for about a millisecond, so a thread
# decoding 10 MB lets the event loop run between slices.
_SLICE = 1 << 20


def split_data_uri(text: bytes) -> tuple[str | None, bytes]:
    """Strip a ``data:<type>;base64,`` prefix; return (declared type, base64 text)."""
    head = text[:256].lstrip()
    match = _DATA_URI.match(head)
    if not match:
        return None, text.strip()
    offset = len(text) - len(text.lstrip()) + match.end()
    declared = match.group(1).decode().lower() if match.group(1) else None
    return declared, text[offset:]


def decoded_size(b64: bytes) -> int:
    """Bytes a clean base64 text decodes to (padding or not)."""
    stripped = b64.rstrip(b"=")
    return len(stripped) * 3 // 4


def clean_base64(b64: bytes) -> bytes:
    """Drop whitespace, map the URL-safe alphabet, restore missing padding."""
    clean = b64.translate(_URLSAFE, _WHITESPACE).rstrip(b"=")
    if len(clean) % 4 == 1:
        raise OcrqError(ErrorCode.INVALID_BASE64, "document: base64 text has a dangling character")
    return clean + b"=" * (-len(clean) % 4)


def decode_base64(clean: bytes) -> bytes:
    """Decode strictly, slice by slice; raise invalid_base64 naming the offset of the problem."""
    out = bytearray()
    for start in range(0, len(clean), _SLICE):
        piece = clean[start : start + _SLICE]
        try:
            out += binascii.a2b_base64(piece, strict_mode=True)
        except binascii.Error as e:
            raise OcrqError(
                ErrorCode.INVALID_BASE64, f"document: not valid base64 near byte {start} ({e})"
            ) from e
    if not out:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "document: empty")
    return bytes(out)
