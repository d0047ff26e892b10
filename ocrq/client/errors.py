"""The typed errors of the ocrq client, and how a response or transport failure becomes one."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import TERMINAL, ErrorBody, JobView, Status


class ApiError(OcrqError):
    """An error the API (or the way to it) reported; ``code`` is the catalogue code."""

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        status: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        known = code in ErrorCode.__members__.values()
        # A code this client does not know (a newer server) is kept in the message.
        super().__init__(
            ErrorCode(code) if known else ErrorCode.INTERNAL,
            message if known else f"{code}: {message}",
            retry_after=retry_after,
        )
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take other constructor arguments: rebuild from the attributes instead.
        return (rebuild_error, (type(self), self.args, dict(vars(self))))

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


def rebuild_error(cls: type[ApiError], args: tuple[Any, ...], state: dict[str, Any]) -> ApiError:
    """Unpickle an ApiError (a process pool sends errors back pickled)."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InvalidRequest(ApiError):
    """400: the request or an option was invalid (also invalid_base64)."""


class Unauthorized(ApiError):
    """401: a missing or wrong API key."""


class NotFound(ApiError):
    """404: no such job (or it belongs to another tenant)."""


class Conflict(ApiError):
    """409: the job has no result yet."""


class PayloadTooLarge(ApiError):
    """413: the document is over the server's size limit."""


class UnsupportedMediaType(ApiError):
    """415: the bytes are not a PDF or a supported image."""


class QueueFull(ApiError):
    """503 queue_full: the backlog is over its limit; ``retry_after`` says when to retry."""


class QuotaExceeded(ApiError):
    """429 quota_exceeded: this tenant has OCRQ_MAX_TENANT_BACKLOG jobs waiting or running.

    Not resubmitted on its own, unlike QueueFull: the room comes back only as the tenant's
    own jobs end, so a caller waits for them (``retry_after`` is a hint) or submits less.
    """


class Unavailable(ApiError):
    """503 unavailable, or the server could not be reached at all (``status`` None)."""


class JobFailed(ApiError):
    """The job ended failed or cancelled; ``code`` is the job's own error code."""

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        status: int | None = None,
        retry_after: int | None = None,
        view: JobView | None = None,
    ) -> None:
        super().__init__(code, message, status=status, retry_after=retry_after)
        self.view = view

    @classmethod
    def of(cls, view: JobView, status: int | None = None) -> JobFailed:
        """The error of a failed or cancelled job."""
        if view.error is not None:
            return cls(view.error.code, view.error.message, status=status, view=view)
        return cls(ErrorCode.CANCELLED, f"job {view.id} is {view.status}", status=status, view=view)


class WaitTimeout(ApiError):
    """The job was not terminal when the wait's timeout ran out; ``view`` is the last poll."""

    def __init__(self, message: str, view: JobView) -> None:
        super().__init__(ErrorCode.TIMEOUT, message)
        self.view = view


ERROR_CLASSES: dict[str, type[ApiError]] = {
    ErrorCode.INVALID_REQUEST: InvalidRequest,
    ErrorCode.INVALID_BASE64: InvalidRequest,
    ErrorCode.UNAUTHORIZED: Unauthorized,
    ErrorCode.NOT_FOUND: NotFound,
    ErrorCode.CONFLICT: Conflict,
    ErrorCode.PAYLOAD_TOO_LARGE: PayloadTooLarge,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: UnsupportedMediaType,
    ErrorCode.QUEUE_FULL: QueueFull,
    ErrorCode.QUOTA_EXCEEDED: QuotaExceeded,
    ErrorCode.UNAVAILABLE: Unavailable,
}
# A body that is not ours (a proxy's 502 page): the code follows from the status.
_STATUS_CODES: dict[int, ErrorCode] = {
    400: ErrorCode.INVALID_REQUEST,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.UNAUTHORIZED,
    404: ErrorCode.NOT_FOUND,
    409: ErrorCode.CONFLICT,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    502: ErrorCode.UNAVAILABLE,
    503: ErrorCode.UNAVAILABLE,
    504: ErrorCode.UNAVAILABLE,
}


def error_from_response(response: httpx.Response) -> ApiError:
    """The typed error for a non-2xx response."""
    try:
        body = msgspec.json.decode(response.content, type=ErrorBody)
        code, message = body.code, body.message
    except (msgspec.DecodeError, msgspec.ValidationError):
        code = _STATUS_CODES.get(response.status_code, ErrorCode.INTERNAL)
        message = f"HTTP {response.status_code}: {response.text[:200]}"
    retry_after = response.headers.get("retry-after", "")
    cls = ERROR_CLASSES.get(code, ApiError)
    return cls(
        code,
        message,
        status=response.status_code,
        retry_after=int(retry_after) if retry_after.isdigit() else None,
    )


def checked(response: httpx.Response) -> httpx.Response:
    """The response when 2xx; its typed error otherwise."""
    if response.is_success:
        return response
    raise error_from_response(response)


def checked_stream(response: httpx.Response) -> httpx.Response:
    """checked() for a streamed response: an error's body is read first."""
    if not response.is_success:
        response.read()
    return checked(response)


async def achecked_stream(response: httpx.Response) -> httpx.Response:
    """checked_stream() for the async client."""
    if not response.is_success:
        await response.aread()
    return checked(response)


def unreachable(e: httpx.TransportError, url: str) -> Unavailable:
    """A transport failure as an error of the same family as a 503."""
    return Unavailable(ErrorCode.UNAVAILABLE, f"{url}: {type(e).__name__}: {e}")


def conflict_or_failure(error: Conflict, view: JobView) -> ApiError:
    """A 409 on a failed or cancelled job becomes JobFailed with the job's own code."""
    if Status(view.status) in TERMINAL and view.status != Status.DONE:
        return JobFailed.of(view, status=error.status)
    return error
