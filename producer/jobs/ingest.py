"""Read a submission in any of the three formats, never past the size limit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

import msgspec
from multipart import MultipartError, MultipartSegment, PushMultipartParser

from ocrq.producer.jobs.decoding import decode_document, plain_document, too_large
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Inbound, JobOptions, Source
from ocrq.shared.sniff import SUPPORTED, sniff_media_type

# Room for JSON keys, options, a data-URI prefix and line breaks around the base64 text.
_JSON_SLACK = 64 * 1024
_FORM_SLACK = 64 * 1024
_OPTION_NAMES = frozenset(f.name for f in msgspec.structs.fields(JobOptions))
MAX_FILENAME = 255  # characters, in every format (JSON bodies: SubmitWire, SubmitPlain)


class Submission(msgspec.Struct, kw_only=True):
    """A decoded, sniffed document plus its options."""

    data: bytes
    media_type: str
    filename: str | None
    options: JobOptions


class SourceSubmission(msgspec.Struct, kw_only=True):
    """A document by reference (``{"source": {...}}``) plus its options: not read yet."""

    source: Source
    filename: str | None
    options: JobOptions


class SourceWire(Inbound):
    """SourceBody as read: options kept as given, to merge over the query's (see Query)."""

    source: Source
    filename: Annotated[str, msgspec.Meta(max_length=MAX_FILENAME)] | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class _TopLevel(msgspec.Struct):
    """Which of the two top-level keys a JSON body has (values left unparsed; empty: absent)."""

    source: msgspec.Raw = msgspec.Raw()
    document: msgspec.Raw = msgspec.Raw()


def source_submission(body: bytes, query: Query) -> SourceSubmission | None:
    """The body as a submission by reference, when it is one: a top-level "source" and no
    "document". Only bodies up to _JSON_SLACK are looked at: a bigger one carries a
    document, and its base64 is decoded once, by the usual path."""
    if len(body) > _JSON_SLACK or b'"source"' not in body:
        return None
    try:
        top = msgspec.json.decode(body, type=_TopLevel)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None  # not an object: the usual path says what is wrong
    if not top.source or top.document:
        return None
    try:
        wire = msgspec.json.decode(body, type=SourceWire)
    except msgspec.ValidationError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"body: {e}") from e
    options = parse_options({**query.options, **wire.options})
    return SourceSubmission(
        source=wire.source, filename=wire.filename or query.filename, options=options
    )


def json_body_limit(max_document: int) -> int:
    """Largest JSON body that may still hold a document of max_document bytes in base64."""
    b64 = -(-max_document // 3) * 4
    # A CRLF every 76 characters, which JSON writes escaped: "\\r\\n" is 4 bytes.
    return b64 + 4 * (b64 // 76 + 1) + _JSON_SLACK


async def within(chunks: AsyncIterator[bytes], seconds: float) -> AsyncIterator[bytes]:
    """The body's chunks, as long as the whole body arrives within ``seconds`` (else 408)."""
    deadline = asyncio.get_running_loop().time() + seconds
    iterator = aiter(chunks)
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                chunk = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError as e:
            raise OcrqError(
                ErrorCode.REQUEST_TIMEOUT,
                f"the request body did not arrive within {seconds:g} s (OCRQ_BODY_TIMEOUT_S)",
            ) from e
        yield chunk


def body_ceiling(content_type: str, max_document: int) -> int:
    """Largest request body that may still carry a document of max_document bytes."""
    if content_type == "application/json":
        return json_body_limit(max_document)
    if content_type == "multipart/form-data":
        return max_document + _FORM_SLACK
    return max_document


async def read_bounded(chunks: AsyncIterator[bytes], limit: int, max_document: int) -> bytes:
    """Collect the body, stopping with 413 as soon as it passes limit.

    One copy at most: the chunks are joined once at the end (a bytearray grown chunk by
    chunk, then turned into bytes, copied a 10 MB body two or three times over)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large(max_document)
        parts.append(chunk)
    return b"".join(parts)  # one chunk: join hands back the chunk itself, uncopied


def json_option(name: str, text: str) -> Any:
    """An option given as JSON text; a 400 naming it when it is not JSON."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{name}: not JSON ({e})") from e


def parse_options(raw: Mapping[str, Any]) -> JobOptions:
    """Build JobOptions from query/form strings; a bad value is a 400 naming the field."""
    unknown = set(raw) - _OPTION_NAMES
    if unknown:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"unknown option(s): {', '.join(sorted(unknown))}"
        )
    values = dict(raw)
    redact = values.get("redact")
    if isinstance(redact, str):  # a form field or query: "email,phone", or a JSON list
        values["redact"] = (
            json_option("redact", redact)
            if redact.lstrip().startswith("[")
            else [kind.strip() for kind in redact.split(",") if kind.strip()]
        )
    if isinstance(values.get("extract"), str):  # a form field or query: JSON text
        values["extract"] = json_option("extract", values["extract"])
    try:
        return msgspec.convert(values, JobOptions, strict=False)
    except msgspec.ValidationError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"options: {e}") from e


