"""Documents by reference: ``{"source": {"upload_id" | "key" | "url"}}`` on POST /v1/jobs.

The producer never carries these bytes: it checks the reference (the upload exists, the key
lies under the tenant's prefixes, the URL is no private address), sniffs an object's type
from its first bytes, and queues a job whose hash holds a DocumentRef.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import msgspec

from ocrq.producer.jobs.documents import discard, store_unavailable
from ocrq.producer.jobs.ingest import MAX_FILENAME, SourceSubmission, sniffed
from ocrq.producer.runtime import Runtime
from ocrq.shared.blobs import BlobError, BlobMissing, BlobStore, tenant_part, upload_key
from ocrq.shared.egress import BlockedTarget, resolve_checked, split_url
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.keys import is_known_id
from ocrq.shared.record import Field
from ocrq.shared.schemas import DocumentRef
from ocrq.shared.settings import Settings

SNIFF_BYTES = 2048  # what the sniffer reads of an inline document too
NO_STORE = "this deployment has no object store (OCRQ_BLOB_URL)"


class Placed(msgspec.Struct, kw_only=True):
    """A checked source: the job's document reference, its type, and its fixed job id."""

    document: DocumentRef
    media_type: str  # "" for a URL: the worker sniffs what it fetched
    filename: str | None
    job_id: str = ""  # an upload's id is its job's id; "": a fresh id


async def place_source(rt: Runtime, tenant: str, sub: SourceSubmission) -> Placed:
    """Check the one source named and what it points at (400/403/404/409/413/415/503)."""
    source = sub.source
    given = [name for name in ("upload_id", "key", "url") if getattr(source, name) is not None]
    if len(given) != 1:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"source: exactly one of upload_id, key, url (got {', '.join(given) or 'none'})",
        )
    if source.url is not None:
        return await from_url(rt.settings, source.url, sub.filename)
    if rt.blobs is None:
        raise OcrqError(ErrorCode.CONFLICT, f"source.{given[0]}: {NO_STORE}")
    if source.upload_id is not None:
        return await from_upload(rt, rt.blobs, tenant, source.upload_id, sub.filename)
    key = source.key or ""  # the one given: neither of the other two
    return await from_key(rt.settings, rt.blobs, tenant, key, sub.filename)


def upload_idempotency(upload_id: str) -> str:
    """The Idempotency-Key an upload's job is queued under when the client sends none:
    two requests racing on one upload meet in the enqueue's transaction. (A newline
    cannot be in a header, so no client's key is ever this one.)"""
    return f"upload\n{upload_id}"


async def from_upload(
    rt: Runtime, blobs: BlobStore, tenant: str, upload_id: str, filename: str | None
) -> Placed:
    """An upload the client PUT (POST /v1/uploads): the job takes the upload's id."""
    missing = OcrqError(
        ErrorCode.NOT_FOUND, f"source.upload_id: no upload {upload_id} (expired or never PUT)"
    )
    if not is_known_id(upload_id):
        raise missing
    record = await rt.store.read(upload_id, (Field.STATUS, Field.TENANT))
    if record.status is not None and record.tenant == tenant:
        raise OcrqError(
            ErrorCode.CONFLICT,
            f"source.upload_id: upload {upload_id} is already job {upload_id} "
            f"({record.status}): an upload queues one job",
        )
    key = upload_key(tenant, upload_id)
    size = await object_size(blobs, key)
    if size is None:
        raise missing
    media_type = await checked_object(blobs, key, size, filename, rt.settings, owned=True)
    document = DocumentRef(kind="blob", key=key, size=size, owned=True)
    return Placed(document=document, media_type=media_type, filename=filename, job_id=upload_id)


async def from_key(
    settings: Settings, blobs: BlobStore, tenant: str, key: str, filename: str | None
) -> Placed:
    """An object of the tenant's own in the store (``s3://bucket/prefix/…``): never deleted."""
    relative = relative_source_key(settings, tenant, key, "source.key")
    size = await object_size(blobs, relative)
    if size is None:
        raise OcrqError(ErrorCode.NOT_FOUND, f"source.key: no object {key}")
    name = filename or last_segment(relative)
    media_type = await checked_object(blobs, relative, size, name, settings, owned=False)
    document = DocumentRef(kind="blob", key=relative, size=size, owned=False)
    return Placed(document=document, media_type=media_type, filename=name)


