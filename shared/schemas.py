"""msgspec schemas: job options, API bodies, the job view and the OCR result."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

import msgspec


class Base(msgspec.Struct, kw_only=True):
    """Base for worker-side and outbound messages.

    kw_only: fields are named at every call site. Defaults are written out (no
    omit_defaults): clients get every key of the schema, null or empty included. Unknown
    fields are tolerated here (rolling upgrades: an older worker reads a newer producer's
    message); inbound API bodies subclass ``Inbound`` instead.
    """


class Inbound(Base, forbid_unknown_fields=True):
    """Base for bodies clients send: an unknown field is a typo and is rejected by name."""


class Status(StrEnum):
    """Job lifecycle: queued → processing → done | failed | cancelled."""

    QUEUED = "queued"
    PROCESSING = "processing"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL: frozenset[Status] = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED})
ACTIVE: frozenset[Status] = frozenset(set(Status) - TERMINAL)

Lane = Literal["interactive", "batch"]
# "1-3,7": pages (1-based, inclusive ranges) to render, read and count; shared/page_ranges.py.
PageRanges = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^ *[0-9]{1,5}( *- *[0-9]{1,5})?( *, *[0-9]{1,5}( *- *[0-9]{1,5})?){0,63} *$",
        max_length=400,
        description='pages to read, e.g. "1-3,7" (1-based, inclusive); all when absent',
    ),
]
TextLayer = Literal["auto", "off"]
Languages = Annotated[str, msgspec.Meta(pattern=r"^[a-z_]{3,12}(\+[a-z_]{3,12}){0,7}$")]


RedactKind = Literal[
    "email", "phone", "iban", "credit_card", "national_id", "date_of_birth"
]  # fmt: skip


class RedactPattern(Inbound):
    """A custom kind of personal data: a regular expression, masked as ``[NAME]``."""

    pattern: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    name: Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,31}$")] = "redacted"


# Countries whose national ids and phone numbers without a country code are looked for.
Countries = Annotated[str, msgspec.Meta(pattern=r"^[a-z]{2}(,[a-z]{2}){0,15}$")]


class JobOptions(Inbound):
    """Per-job options; None means the worker's setting decides."""

    batch_size: Annotated[
        int, msgspec.Meta(ge=1, le=16, description="pages per engine request (a page group)")
    ] = 1
    dpi: Annotated[int, msgspec.Meta(ge=50, le=400)] | None = None
    max_pages: Annotated[int, msgspec.Meta(ge=1, le=5000)] | None = None
    lane: Lane = "interactive"
    profile: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    text_layer: TextLayer | None = None
    # Tesseract language codes joined by "+" (e.g. "eng+fra"); local engine only.
    languages: Languages | None = None
    # Where to POST a signed summary once the job (or, for a batch, every job) has ended.
    callback_url: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    pages: PageRanges | None = None
    # Page headers, footers and page numbers stay in the blocks; the body Markdown, HTML,
    # text and chunks leave them out unless this is true.
    keep_headers_footers: bool = False
    # False: no layout model on text layers and local-engine scans (plain text blocks, no
    # tables or figures), for speed: a born-digital page then takes milliseconds, not ~0.5 s.
    layout: bool = True
    # Keep a searchable PDF of the document (its pages with an invisible text layer):
    # GET /v1/jobs/{id}/result?format=pdf. Off by default: it stores about the document's
    # size again with the result.
    searchable_pdf: bool = False
    # With an object store: also write the result (<stem>.md, <stem>.json) under this key
    # prefix of the store, which must lie under one of the tenant's OCRQ_SOURCE_PREFIXES.
    output_prefix: Annotated[str, msgspec.Meta(max_length=512)] | None = None
    # A JSON Schema (an object at the top): the fields to read from the document, given in
    # Result.fields with the page and boxes each came from. shared/field_schema.py checks it.
    extract: dict[str, Any] | None = None
    # Personal data to mask in every output (shared/redaction.py): its text is replaced by
    # [EMAIL], [PHONE]…, its boxes burnt black in the PDF, and the original text not stored.
    redact: Annotated[list[RedactKind | RedactPattern], msgspec.Meta(max_length=26)] | None = None
    redact_countries: Countries | None = None  # default: OCRQ_REDACT_COUNTRIES