def sniffed(data: bytes, declared: str | None, filename: str | None) -> str:
    """The media type from the bytes; declared type and extension are only hints."""
    media_type = sniff_media_type(data[:2048])
    if media_type is None or media_type not in SUPPORTED:
        hint = declared or (filename.rsplit(".", 1)[-1] if filename and "." in filename else None)
        raise OcrqError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            "document is not a PDF, PNG, JPEG, WebP, TIFF or BMP"
            + (f" (declared {hint})" if hint else ""),
        )
    return media_type


class SubmitWire(Inbound):
    """SubmitBody as read: options kept as given, to merge over the query's (see Query)."""

    document: Annotated[str, msgspec.Meta(min_length=1)]
    filename: Annotated[str, msgspec.Meta(max_length=MAX_FILENAME)] | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class Query(msgspec.Struct):
    """Options and filename from the query string: every format takes them; what the body
    itself sets (JSON options, form fields) wins field by field."""

    filename: str | None
    options: dict[str, str]

    @classmethod
    def of(cls, raw: Mapping[str, str]) -> Query:
        """Split a query string; an over-long filename is a 400 whatever the format."""
        options = dict(raw)
        filename = options.pop("filename", None)
        if filename is not None and len(filename) > MAX_FILENAME:
            raise OcrqError(
                ErrorCode.INVALID_REQUEST, f"filename: at most {MAX_FILENAME} characters"
            )
        parse_options(options)  # invalid query options are refused even when the body wins
        return cls(filename, options)


class SubmitPlain(Inbound):
    """SubmitWire with the document left as JSON text, for plain_document (the usual spelling)."""

    document: msgspec.Raw
    filename: Annotated[str, msgspec.Meta(max_length=MAX_FILENAME)] | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)


def decode_json_submission(body: bytes, max_document: int, query: Query) -> Submission:
    """Decode a JSON body (runs in a thread: the base64 can be 13 MB)."""
    fast = plain_document(body, SubmitPlain)  # standard padded base64, decoded by SIMD code
    if fast is None:
        return decode_json_slowly(body, max_document, query)  # data URIs, line breaks, …
    plain, data = fast
    if len(data) > max_document:
        raise too_large(max_document)
    if not data:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "document: empty")
    options = parse_options({**query.options, **plain.options})
    filename = plain.filename or query.filename
    media_type = sniffed(data, None, filename)
    return Submission(data=data, media_type=media_type, filename=filename, options=options)


def decode_json_slowly(body: bytes, max_document: int, query: Query) -> Submission:
    """Every other accepted spelling of the document, decoded slice by slice."""
    try:
        submit = msgspec.json.decode(body, type=SubmitWire)
    except msgspec.ValidationError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"body: {e}") from e
    except msgspec.DecodeError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"body is not valid JSON: {e}") from e
    options = parse_options({**query.options, **submit.options})
    filename = submit.filename or query.filename
    declared, data = decode_document(submit.document, max_document)
    media_type = sniffed(data, declared, filename)
    return Submission(data=data, media_type=media_type, filename=filename, options=options)


