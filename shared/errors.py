"""The error-code catalogue: every error ocrq reports carries one of these codes."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Codes shown to clients: as the HTTP error body at ingest, as job ``error.code`` later."""

    INVALID_REQUEST = "invalid_request"
    INVALID_BASE64 = "invalid_base64"
    UNAUTHORIZED = "unauthorized"
    TOKEN_EXPIRED = "token_expired"  # a bearer JWT past its exp (or not yet valid: nbf)
    TOKEN_INVALID = "token_invalid"  # a bearer JWT whose signature, issuer, audience or key fails
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    NOT_ACCEPTABLE = "not_acceptable"  # a result format the job cannot give
    REQUEST_TIMEOUT = "request_timeout"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    QUEUE_FULL = "queue_full"
    QUOTA_EXCEEDED = "quota_exceeded"
    UNAVAILABLE = "unavailable"
    TOO_MANY_PAGES = "too_many_pages"
    ENCRYPTED_DOCUMENT = "encrypted_document"
    CORRUPT_DOCUMENT = "corrupt_document"
    IMAGE_TOO_LARGE = "image_too_large"
    ENGINE_UNAVAILABLE = "engine_unavailable"
    ENGINE_ERROR = "engine_error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    POISONED = "poisoned"
    INTERNAL = "internal"
    # Not a job's error: the fields of a done job could not be extracted (Result.fields.error).
    EXTRACT_ERROR = "extract_error"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_BASE64: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.TOKEN_EXPIRED: 401,
    ErrorCode.TOKEN_INVALID: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.NOT_ACCEPTABLE: 406,
    ErrorCode.REQUEST_TIMEOUT: 408,
    ErrorCode.CONFLICT: 409,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.QUOTA_EXCEEDED: 429,
    ErrorCode.QUEUE_FULL: 503,
    ErrorCode.UNAVAILABLE: 503,
}

# Worth another attempt: the document is fine, the engine or the network was not.
TRANSIENT: frozenset[ErrorCode] = frozenset(
    {ErrorCode.ENGINE_UNAVAILABLE, ErrorCode.TIMEOUT, ErrorCode.UNAVAILABLE}
)


class OcrqError(Exception):
    """An error with a catalogue code and a message fit for the client."""

    def __init__(self, code: ErrorCode, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after

    @property
    def http_status(self) -> int:
        """The HTTP status this error maps to at the API (500 only for `internal`)."""
        return HTTP_STATUS.get(self.code, 500 if self.code is ErrorCode.INTERNAL else 422)

    @property
    def transient(self) -> bool:
        """True when retrying the same work may succeed."""
        return self.code in TRANSIENT

    def __reduce__(self) -> tuple[Any, ...]:
        # A process pool sends errors back pickled; rebuild from code and message.
        return (type(self), (self.code, self.message), {"retry_after": self.retry_after})

    def __repr__(self) -> str:
        return f"OcrqError({self.code.value!r}, {self.message!r})"