def keeps_pdf(options: JobOptions) -> bool:
    """Whether a job keeps a PDF (?format=pdf): searchable when asked, redacted always."""
    return options.searchable_pdf or bool(options.redact)


class DocumentRef(Base):
    """Where a job's document is when it is not inline in the job hash (Field.DOCUMENT)."""

    kind: Literal["blob", "url"]
    key: str = ""  # blob: its key in the object store (relative to OCRQ_BLOB_URL)
    url: str = ""  # url: the https:// address the worker fetches
    size: int = 0  # bytes; 0 when not known before the fetch (url)
    checksum: str = ""  # "sha256:<hex>" when known
    # True: the job owns the object and deletes it when it ends (a producer-written
    # document, a presigned upload); False: the tenant's own object (an s3:// source).
    owned: bool = True


class Source(Inbound):
    """A document by reference: exactly one of the three."""

    upload_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None  # POST /v1/uploads
    key: Annotated[str, msgspec.Meta(max_length=1024)] | None = None  # s3://bucket/prefix/…
    url: Annotated[str, msgspec.Meta(max_length=2000)] | None = None  # https://…


class SourceBody(Inbound):
    """JSON submission by reference: ``{"source": {...}, "filename": …, "options": {...}}``."""

    source: Source
    filename: Annotated[str, msgspec.Meta(max_length=255)] | None = None
    options: JobOptions = msgspec.field(default_factory=JobOptions)


class UploadRequest(Inbound):
    """POST /v1/uploads body (all optional): what the client is about to PUT."""

    size: Annotated[int, msgspec.Meta(ge=1)] | None = None  # over the limit: 413 at once
    filename: Annotated[str, msgspec.Meta(max_length=255)] | None = None
    content_type: Annotated[str, msgspec.Meta(max_length=200)] | None = None


class UploadTicket(Base):
    """POST /v1/uploads: PUT the file to ``url`` with ``headers``, then queue ``upload_id``."""

    upload_id: str
    url: str
    expires_at: str
    max_bytes: int
    method: str = "PUT"
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class Capabilities(Base):
    """GET /v1/capabilities: what this deployment accepts, for clients to choose a path."""

    version: str
    blob_store: bool  # an object store is configured
    uploads: bool  # POST /v1/uploads works (the store can presign, or the producer proxies)
    inline_max_bytes: int  # larger documents go through POST /v1/uploads when uploads is true
    max_document_bytes: int  # the most POST /v1/jobs carries itself
    max_source_bytes: int
    max_source_pages: int
    max_pages: int


class SubmitBody(Inbound):
    """JSON submission: a base64 (or data-URI) document plus options."""

    document: Annotated[str, msgspec.Meta(min_length=1)]
    filename: Annotated[str, msgspec.Meta(max_length=255)] | None = None
    options: JobOptions = msgspec.field(default_factory=JobOptions)


class ErrorBody(Base):
    """An error: a catalogue code and a message."""

    code: str
    message: str


class Accepted(Base):
    """202 body for a submission."""

    id: str
    status: str
    created_at: str


# The block vocabulary every engine maps into (docs/results.md): reading order is list order.
BLOCK_LABELS: tuple[str, ...] = (
    "title",
    "heading",
    "text",
    "list_item",
    "table",
    "figure",
    "caption",
    "formula",
    "page_header",
    "page_footer",
    "page_number",
)
# Page furniture: kept in the JSON, left out of the body unless keep_headers_footers.
FURNITURE: frozenset[str] = frozenset({"page_header", "page_footer", "page_number"})


class Cell(Base):
    """One table cell: its grid position (0-based), spans, text and box (0..1 of the page)."""

    row: int
    col: int
    row_span: int = 1
    col_span: int = 1
    text: str = ""
    bbox: list[float] = msgspec.field(default_factory=list)
    header: bool = False  # a header cell (<th>)


