"""POST /v1/uploads: a URL the client PUTs a big document to, then queues by its id.

An S3 store presigns the URL: the bytes go straight to the store, the producer never sees
them. A folder store (``file://``, ``ocrq up --blob-dir``) cannot presign: the URL then
points at the producer itself, ``PUT /v1/uploads/{upload_id}`` with a signed ticket in the
query, and the producer streams the body into the folder. The ticket is an HMAC whose key
every producer process of a stack derives from the same settings (the API keys, the Redis
URL and prefix, the store's URL), so any of them takes a PUT another one signed.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import msgspec
import structlog
from litestar import Request, post, put
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery

from ocrq.producer.jobs.decoding import too_large
from ocrq.producer.jobs.documents import store_unavailable
from ocrq.producer.jobs.ingest import within
from ocrq.producer.jobs.sources import NO_STORE
from ocrq.producer.jobs.views import iso, new_job_id
from ocrq.producer.runtime import caller, runtime_of
from ocrq.shared.blobs import BlobError, upload_key
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import is_known_id
from ocrq.shared.schemas import UploadRequest, UploadTicket
from ocrq.shared.settings import Settings

UPLOAD_REQUEST_MAX = 16 * 1024  # POST /v1/uploads' own body: a size, a name, a type
# A PUT through the producer may take OCRQ_BODY_TIMEOUT_S plus its size at this rate.
SLOWEST_UPLOAD_BYTES_S = 1024 * 1024


@post(
    "/v1/uploads",
    status_code=201,
    request_max_body_size=UPLOAD_REQUEST_MAX,
    summary="Get a URL to PUT a big document to",
)
async def create_upload(request: Request[Any, Any, Any], state: State) -> UploadTicket:
    """An upload id and a URL to PUT the document to (presigned, or the producer's own);
    then POST /v1/jobs ``{"source": {"upload_id": …}}`` queues it as job ``upload_id``."""
    rt, tenant = caller(request, state)
    if rt.blobs is None:
        raise OcrqError(
            ErrorCode.CONFLICT,
            f"uploads: {NO_STORE}; send the document itself to POST /v1/jobs "
            f"(up to {rt.settings.api.max_document_bytes} bytes)",
        )
    wanted = upload_request(await request.body())
    limit = rt.settings.blobs.max_source_bytes
    if wanted.size is not None and wanted.size > limit:
        raise OcrqError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"size: {wanted.size} bytes, over {limit} (OCRQ_MAX_SOURCE_BYTES)",
        )
    upload_id = new_job_id(rt.store.keys.pick_tag(tenant))
    structlog.contextvars.bind_contextvars(upload_id=upload_id)
    ttl = rt.settings.blobs.upload_ttl_s
    expires = int(time.time()) + ttl
    content_type = wanted.content_type or ""
    if rt.blobs.can_presign:
        try:
            url = await rt.blobs.presign("PUT", upload_key(tenant, upload_id), ttl, content_type)
        except BlobError as e:
            raise store_unavailable(e) from e
    else:
        base = str(request.base_url).rstrip("/")
        url = base + producer_upload_path(rt.settings, tenant, upload_id, expires)
    return UploadTicket(
        upload_id=upload_id,
        url=url,
        expires_at=iso(expires * 1000) or "",
        max_bytes=limit,
        headers={"Content-Type": content_type} if content_type else {},
    )


def upload_request(body: bytes) -> UploadRequest:
    """POST /v1/uploads' optional JSON body; 400 naming what is wrong with it."""
    if not body.strip():
        return UploadRequest()
    try:
        return msgspec.json.decode(body, type=UploadRequest)
    except msgspec.ValidationError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"body: {e}") from e
    except msgspec.DecodeError as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"body is not valid JSON: {e}") from e


def ticket_key(settings: Settings) -> bytes:
    """The HMAC key of upload tickets: the same in every producer of the stack, secret as
    long as the API keys or the Redis URL are (a folder store serves one machine)."""
    parts = (
        settings.api.api_keys,
        settings.store.redis_url,
        settings.store.prefix,
        settings.blobs.blob_url,
    )
    return hashlib.sha256("\0".join(("ocrq upload ticket", *parts)).encode()).digest()


def ticket_signature(settings: Settings, tenant: str, upload_id: str, expires: int) -> str:
    """The ticket's signature over tenant, upload id and expiry."""
    signed = f"{tenant}\n{upload_id}\n{expires}".encode()
    return hmac.new(ticket_key(settings), signed, hashlib.sha256).hexdigest()


def producer_upload_path(settings: Settings, tenant: str, upload_id: str, expires: int) -> str:
    """The producer's own PUT path for an upload, its ticket in the query."""
    signature = ticket_signature(settings, tenant, upload_id, expires)
    query = urlencode({"tenant": tenant, "expires": expires, "signature": signature})
    return f"/v1/uploads/{upload_id}?{query}"


def check_ticket(settings: Settings, tenant: str, upload_id: str, expires: int, sig: str) -> None:
    """403 unless the ticket is one this stack signed and has not expired."""
    good = ticket_signature(settings, tenant, upload_id, expires)
    if not hmac.compare_digest(good, sig):
        raise OcrqError(ErrorCode.FORBIDDEN, "upload ticket: the signature does not match")
    if expires < time.time():
        raise OcrqError(ErrorCode.FORBIDDEN, "upload ticket: expired (ask POST /v1/uploads again)")


async def capped(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    """The chunks, stopping with 413 as soon as they pass ``limit`` bytes."""
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        yield chunk


@put(
    "/v1/uploads/{upload_id:str}",
    status_code=200,
    request_max_body_size=None,
    include_in_schema=False,  # reached only through a ticket's URL, as a presigned one is
)
async def put_upload(
    request: Request[Any, Any, Any],
    state: State,
    upload_id: FromPath[str],
    tenant: FromQuery[str] = "",
    expires: FromQuery[int] = 0,
    signature: FromQuery[str] = "",
) -> dict[str, Any]:
    """A folder store's upload: the body streamed to the store, within OCRQ_MAX_SOURCE_BYTES."""
    rt = runtime_of(state)
    structlog.contextvars.bind_contextvars(tenant=tenant, upload_id=upload_id)
    check_ticket(rt.settings, tenant, upload_id, expires, signature)
    if rt.blobs is None:
        raise OcrqError(ErrorCode.CONFLICT, f"uploads: {NO_STORE}")
    if not is_known_id(upload_id):
        raise OcrqError(ErrorCode.NOT_FOUND, f"no upload {upload_id}")
    if await rt.store.status(upload_id) is not None:  # its job reads this object
        raise OcrqError(ErrorCode.CONFLICT, f"upload {upload_id} is already job {upload_id}")
    limit = rt.settings.blobs.max_source_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    expected = int(declared) if declared.isdigit() else limit
    seconds = rt.settings.api.body_timeout_s + expected / SLOWEST_UPLOAD_BYTES_S
    chunks = capped(within(request.stream(), seconds), limit)
    content_type = request.headers.get("content-type", "")
    try:
        size = await rt.blobs.put_stream(upload_key(tenant, upload_id), chunks, content_type)
    except BlobError as e:
        raise store_unavailable(e) from e
    return {"upload_id": upload_id, "size": size}


UPLOAD_HANDLERS = [create_upload, put_upload]
