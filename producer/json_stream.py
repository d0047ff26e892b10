"""Cut a streamed JSON batch body into its documents without holding the whole body.

A batch is ``{"documents": [ {...}, {...} ]}`` (or the bare array). The scanner follows
strings, escapes and nesting byte by byte and hands back each element of the documents
array as soon as its closing brace arrives; only the element being read is kept. The
element itself is decoded (and validated) by msgspec.
"""

from __future__ import annotations

from collections.abc import Iterator

from ocrq.shared.errors import ErrorCode, OcrqError

_OPEN = frozenset(b"[{")
_CLOSE = frozenset(b"]}")
_SPACE = frozenset(b" \t\r\n")


class DocumentArrayScanner:
    """Feed bytes with ``feed``; it yields each document element's raw JSON as it completes."""

    def __init__(self, max_element: int) -> None:
        self.max_element = max_element
        self.depth = 0
        self.array_depth: int | None = None  # nesting depth of the documents array, once in it
        self.in_string = False
        self.escaped = False
        self.key = bytearray()  # the string last read at depth 1 (a key of the top object)
        self.last_string = bytearray()
        self.element: bytearray | None = None
        self.finished = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The elements that these bytes complete."""
        for byte in data:
            if self.element is not None:
                self.element.append(byte)
                if len(self.element) > self.max_element:
                    raise OcrqError(
                        ErrorCode.PAYLOAD_TOO_LARGE,
                        f"a document of the batch exceeds {self.max_element} bytes of JSON",
                    )
            if self.in_string:
                self._string_byte(byte)
            elif (done := self._structure_byte(byte)) is not None:
                yield done

    def close(self) -> None:
        """The body ended: it must have held a whole documents array."""
        if not self.finished:
            raise OcrqError(
                ErrorCode.INVALID_REQUEST,
                'body: expected {"documents": [{"document": "<base64>", "filename": ...}, ...]}',
            )

    def _string_byte(self, byte: int) -> None:
        if self.escaped:
            self.escaped = False
        elif byte == 0x5C:  # backslash
            self.escaped = True
        elif byte == 0x22:  # closing quote
            self.in_string = False
            return
        if self.depth == 1 and self.array_depth is None:
            self.last_string.append(byte)

    def _structure_byte(self, byte: int) -> bytes | None:
        if byte == 0x22:
            self.in_string, self.last_string = True, bytearray()
            return None
        if byte == 0x3A and self.depth == 1:  # ':' after a key of the top object
            self.key = self.last_string
            return None
        if byte in _OPEN:
            self._open(byte)
            return None
        if byte in _CLOSE:
            return self._close()
        if byte not in _SPACE and byte != 0x2C and self.array_depth is not None:
            if self.depth == self.array_depth and self.element is None:
                raise OcrqError(ErrorCode.INVALID_REQUEST, "documents: each item is an object")
        return None

    def _open(self, byte: int) -> None:
        self.depth += 1
        top_array = self.depth == 1 and byte == 0x5B
        keyed = self.depth == 2 and byte == 0x5B and bytes(self.key) == b"documents"
        if self.array_depth is None and (top_array or keyed):
            self.array_depth = self.depth
        elif self.array_depth is not None and self.depth == self.array_depth + 1:
            if byte != 0x7B:
                raise OcrqError(ErrorCode.INVALID_REQUEST, "documents: each item is an object")
            self.element = bytearray(b"{")

    def _close(self) -> bytes | None:
        self.depth -= 1
        if self.depth < 0:
            raise OcrqError(ErrorCode.INVALID_REQUEST, "body: unbalanced JSON")
        if self.array_depth is not None and self.depth == self.array_depth and self.element:
            element, self.element = bytes(self.element), None
            return element
        if self.array_depth is not None and self.depth == self.array_depth - 1:
            self.finished = True
        return None