async def read_json(
    chunks: AsyncIterator[bytes],
    max_document: int,
    decode_gate: asyncio.Semaphore,
    query: Query,
) -> Submission | SourceSubmission:
    """Format 1: JSON with a base64 or data-URI document, or a document by reference.

    Decoding runs in a thread, one at a time per process: several decoding threads would
    take turns on the GIL ahead of the event loop and stall every other request.
    """
    body = await read_bounded(chunks, body_ceiling("application/json", max_document), max_document)
    by_reference = source_submission(body, query)
    if by_reference is not None:
        return by_reference
    async with decode_gate:
        return await asyncio.to_thread(decode_json_submission, body, max_document, query)


async def read_raw(
    chunks: AsyncIterator[bytes], declared: str, query: Query, max_document: int
) -> Submission:
    """Format 3: the raw document as the body, options as query parameters."""
    filename = query.filename
    options = parse_options(query.options)
    data = await read_bounded(chunks, body_ceiling("raw", max_document), max_document)
    if not data:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "body: empty document")
    media_type = sniffed(data, declared, filename)
    return Submission(data=data, media_type=media_type, filename=filename, options=options)


class FormParts:
    """A multipart body's parts as they stream in: the ``file`` part's bytes, option fields."""

    def __init__(self, max_document: int) -> None:
        self.max_document = max_document
        self.fields: dict[str, str] = {}
        # The file part's pieces as the parser hands them over, joined once at the end.
        self.pieces: list[bytes] = []
        self.size = 0
        self.filename: str | None = None
        self.declared: str | None = None
        self.file_seen = False
        self._part: MultipartSegment | None = None
        self._value = bytearray()

    def feed(self, event: MultipartSegment | bytes | None) -> None:
        """One parser event: a part begins, some of its bytes, or its end (None)."""
        if isinstance(event, MultipartSegment):
            self._begin(event)
        elif event and self._part is not None:
            if self._part.name == "file":
                self.size += len(event)
                if self.size > self.max_document:
                    raise too_large(self.max_document)
                self.pieces.append(event)
            else:
                self._value += event
        elif event is None and self._part is not None:
            if self._part.name == "file":
                self.filename, self.declared = self._part.filename, self._part.content_type
            else:
                self.fields[self._part.name] = self._value.decode("utf-8", "replace")
            self._part = None

    def _begin(self, part: MultipartSegment) -> None:
        if part.name in self.fields or (part.name == "file" and self.file_seen):
            raise OcrqError(
                ErrorCode.INVALID_REQUEST, f"{part.name}: given twice (one document per request)"
            )
        self.file_seen = self.file_seen or part.name == "file"
        self._part, self._value = part, bytearray()


async def read_multipart(
    chunks: AsyncIterator[bytes], boundary: str, max_document: int, query: Query
) -> Submission:
    """Format 2: multipart/form-data with one ``file`` part and option fields."""
    parts = FormParts(max_document)
    total_limit = body_ceiling("multipart/form-data", max_document)
    received = 0
    try:
        with PushMultipartParser(boundary.encode(), max_segment_count=32) as parser:
            async for chunk in chunks:
                received += len(chunk)
                if received > total_limit:
                    raise too_large(max_document)
                for event in parser.parse(chunk):
                    parts.feed(event)
            parser.close()
    except MultipartError as e:  # malformed, or over the parser's part and header limits
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"body: invalid multipart/form-data ({e})"
        ) from e
    if not parts.size:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, "file: a multipart submission needs a non-empty file part"
        )
    name = parts.fields.pop("filename", None) or query.filename or parts.filename
    if name is not None and len(name) > MAX_FILENAME:  # the field, or the file part's own
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"filename: at most {MAX_FILENAME} characters")
    options = parse_options({**query.options, **parts.fields})
    data = b"".join(parts.pieces)
    media_type = sniffed(data, parts.declared, name)
    return Submission(data=data, media_type=media_type, filename=name, options=options)
