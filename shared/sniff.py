"""Magic-byte sniffing: the document type comes from its bytes, not its name."""

from __future__ import annotations

SUPPORTED: frozenset[str] = frozenset(
    {"application/pdf", "image/png", "image/jpeg", "image/webp", "image/tiff", "image/bmp"}
)


def sniff_media_type(head: bytes) -> str | None:
    """Return the media type the leading bytes announce, or None when unsupported."""
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    if head[:2] == b"BM" and len(head) >= 26:
        return "image/bmp"
    if b"%PDF-" in head[:1024]:
        # Some producers prepend junk; PDF readers accept the header within the first 1 KiB.
        # Checked last: an image's own magic at byte 0 wins over a PDF header inside it.
        return "application/pdf"
    return None
