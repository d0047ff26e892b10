"""The job record: every field of the job hash, its codec, what a poll reads, and the event.

Producer, consumer and the Lua scripts meet only here. The producer writes a new record with
``new_job_fields``; the scripts move it through the state machine (docs/state-machine.md);
pollers and workers read it back with ``read_record``. A test fails when a script touches a
field, a status or an event key that this module does not declare.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from ocrq.shared.errors import ErrorCode
from ocrq.shared.schemas import Base, DocumentRef, ErrorBody, JobOptions, Status, stored_options


class Field(StrEnum):
    """Every field of the job hash ``<prefix>job:<id>``."""

    ID = "id"
    STATUS = "status"  # a Status value
    TENANT = "tenant"
    FILENAME = "filename"  # "" when the client sent none
    MEDIA_TYPE = "media_type"  # sniffed from the bytes
    SIZE = "size"  # document bytes
    LANE = "lane"
    OPTIONS = "options"  # JobOptions as JSON
    CREATED_AT = "created_at"  # epoch ms
    STARTED_AT = "started_at"  # epoch ms of the latest claim
    FINISHED_AT = "finished_at"  # epoch ms of the terminal transition
    ATTEMPTS = "attempts"  # claims so far
    PAGES_TOTAL = "pages_total"
    PAGES_DONE = "pages_done"
    ERROR = "error"  # ErrorBody as JSON, on failed and cancelled
    RESULT = "result"  # Result as JSON, on done
    PAYLOAD = "payload"  # the document's raw bytes, until the job ends (inline documents)
    DOCUMENT = "document"  # DocumentRef JSON: where the document is when not inline
    RESULT_REF = "result_ref"  # on done, with a store: the result's folder in it, not RESULT
    WORKER = "worker"  # the consumer that claimed it ("" before a claim and once released)
    ENTRY = "entry"  # the stream entry the worker holds
    BATCH = "batch"  # the batch it belongs to ("" for none)
    CALLBACK = "callback"  # the URL its webhook goes to (absent: none)
    WEBHOOK = "webhook"  # WebhookState as JSON: the delivery's attempts and result
    TRACE = "trace"  # the enqueue's W3C traceparent, when tracing is on (shared/tracing.py)


class BatchField(StrEnum):
    """Every field of the batch hash ``<prefix>batch:<id>`` (its jobs: ``…:jobs``, a list)."""

    ID = "id"
    TENANT = "tenant"
    CREATED_AT = "created_at"  # epoch ms
    FINISHED_AT = "finished_at"  # epoch ms, once sealed and every job ended
    SEALED = "sealed"  # "1" once every document of the request has been read
    TOTAL = "total"  # jobs accepted
    DONE = "done"  # jobs ended, by status
    FAILED = "failed"
    CANCELLED = "cancelled"
    OPTIONS = "options"  # JobOptions as JSON, for every job
    REJECTED = "rejected"  # the files refused, as JSON
    CALLBACK = "callback"
    WEBHOOK = "webhook"


# A poll reads everything but the payload (up to 10 MB) and the worker's bookkeeping.
# (A DocumentRef names store keys and source URLs: a poll does not show it either.)
POLL_FIELDS: tuple[Field, ...] = tuple(
    f
    for f in Field
    if f
    not in (Field.PAYLOAD, Field.WORKER, Field.ENTRY, Field.CALLBACK, Field.DOCUMENT, Field.TRACE)
)
# What a worker reads to run a claimed job.
WORK_FIELDS: tuple[Field, ...] = (
    Field.PAYLOAD,
    Field.DOCUMENT,
    Field.MEDIA_TYPE,
    Field.OPTIONS,
    Field.CREATED_AT,
    Field.TENANT,
    Field.FILENAME,
)
# The fields of a lane's stream entry: the job id, and its batch when it has one.
ENTRY_JOB_ID = "id"
ENTRY_BATCH = "batch"
# An entry of the webhooks stream (``<prefix>webhooks``): what ended, to tell its callback.
HOOK_FIELDS: tuple[str, ...] = ("kind", "id")
# An entry of the dead stream (``<prefix>dead``): a poisoned job, for operators to inspect.
DEAD_ENTRY_FIELDS: tuple[str, ...] = (ENTRY_JOB_ID, "lane", "entry", "deliveries")

_INT_FIELDS = frozenset({Field.SIZE, Field.ATTEMPTS, Field.PAGES_TOTAL, Field.PAGES_DONE})
_MS_FIELDS = frozenset({Field.CREATED_AT, Field.STARTED_AT, Field.FINISHED_AT})


class JobRecord(Base):
    """A job hash decoded; a field that was not read (or not written yet) has its default."""

    id: str = ""
    status: Status | None = None  # None: no such job
    tenant: str = ""
    filename: str = ""
    media_type: str = ""
    size: int = 0
    lane: str = "interactive"
    options: JobOptions = msgspec.field(default_factory=JobOptions)
    created_at: int | None = None
    started_at: int | None = None
    finished_at: int | None = None
    attempts: int = 0
    pages_total: int = 0
    pages_done: int = 0
    error: ErrorBody | None = None
    result: bytes | None = None  # the Result JSON exactly as the worker wrote it
    payload: bytes | None = None
    document: DocumentRef | None = None
    result_ref: str = ""
    worker: str = ""
    entry: str = ""
    batch: str = ""
    callback: str = ""
    webhook: bytes | None = None  # WebhookState JSON
    trace: str = ""  # a traceparent: the enqueue's span, the parent of the worker's


# The names in a job's files hash (Keys.job_files): its searchable PDF, and each figure under
# "images/" (the name a Block's ``image`` holds, "p1-1.png", is what follows).
SEARCHABLE_PDF = "searchable.pdf"
FIGURES = "images/"


def figure_file(image: str) -> str:
    """A figure's name in the job's files hash ("p1-1.png" → "images/p1-1.png")."""
    return FIGURES + image


class JobEvent(msgspec.Struct):
    """What the scripts publish on the events channel at every state change."""

    id: str
    status: str
    pages_done: int = 0
    pages: list[int] = msgspec.field(default_factory=list)  # page numbers just finished


def error_json(code: ErrorCode, message: str) -> bytes:
    """The ``error`` field: the same {code, message} body the API returns."""
    return msgspec.json.encode(ErrorBody(code=code.value, message=message))


def new_job_fields(
    *,
    job_id: str,
    tenant: str,
    filename: str | None,
    media_type: str,
    data: bytes,
    options: JobOptions,
    created_ms: int,
    batch: str = "",
    callback: str | None = None,
    document: DocumentRef | None = None,
) -> dict[str, bytes | str | int]:
    """Every field of a new job hash; the payload is the raw bytes, never base64.

    With ``document`` (the bytes are in the store, or a URL), ``data`` is empty and the hash
    holds the reference and its size instead of a payload.
    """
    fields: dict[str, bytes | str | int] = {
        Field.ID: job_id,
        Field.STATUS: Status.QUEUED.value,
        Field.TENANT: tenant,
        Field.FILENAME: filename or "",
        Field.MEDIA_TYPE: media_type,
        Field.SIZE: len(data),
        Field.LANE: options.lane,
        Field.OPTIONS: msgspec.json.encode(options),
        Field.CREATED_AT: created_ms,
        Field.ATTEMPTS: 0,
        Field.PAGES_TOTAL: 0,
        Field.PAGES_DONE: 0,
        Field.PAYLOAD: data,
        Field.WORKER: "",
        Field.BATCH: batch,
    }
    if document is not None:
        del fields[Field.PAYLOAD]
        fields[Field.DOCUMENT] = msgspec.json.encode(document)
        fields[Field.SIZE] = document.size
    if callback:
        fields[Field.CALLBACK] = callback
    return fields


def decode_record(raw: dict[Field, Any]) -> JobRecord:
    """Decode the fields an HMGET returned (absent ones, None, keep their defaults)."""
    return JobRecord(
        **{
            name.value: _decode_field(name, value)
            for name, value in raw.items()
            if value is not None
        }
    )


def _decode_field(name: Field, value: Any) -> Any:
    if name in (Field.PAYLOAD, Field.RESULT, Field.WEBHOOK):
        return value
    if name is Field.OPTIONS:
        return stored_options(value)
    if name is Field.ERROR:
        return msgspec.json.decode(value, type=ErrorBody)
    if name is Field.DOCUMENT:
        return msgspec.json.decode(value, type=DocumentRef)
    if name in _INT_FIELDS:
        return int(value)
    if name in _MS_FIELDS:
        return int(value) if value else None
    if name is Field.STATUS:
        return Status(text(value))
    return text(value)


def text(value: Any) -> str:
    """A Redis reply (bytes or str) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)
