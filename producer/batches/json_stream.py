"""Cut a streamed JSON batch body into its documents without holding the whole body.

A batch is ``{"documents": [ {...}, {...} ]}`` (or the bare array). The scanner follows
strings, escapes and nesting, and hands back each element of the documents array as soon
as its closing brace arrives; only the element being read is kept. It works in bulk: inside
a string it jumps from quote to quote with ``bytes.find`` (the base64 of a document is
crossed in one memchr, not byte by byte), outside one a compiled pattern finds the next
bracket, colon or quote. The element itself is decoded (and validated) by msgspec.

Outside the documents array nothing is kept but the key last read, and only up to the
length of ``documents``: a string there longer than MAX_NAME_BYTES is refused (400) as
soon as it grows past it, so a huge key or value costs no memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ocrq.shared.errors import ErrorCode, OcrqError

MAX_NAME_BYTES = 64 * 1024  # a key or a value outside `documents`, or a document's filename
_KEY = b"documents"
_STRUCTURE = re.compile(rb'["\[\]{}:]')
_ARRAY_ITEM = re.compile(rb"[^ \t\r\n,]")  # between elements: only blanks and commas


def name_too_long(what: str) -> OcrqError:
    """The 400 of a name or value over MAX_NAME_BYTES."""
    return OcrqError(
        ErrorCode.INVALID_REQUEST,
        f"{what}: longer than {MAX_NAME_BYTES // 1024} KiB ({MAX_NAME_BYTES} bytes)",
    )


class DocumentArrayScanner:
    """Feed bytes with ``feed``; it yields each document element's raw JSON as it completes."""

    def __init__(self, max_element: int) -> None:
        self.max_element = max_element
        self.depth = 0
        self.array_depth: int | None = None  # nesting depth of the documents array, once in it
        self.in_string = False
        self.backslashes = 0  # backslashes that ended the string's part in earlier chunks
        self.string_bytes = 0  # length so far of the string being read outside an element
        self.key = b""  # the string last read at depth 1, cut at len(b"documents") + 1
        self.last_string = bytearray()
        self.element: bytearray | None = None
        self.finished = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The elements that these bytes complete."""
        pos, end = 0, len(data)
        start = 0  # where the open element's bytes begin in this chunk
        while pos < end:
            if self.in_string:
                pos = self._cross_string(data, pos)
                continue
            item = self.array_depth is not None and self.depth == self.array_depth
            found = (_ARRAY_ITEM if item and self.element is None else _STRUCTURE).search(data, pos)
            if found is None:
                break
            pos = found.end()
            opened = self.element is None
            done = self._structure_byte(data[pos - 1])
            if opened and self.element is not None:
                start = pos  # the element began with this brace (already in self.element)
            if done:
                yield self._complete(data[start:pos])
        if self.element is not None:
            self._grow(data[start:])

    def close(self) -> None:
        """The body ended: it must have held a whole documents array."""
        if not self.finished:
            raise OcrqError(
                ErrorCode.INVALID_REQUEST,
                'body: expected {"documents": [{"document": "<base64>", "filename": ...}, ...]}',
            )

    def _grow(self, piece: bytes) -> None:
        assert self.element is not None
        self.element += piece
        if len(self.element) > self.max_element:
            raise OcrqError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"a document of the batch exceeds {self.max_element} bytes of JSON",
            )

    def _complete(self, tail: bytes) -> bytes:
        self._grow(tail)
        assert self.element is not None
        element, self.element = bytes(self.element), None
        return element

    def _cross_string(self, data: bytes, pos: int) -> int:
        """Skip through a string to its closing quote (or the chunk's end); the next position.

        Only quotes are looked for (memchr speed): a quote ends the string when an even
        number of backslashes precede it. A run of them is counted back no further than
        the previous quote, or into earlier chunks through ``self.backslashes``.
        """
        after = pos  # just past the last quote seen (a run of backslashes cannot cross it)
        quote = data.find(b'"', pos)
        while quote != -1 and self._backslashes(data, pos, after, quote) % 2:
            after = quote + 1
            quote = data.find(b'"', after)
        stop = len(data) if quote == -1 else quote
        self._string_piece(data, pos, stop)
        if quote == -1:
            self.backslashes = self._backslashes(data, pos, after, stop)
            return stop
        self.in_string = False
        return quote + 1

    def _backslashes(self, data: bytes, pos: int, after: int, stop: int) -> int:
        """The run of backslashes that ends at ``stop`` (none before ``after``)."""
        carried = self.backslashes if after == pos else 0  # the run may go on from before
        if stop == after:
            return carried
        if data[stop - 1] != 0x5C:
            return 0
        piece = data[after:stop]
        run = len(piece) - len(piece.rstrip(b"\\"))
        return run + carried if run == len(piece) else run

    def _string_piece(self, data: bytes, begin: int, stop: int) -> None:
        if self.element is not None or begin >= stop:
            return
        self.string_bytes += stop - begin
        if self.string_bytes > MAX_NAME_BYTES:
            raise name_too_long("body: a key or value outside `documents`")
        if self.depth == 1 and self.array_depth is None and len(self.last_string) <= len(_KEY):
            self.last_string += data[
                begin : min(stop, begin + len(_KEY) + 1 - len(self.last_string))
            ]

    def _structure_byte(self, byte: int) -> bool:
        """Act on one structural byte; True when it closed a document element."""
        item = self.array_depth is not None and self.depth == self.array_depth
        if item and byte not in b"{]":
            raise OcrqError(ErrorCode.INVALID_REQUEST, "documents: each item is an object")
        if byte == 0x22:
            self.in_string, self.last_string, self.string_bytes = True, bytearray(), 0
            self.backslashes = 0
        elif byte == 0x3A and self.depth == 1:  # ':' after a key of the top object
            self.key = bytes(self.last_string)
        elif byte in b"[{":
            self._open(byte)
        elif byte in b"]}":
            return self._close()
        return False

    def _open(self, byte: int) -> None:
        self.depth += 1
        top_array = self.depth == 1 and byte == 0x5B
        keyed = self.depth == 2 and byte == 0x5B and self.key == _KEY
        if self.array_depth is None and not self.finished and (top_array or keyed):
            self.array_depth = self.depth
        elif self.array_depth is not None and self.depth == self.array_depth + 1:
            if byte != 0x7B:
                raise OcrqError(ErrorCode.INVALID_REQUEST, "documents: each item is an object")
            if self.element is None:
                self.element = bytearray(b"{")

    def _close(self) -> bool:
        self.depth -= 1
        if self.depth < 0:
            raise OcrqError(ErrorCode.INVALID_REQUEST, "body: unbalanced JSON")
        if self.array_depth is not None and self.depth == self.array_depth:
            return self.element is not None
        if self.array_depth is not None and self.depth == self.array_depth - 1:
            self.finished = True
            self.array_depth = None  # what follows the array is outside `documents` again
        return False
