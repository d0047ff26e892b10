"""The Python client of the ocrq API: sync ``Client`` and asyncio ``AsyncClient`` over httpx.

Uploads go as the raw document body (Content-Type from a magic-byte sniff, options as query
parameters): files stream from disk with no base64 overhead. Every API error becomes a typed
``ApiError`` carrying the catalogue code the server sent.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from shared.errors import ErrorCode, OcrqError
from shared.schemas import TERMINAL, ErrorBody, JobView, Result, Status
from shared.sniff import sniff_media_type

DEFAULT_URL = "http://127.0.0.1:8000"
MAX_POLL_S = 30  # one long-poll request; the server allows up to 60
SUBMIT_RETRIES = 3  # extra attempts after a 503 (queue_full / unavailable)
MAX_RETRY_SLEEP_S = 30.0
CHUNK_BYTES = 256 * 1024
SNIFF_BYTES = 2048  # what the server sniffs too

Source = str | os.PathLike[str] | bytes
T = TypeVar("T")


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """An accepted submission."""

    id: str
    status: str
    created_at: str


JobRef = Job | JobView | str


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


def unreachable(e: httpx.TransportError, url: str) -> Unavailable:
    """A transport failure as an error of the same family as a 503."""
    return Unavailable(ErrorCode.UNAVAILABLE, f"{url}: {type(e).__name__}: {e}")


def job_path(job: JobRef, suffix: str = "") -> str:
    """``/v1/jobs/{id}``; the id is quoted so a bad one cannot address another route."""
    job_id = job if isinstance(job, str) else job.id
    return f"/v1/jobs/{quote(job_id, safe='')}{suffix}"


@dataclass(frozen=True)
class Upload:
    """A document ready to send: its sniffed type, size, and a way to read it (again)."""

    media_type: str
    size: int
    filename: str | None
    data: bytes | None = None
    path: Path | None = None

    def chunks(self) -> Iterator[bytes]:
        """The body for a sync request; a fresh reader per attempt."""
        if self.data is not None:
            yield self.data
            return
        assert self.path is not None
        with self.path.open("rb") as f:
            while chunk := f.read(CHUNK_BYTES):
                yield chunk

    async def achunks(self) -> AsyncIterator[bytes]:
        """The body for an async request; file reads happen off the event loop."""
        if self.data is not None:
            yield self.data
            return
        assert self.path is not None
        f = await asyncio.to_thread(self.path.open, "rb")
        try:
            while chunk := await asyncio.to_thread(f.read, CHUNK_BYTES):
                yield chunk
        finally:
            f.close()

    def headers(self, idempotency_key: str | None) -> dict[str, str]:
        """Content-Type and an explicit Content-Length (the server refuses 413 early)."""
        headers = {"Content-Type": self.media_type, "Content-Length": str(self.size)}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return headers


def prepare_upload(source: Source, filename: str | None = None) -> Upload:
    """Sniff a path or bytes; an unknown type goes as octet-stream and the server says 415."""
    if isinstance(source, bytes):
        media = sniff_media_type(source[:SNIFF_BYTES]) or "application/octet-stream"
        return Upload(media, len(source), filename, data=source)
    path = Path(source)
    with path.open("rb") as f:
        head = f.read(SNIFF_BYTES)
        size = os.fstat(f.fileno()).st_size
    media = sniff_media_type(head) or "application/octet-stream"
    return Upload(media, size, filename or path.name, path=path)


def query_params(upload: Upload, options: dict[str, Any]) -> dict[str, str]:
    """Job options (and the filename) as query parameters; None means the server decides."""
    params = {name: str(value) for name, value in options.items() if value is not None}
    if upload.filename:
        params["filename"] = upload.filename
    return params


def retry_delay(error: ApiError, attempt: int, ceiling: float = MAX_RETRY_SLEEP_S) -> float:
    """Seconds before the next submit attempt: Retry-After, else exponential, both bounded."""
    delay = float(error.retry_after) if error.retry_after else 0.5 * 2**attempt
    return min(delay, ceiling)


def retriable(error: ApiError) -> bool:
    """A 503 means nothing was enqueued: the same upload may be sent again."""
    return isinstance(error, QueueFull | Unavailable) and error.status == 503


def next_poll(deadline: float) -> int:
    """Seconds for the next long-poll: up to MAX_POLL_S, never past the deadline."""
    return max(0, min(MAX_POLL_S, int(deadline - time.monotonic())))


def settled(view: JobView, raise_on_failure: bool) -> bool:
    """True when the view is terminal; raises JobFailed when asked to."""
    if Status(view.status) not in TERMINAL:
        return False
    if raise_on_failure and view.status != Status.DONE:
        raise JobFailed.of(view)
    return True


def client_headers(api_key: str | None) -> dict[str, str]:
    """Headers sent with every request."""
    headers = {"User-Agent": "ocrq-client/0.1", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def http_timeout(seconds: float) -> httpx.Timeout:
    """A timeout for every phase, connect capped at 10 s."""
    return httpx.Timeout(seconds, connect=min(seconds, 10.0))


def conflict_or_failure(error: Conflict, view: JobView) -> ApiError:
    """A 409 on a failed or cancelled job becomes JobFailed with the job's own code."""
    if Status(view.status) in TERMINAL and view.status != Status.DONE:
        return JobFailed.of(view, status=error.status)
    return error