async def from_url(settings: Settings, url: str, filename: str | None) -> Placed:
    """An https:// document the worker fetches, checked now as a webhook target is."""
    allow_private = settings.webhooks.webhook_allow_private
    try:
        scheme, _, _ = split_url(url)
        if scheme != "https" and not allow_private:
            raise OcrqError(
                ErrorCode.INVALID_REQUEST,
                "an https:// URL (http:// only with OCRQ_WEBHOOK_ALLOW_PRIVATE)",
            )
        if not allow_private:
            timeout_s = settings.webhooks.webhook_resolve_timeout_s
            await resolve_checked(url, allow_private=False, timeout_s=timeout_s)
    except BlockedTarget as e:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"source.url: {e} (OCRQ_WEBHOOK_ALLOW_PRIVATE allows it)"
        ) from e
    except OcrqError as e:
        raise OcrqError(e.code, f"source.url: {e.message}") from e
    name = filename or last_segment(urlsplit(url).path)
    document = DocumentRef(kind="url", url=url, size=0, owned=False)
    return Placed(document=document, media_type="", filename=name)


def allowed_prefixes(settings: Settings, tenant: str) -> list[str]:
    """The tenant's key prefixes (OCRQ_SOURCE_PREFIXES, {tenant} filled in), each a folder."""
    prefixes = []
    for raw in settings.blobs.source_prefixes.split(","):
        prefix = raw.strip().replace("{tenant}", tenant_part(tenant))
        if prefix:
            prefixes.append(prefix if prefix.endswith("/") else prefix + "/")
    return prefixes


def store_base(settings: Settings) -> str:
    """OCRQ_BLOB_URL as the start every full key in the store has ("s3://bucket/prefix/")."""
    return settings.blobs.blob_url.rstrip("/") + "/"


def relative_source_key(settings: Settings, tenant: str, key: str, what: str) -> str:
    """The store-relative key of a full ``s3://bucket/prefix/…`` key the tenant may read;
    400 for a malformed one, 403 outside the tenant's prefixes."""
    allowed = allowed_prefixes(settings, tenant)
    base = store_base(settings)
    places = ", ".join(base + p for p in allowed) or "nowhere (OCRQ_SOURCE_PREFIXES is empty)"
    forbidden = OcrqError(
        ErrorCode.FORBIDDEN, f"{what}: your tenant may name keys under {places} only"
    )
    if not key.startswith(base):
        raise forbidden
    relative = key[len(base) :]
    check_key_shape(relative, what)
    if not any(relative.startswith(p) for p in allowed):
        raise forbidden
    return relative


def check_key_shape(relative: str, what: str) -> None:
    """400 for a key with an empty, "." or ".." segment (no path tricks on any backend)."""
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\\" in relative or "\0" in relative:
        raise OcrqError(
            ErrorCode.INVALID_REQUEST, f"{what}: a key with no empty, '.' or '..' segment"
        )


async def object_size(blobs: BlobStore, key: str) -> int | None:
    """The object's size (None when there is none); 503 when the store does not answer."""
    try:
        info = await blobs.head(key)
    except BlobError as e:
        raise store_unavailable(e) from e
    return None if info is None else info.size


async def checked_object(
    blobs: BlobStore, key: str, size: int, filename: str | None, settings: Settings, *, owned: bool
) -> str:
    """Size limits (400 empty, 413 over OCRQ_MAX_SOURCE_BYTES: an owned upload is deleted)
    and the type sniffed from the first bytes (415), as for inline documents."""
    limit = settings.blobs.max_source_bytes
    if size > limit:
        if owned:  # no job can ever take it
            await discard(blobs, key)
        raise OcrqError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"source: the document is {size} bytes, over {limit} (OCRQ_MAX_SOURCE_BYTES)",
        )
    if size == 0:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "source: the document is empty")
    try:
        head = await blobs.get_range(key, 0, SNIFF_BYTES)
    except BlobMissing as e:  # deleted between the HEAD and now
        raise OcrqError(ErrorCode.NOT_FOUND, f"source: {key} is gone") from e
    except BlobError as e:
        raise store_unavailable(e) from e
    return sniffed(head, None, filename)


def last_segment(path: str) -> str | None:
    """A key's or URL path's last segment, as a job's filename (None when there is none)."""
    name = unquote(path.rsplit("/", 1)[-1])
    return name[:MAX_FILENAME] or None
