"""The Python client of the ocrq API: sync ``Client`` and asyncio ``AsyncClient`` over httpx.

Uploads go as the raw document body (Content-Type from a magic-byte sniff, options as query
parameters): files stream from disk with no base64 overhead. When the producer has an object
store (GET /v1/capabilities), files over its inline limit go there by upload instead
(POST /v1/uploads, one PUT, then the job on the upload); ``submit_source`` queues s3:// keys
and https:// URLs. Every API error becomes a typed ``ApiError`` carrying the catalogue code
the server sent.
"""

from ocrq.client.aio import AsyncClient, gather_or_cancel
from ocrq.client.by_reference import NO_STORE
from ocrq.client.calls import (
    DEFAULT_URL,
    Call,
    Job,
    JobRef,
    client_headers,
    decode,
    http_timeout,
    job_path,
)
from ocrq.client.errors import (
    ERROR_CLASSES,
    ApiError,
    Conflict,
    InvalidRequest,
    JobFailed,
    NotFound,
    PayloadTooLarge,
    QueueFull,
    QuotaExceeded,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    WaitTimeout,
    checked,
    conflict_or_failure,
    error_from_response,
    rebuild_error,
    unreachable,
)
from ocrq.client.pacing import (
    MAX_POLL_S,
    MAX_RETRY_SLEEP_S,
    SUBMIT_RETRIES,
    next_poll,
    retriable,
    retry_delay,
    settled,
)
from ocrq.client.sync import Client
from ocrq.client.upload import (
    CHUNK_BYTES,
    SNIFF_BYTES,
    ProgressCallback,
    Source,
    Upload,
    prepare_upload,
    query_params,
)
from ocrq.shared.schemas import Capabilities

__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_URL",
    "ERROR_CLASSES",
    "MAX_POLL_S",
    "MAX_RETRY_SLEEP_S",
    "NO_STORE",
    "SNIFF_BYTES",
    "SUBMIT_RETRIES",
    "ApiError",
    "AsyncClient",
    "Call",
    "Capabilities",
    "Client",
    "Conflict",
    "InvalidRequest",
    "Job",
    "JobFailed",
    "JobRef",
    "NotFound",
    "PayloadTooLarge",
    "ProgressCallback",
    "QueueFull",
    "QuotaExceeded",
    "Source",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "Upload",
    "WaitTimeout",
    "checked",
    "client_headers",
    "conflict_or_failure",
    "decode",
    "error_from_response",
    "gather_or_cancel",
    "http_timeout",
    "job_path",
    "next_poll",
    "prepare_upload",
    "query_params",
    "rebuild_error",
    "retriable",
    "retry_delay",
    "settled",
    "unreachable",
]