class Table(Base):
    """A table block's grid: its cells in row order and the same table as HTML."""

    rows: int
    cols: int
    cells: list[Cell] = msgspec.field(default_factory=list)
    html: str = ""


class Block(Base):
    """One block of a page: bbox normalised to 0..1 of the page, bbox_px in page pixels.

    ``label`` is one of BLOCK_LABELS; ``text`` is the block's text (a table's as Markdown,
    a figure's as its image link); ``level`` is a heading's level (1 for the title).
    """

    label: str
    text: str
    bbox: list[float] = msgspec.field(default_factory=list)
    bbox_px: list[int] = msgspec.field(default_factory=list)
    confidence: float | None = None
    level: int | None = None
    table: Table | None = None
    image: str | None = None  # a figure's file: GET /v1/jobs/{id}/images/{image}


class Redaction(Base):
    """One value masked on a page: its kind and where it was (0..1 of the page); never its text."""

    kind: str
    boxes: list[list[float]] = msgspec.field(default_factory=list)


class Page(Base):
    """One page; ``source`` says which path produced it."""

    number: int
    width: int
    height: int
    markdown: str | None = None
    blocks: list[Block] = msgspec.field(default_factory=list)
    source: Literal["engine", "text_layer"] = "engine"
    truncated: bool = False
    # Degrees (0, 90, 180, 270, counter-clockwise) the page image was turned to stand
    # upright before recognition; width, height and every bbox refer to the upright page.
    rotation: int = 0
    # Degrees (counter-clockwise) a page scanned askew was straightened before recognition;
    # its boxes still refer to the page as rendered (upright, not straightened).
    skew: float = 0.0
    # True when the engine read the page, or some of its lines, a second way (a receipt:
    # also as one block; weak lines: by a second recogniser) and kept the better reading.
    reread: bool = False
    lines_reread: int = 0  # lines whose second reading replaced the first (or found no text)
    confidence: float | None = None  # the engine's mean confidence, 0..1, where it has one
    scripts: list[str] = msgspec.field(default_factory=list)  # e.g. ["Latin"], where detected
    # Why this page's text may be wrong (low confidence, a script the engine cannot read);
    # the page's Markdown starts with the same note.
    warnings: list[str] = msgspec.field(default_factory=list)
    redactions: list[Redaction] = msgspec.field(default_factory=list)  # the redact option


class Segment(Base):
    """Text the engine returned for a page range (several pages per request)."""

    first_page: int
    last_page: int
    markdown: str
    truncated: bool = False


class EngineInfo(Base):
    """Which engine, model and profile produced the result."""

    name: str
    model: str
    profile: str


class Timings(Base):
    """Stage latencies in milliseconds."""

    queued_ms: int = 0
    raster_ms: int = 0
    infer_ms: int = 0
    total_ms: int = 0


class Usage(Base):
    """Engine usage, summed over requests."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


ExtractMethod = Literal["llm", "key_value"]


class FieldSource(Base):
    """Where one extracted value came from: its page and boxes, or ungrounded.

    ``path`` names the value in ``Fields.values`` (``total``, ``items/0/price``); ``boxes``
    are 0..1 of the page, one per line of words the text was read from. A value not found on
    any page is ``grounded: false``, with no page and no boxes (never a made-up place).
    """

    path: str
    value: Any
    text: str = ""  # the words on the page it was read from
    page: int | None = None
    boxes: list[list[float]] = msgspec.field(default_factory=list)
    confidence: float = 0.0  # 0..1
    grounded: bool = False


class Fields(Base):
    """What the ``extract`` option found: values that validate against the job's schema."""

    values: dict[str, Any] = msgspec.field(default_factory=dict)
    sources: list[FieldSource] = msgspec.field(default_factory=list)
    method: ExtractMethod = "key_value"
    model: str = ""  # the LLM that answered (method llm)
    # The job is done either way: the OCR result stays when the fields could not be read.
    error: ErrorBody | None = None


