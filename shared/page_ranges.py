"""The ``pages`` option: "1-3,7" → the 0-based indices of the pages to read."""

from __future__ import annotations

from ocrq.shared.errors import ErrorCode, OcrqError


def parse_ranges(spec: str) -> list[tuple[int, int]]:
    """The (first, last) 1-based inclusive ranges of a spec; ValueError when malformed."""
    ranges = []
    for part in spec.split(","):
        first, sep, last = part.strip().partition("-")
        low = int(first)
        high = int(last) if sep else low
        if low < 1 or high < low:
            raise ValueError(f"{part.strip()!r} is not a page range (pages count from 1)")
        ranges.append((low, high))
    return ranges


def check_ranges(spec: str) -> None:
    """Raise OcrqError(INVALID_OPTIONS) when the spec cannot name pages."""
    try:
        parse_ranges(spec)
    except ValueError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"options.pages: {e}") from e


def selected_pages(spec: str | None, total: int) -> list[int]:
    """The 0-based indices, sorted and unique, of the pages ``spec`` names among ``total``.

    Ranges past the end are cut at the last page; a spec naming no page of the document is
    an error (the job would read nothing).
    """
    if spec is None:
        return list(range(total))
    chosen = {i - 1 for low, high in parse_ranges(spec) for i in range(low, min(high, total) + 1)}
    if not chosen:
        message = f"options.pages {spec!r} names no page of this {total}-page document"
        raise OcrqError(ErrorCode.INVALID_REQUEST, message)
    return sorted(chosen)