def decode(response: httpx.Response, kind: type[T]) -> T:
    """The response body as a msgspec type."""
    return msgspec.json.decode(response.content, type=kind)


async def gather_or_cancel(coros: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Run concurrently, in order; on the first error the rest are cancelled, not orphaned."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()


class Client:
    """Synchronous client; one httpx.Client, reused by every call (and thread-safe)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        submit_retries: int = SUBMIT_RETRIES,
        retry_sleep_max_s: float = MAX_RETRY_SLEEP_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.submit_retries = submit_retries
        self.retry_sleep_max_s = retry_sleep_max_s
        self._http = httpx.Client(
            base_url=self.base_url, headers=client_headers(api_key), timeout=http_timeout(timeout)
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _request(
        self, method: str, path: str, *, extra_s: float = 0.0, **kwargs: Any
    ) -> httpx.Response:
        try:
            response = self._http.request(
                method, path, timeout=http_timeout(self.timeout + extra_s), **kwargs
            )
        except httpx.TransportError as e:
            raise unreachable(e, self.base_url) from e
        return checked(response)

    def submit(
        self,
        source: Source,
        *,
        filename: str | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> Job:
        """Upload a path or bytes as the raw body; retries a 503 a few times (Retry-After)."""
        upload = prepare_upload(source, filename)
        params, headers = query_params(upload, options), upload.headers(idempotency_key)
        attempt = 0
        while True:
            try:
                response = self._request(
                    "POST", "/v1/jobs", params=params, headers=headers, content=upload.chunks()
                )
                return decode(response, Job)
            except ApiError as e:
                if attempt >= self.submit_retries or not retriable(e):
                    raise
                time.sleep(retry_delay(e, attempt, self.retry_sleep_max_s))
                attempt += 1

    def status(self, job: JobRef, *, wait: int = 0) -> JobView:
        """The job's view; ``wait`` > 0 long-polls until it changes (at most that long)."""
        params = {"wait": str(wait)} if wait else None
        return decode(self._request("GET", job_path(job), params=params, extra_s=wait), JobView)

    def wait(
        self, job: JobRef, *, timeout: float = 300.0, raise_on_failure: bool = False
    ) -> JobView:
        """Long-poll until the job is terminal; WaitTimeout past ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        view = self.status(job)
        while not settled(view, raise_on_failure):
            poll = next_poll(deadline)
            if poll == 0:
                raise WaitTimeout(f"job {view.id} still {view.status} after {timeout:g}s", view)
            view = self.status(job, wait=poll)
        return view

    def result(self, job: JobRef) -> Result:
        """The result; JobFailed (the job's code) when it failed, Conflict when not ready."""
        try:
            return decode(self._request("GET", job_path(job, "/result")), Result)
        except Conflict as e:
            raise conflict_or_failure(e, self.status(job)) from e

    def markdown(self, job: JobRef) -> str:
        """The result as Markdown."""
        headers = {"Accept": "text/markdown"}
        try:
            return self._request("GET", job_path(job, "/result"), headers=headers).text
        except Conflict as e:
            raise conflict_or_failure(e, self.status(job)) from e

    def cancel(self, job: JobRef) -> str:
        """Cancel an active job or delete a finished one; the new status."""
        return decode(self._request("DELETE", job_path(job)), dict[str, str])["status"]

    def submit_many(
        self, sources: Iterable[Source], *, concurrency: int = 4, **options: Any
    ) -> list[Job | ApiError]:
        """Upload in threads; in order, an upload that failed holds its ApiError."""

        def one(source: Source) -> Job | ApiError:
            try:
                return self.submit(source, **options)
            except ApiError as e:
                return e

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(one, sources))

    def wait_many(
        self, jobs: Iterable[JobRef], *, timeout: float = 300.0, raise_on_failure: bool = False
    ) -> list[JobView]:
        """Wait for every job (one shared deadline); jobs run in parallel on the server."""
        deadline = time.monotonic() + timeout
        return [
            self.wait(
                job,
                timeout=max(0.0, deadline - time.monotonic()),
                raise_on_failure=raise_on_failure,
            )
            for job in jobs
        ]


class AsyncClient:
    """asyncio client; one httpx.AsyncClient, reused by every call."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        submit_retries: int = SUBMIT_RETRIES,
        retry_sleep_max_s: float = MAX_RETRY_SLEEP_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.submit_retries = submit_retries
        self.retry_sleep_max_s = retry_sleep_max_s
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=client_headers(api_key), timeout=http_timeout(timeout)
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(
        self, method: str, path: str, *, extra_s: float = 0.0, **kwargs: Any
    ) -> httpx.Response:
        try:
            response = await self._http.request(
                method, path, timeout=http_timeout(self.timeout + extra_s), **kwargs
            )
        except httpx.TransportError as e:
            raise unreachable(e, self.base_url) from e
        return checked(response)

    async def submit(
        self,
        source: Source,
        *,
        filename: str | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> Job:
        """Upload a path or bytes as the raw body; retries a 503 a few times (Retry-After)."""
        upload = await asyncio.to_thread(prepare_upload, source, filename)
        params, headers = query_params(upload, options), upload.headers(idempotency_key)
        attempt = 0
        while True:
            try:
                response = await self._request(
                    "POST", "/v1/jobs", params=params, headers=headers, content=upload.achunks()
                )
                return decode(response, Job)
            except ApiError as e:
                if attempt >= self.submit_retries or not retriable(e):
                    raise
                await asyncio.sleep(retry_delay(e, attempt, self.retry_sleep_max_s))
                attempt += 1

    async def status(self, job: JobRef, *, wait: int = 0) -> JobView:
        """The job's view; ``wait`` > 0 long-polls until it changes (at most that long)."""
        params = {"wait": str(wait)} if wait else None
        response = await self._request("GET", job_path(job), params=params, extra_s=wait)
        return decode(response, JobView)

    async def wait(
        self,
        job: JobRef,
        *,
        timeout: float = 300.0,  # noqa: ASYNC109 - one deadline over many long-polls
        raise_on_failure: bool = False,
    ) -> JobView:
        """Long-poll until the job is terminal; WaitTimeout past ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        view = await self.status(job)
        while not settled(view, raise_on_failure):
            poll = next_poll(deadline)
            if poll == 0:
                raise WaitTimeout(f"job {view.id} still {view.status} after {timeout:g}s", view)
            view = await self.status(job, wait=poll)
        return view

    async def result(self, job: JobRef) -> Result:
        """The result; JobFailed (the job's code) when it failed, Conflict when not ready."""
        try:
            return decode(await self._request("GET", job_path(job, "/result")), Result)
        except Conflict as e:
            raise conflict_or_failure(e, await self.status(job)) from e

    async def markdown(self, job: JobRef) -> str:
        """The result as Markdown."""
        headers = {"Accept": "text/markdown"}
        try:
            return (await self._request("GET", job_path(job, "/result"), headers=headers)).text
        except Conflict as e:
            raise conflict_or_failure(e, await self.status(job)) from e

    async def cancel(self, job: JobRef) -> str:
        """Cancel an active job or delete a finished one; the new status."""
        return decode(await self._request("DELETE", job_path(job)), dict[str, str])["status"]

    async def submit_many(
        self, sources: Iterable[Source], *, concurrency: int = 8, **options: Any
    ) -> list[Job | ApiError]:
        """Upload concurrently; in order, an upload that failed holds its ApiError."""
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(source: Source) -> Job | ApiError:
            async with gate:
                try:
                    return await self.submit(source, **options)
                except ApiError as e:
                    return e

        return await gather_or_cancel(one(s) for s in sources)

    async def wait_many(
        self,
        jobs: Iterable[JobRef],
        *,
        timeout: float = 300.0,  # noqa: ASYNC109 - one deadline shared by every job
        concurrency: int = 32,
        raise_on_failure: bool = False,
    ) -> list[JobView]:
        """Wait for every job, ``concurrency`` long-polls at a time, one shared deadline."""
        deadline = time.monotonic() + timeout
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(job: JobRef) -> JobView:
            async with gate:
                left = max(0.0, deadline - time.monotonic())
                return await self.wait(job, timeout=left, raise_on_failure=raise_on_failure)

        return await gather_or_cancel(one(j) for j in jobs)