class Result(Base):
    """The OCR result of one job."""

    id: str
    status: str
    media_type: str
    page_count: int
    markdown: str
    pages: list[Page] = msgspec.field(default_factory=list)
    segments: list[Segment] = msgspec.field(default_factory=list)
    doubtful_pages: int = 0  # pages that carry a warning: read them before trusting them
    images: list[str] = msgspec.field(default_factory=list)  # figure files, as Block.image
    searchable_pdf: bool = False  # a searchable PDF is kept: ?format=pdf
    engine: EngineInfo | None = None
    timings: Timings = msgspec.field(default_factory=Timings)
    usage: Usage = msgspec.field(default_factory=Usage)
    fields: Fields | None = None  # with the extract option
    redacted: int = 0  # values masked by the redact option, over every page


class Progress(Base):
    """Pages done out of pages total (total is 0 until the worker knows it)."""

    pages_done: int = 0
    pages_total: int = 0


class JobView(Base):
    """What a poll returns: status, progress, timestamps, error, and the result when done."""

    id: str
    status: str
    filename: str | None
    media_type: str
    size: int
    lane: str
    options: JobOptions
    progress: Progress
    attempts: int
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    error: ErrorBody | None = None
    result: Result | None = None
    batch: str | None = None  # the batch it belongs to
    webhook: WebhookState | None = None  # its callback's delivery, when it has one


class JobSummary(Base):
    """One line of a tenant's job list: what a person scanning the list needs."""

    id: str
    status: str
    filename: str | None
    media_type: str
    lane: str
    progress: Progress
    created_at: str | None
    finished_at: str | None
    error: ErrorBody | None = None


class JobList(Base):
    """A page of the tenant's jobs, newest first; ``next_offset`` is None on the last page."""

    jobs: list[JobSummary]
    next_offset: int | None = None


def stored_options(raw: bytes) -> JobOptions:
    """Options as stored in a job hash; fields this version does not know are ignored.

    A newer producer may store an option an older worker lacks (a rolling deploy): the
    strict inbound check belongs to the API, not to reading back what was accepted.
    """
    data = msgspec.json.decode(raw)
    known = {f.name for f in msgspec.structs.fields(JobOptions)}
    return msgspec.convert({k: v for k, v in data.items() if k in known}, JobOptions)


class BatchFile(Base):
    """A document of a batch request: the job it became, or why it was refused."""

    index: int  # its place in the request (a ZIP's members in the archive's order)
    filename: str | None
    id: str | None = None  # the job, when accepted
    code: str | None = None  # the error code, when refused
    message: str | None = None


class BatchAccepted(Base):
    """The answer to POST /v1/batches: the batch, and every file's fate in request order."""

    id: str
    status: str
    created_at: str
    accepted: list[BatchFile]
    rejected: list[BatchFile]
    error: ErrorBody | None = None  # a problem with the request that ended it part way


class BatchCounts(Base):
    """Jobs of a batch by status."""

    total: int = 0
    queued: int = 0
    processing: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0


class BatchJob(Base):
    """One job of a batch, in submission order."""

    id: str
    filename: str | None
    status: str
    pages_done: int = 0
    pages_total: int = 0
    error: str | None = None  # the error code of a failed or cancelled job


class BatchView(Base):
    """GET /v1/batches/{id}: counts, pages, timestamps, and a page of its jobs."""

    id: str
    status: str  # open (documents still arriving) | running | finished
    counts: BatchCounts
    pages: Progress
    options: JobOptions
    created_at: str | None
    finished_at: str | None
    rejected: list[BatchFile] = msgspec.field(default_factory=list)
    jobs: list[BatchJob] = msgspec.field(default_factory=list)
    next_offset: int | None = None
    webhook: WebhookState | None = None


class WebhookState(Base):
    """Where a job's or a batch's webhook delivery stands."""

    url: str
    status: str  # pending | delivered | failed
    attempts: int = 0
    last_status: int | None = None  # the receiver's last HTTP status
    last_error: str | None = None
