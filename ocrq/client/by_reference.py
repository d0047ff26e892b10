"""Documents by reference, for both clients: the producer's capabilities, which way a document
goes, the upload ticket and its PUT, and the job queued on a source (upload, s3:// key, URL)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec

from ocrq.client.calls import Call, decode
from ocrq.client.errors import InvalidRequest, PayloadTooLarge
from ocrq.client.upload import Upload
from ocrq.shared.errors import ErrorCode
from ocrq.shared.schemas import Capabilities, JobOptions, UploadRequest
from ocrq.shared.schemas import Source as Reference

CAPABILITIES = Call("GET", "/v1/capabilities")
# What an older producer (no GET /v1/capabilities) is taken for: no store, so every document
# goes inline; its limits unknown here (0), so the producer itself refuses what is too big.
NO_STORE = Capabilities(
    version="",
    blob_store=False,
    uploads=False,
    inline_max_bytes=0,
    max_document_bytes=0,
    max_source_bytes=0,
    max_source_pages=0,
    max_pages=0,
)
JSON = {"Content-Type": "application/json"}


def capabilities_of(response: httpx.Response) -> Capabilities:
    """The capabilities answer as a Capabilities."""
    return decode(response, Capabilities)


def through_store(upload: Upload, caps: Capabilities) -> bool:
    """True when the document goes by upload (over the inline limit, and the producer takes
    uploads); PayloadTooLarge, before a byte is sent, when neither way takes it."""
    if caps.uploads and upload.size > caps.inline_max_bytes:
        if caps.max_source_bytes and upload.size > caps.max_source_bytes:
            raise too_large(upload, caps.max_source_bytes, "OCRQ_MAX_SOURCE_BYTES", "")
        return True
    if caps.max_document_bytes and upload.size > caps.max_document_bytes:
        hint = "" if caps.uploads else "; a producer with an object store (OCRQ_BLOB_URL) takes "
        hint += "" if caps.uploads else "larger ones by upload"
        raise too_large(upload, caps.max_document_bytes, "OCRQ_MAX_DOCUMENT_BYTES", hint)
    return False


def too_large(upload: Upload, limit: int, setting: str, hint: str) -> PayloadTooLarge:
    """The 413 the producer would answer, raised here instead of sending the bytes first."""
    name = upload.filename or "document"
    return PayloadTooLarge(
        ErrorCode.PAYLOAD_TOO_LARGE,
        f"{name} is {upload.size} bytes, over the producer's limit of {limit} ({setting})"
        f"{hint}; not sent",
        status=413,
    )


def ticket_call(upload: Upload) -> tuple[Call, bytes]:
    """POST /v1/uploads announcing the document (its size lets the producer refuse at once)."""
    request = UploadRequest(
        size=upload.size or None, filename=upload.filename, content_type=upload.media_type
    )
    return Call("POST", "/v1/uploads", headers=dict(JSON)), msgspec.json.encode(request)


def put_headers(headers: dict[str, str], upload: Upload) -> dict[str, str]:
    """The PUT's headers: the ticket's own (a presigned URL may sign them) and the length,
    sent whole so the store never sees a chunked body (S3 refuses those)."""
    return {**headers, "Content-Length": str(upload.size)}


def reference(
    *, key: str | None = None, url: str | None = None, upload_id: str | None = None
) -> Reference:
    """The source of a job by reference: exactly one of an s3:// key, a URL, an upload id."""
    given = [
        name for name, value in (("key", key), ("url", url), ("upload_id", upload_id)) if value
    ]
    if len(given) != 1:
        raise InvalidRequest(
            ErrorCode.INVALID_REQUEST, "name exactly one source: key=, url= or upload_id="
        )
    if key is not None and not key.startswith("s3://"):
        raise InvalidRequest(ErrorCode.INVALID_REQUEST, f"key {key!r}: an s3://bucket/… key")
    if url is not None and urlsplit(url).scheme not in ("https", "http"):
        raise InvalidRequest(ErrorCode.INVALID_REQUEST, f"url {url!r}: an https:// address")
    return Reference(upload_id=upload_id, key=key, url=url)


def json_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options given (None: the server decides) as a JSON body carries them, checked here
    first: a typo found after a 500 MB upload would have wasted it."""
    given = {name: value for name, value in options.items() if value is not None}
    try:
        checked_options = msgspec.convert(given, JobOptions, strict=False)
    except msgspec.ValidationError as e:
        raise InvalidRequest(ErrorCode.INVALID_REQUEST, f"options: {e}") from e
    as_json = msgspec.to_builtins(checked_options)
    return {name: as_json[name] for name in given}


def source_call(
    source: Reference,
    filename: str | None,
    options: dict[str, Any],
    idempotency_key: str | None,
    wait: int = 0,
) -> tuple[Call, bytes]:
    """POST /v1/jobs with a JSON SourceBody (``{"source": …, "filename", "options"}``)."""
    named = {name: value for name, value in msgspec.to_builtins(source).items() if value}
    body: dict[str, Any] = {"source": named, "options": json_options(options)}
    if filename:
        body["filename"] = filename
    headers = dict(JSON)
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    if wait > 0:
        headers["Prefer"] = f"wait={wait}"
    call = Call("POST", "/v1/jobs", headers=headers, extra_s=max(wait, 0))
    return call, msgspec.json.encode(body)
