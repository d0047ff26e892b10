"""The synchronous ocrq client."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, overload

import httpx
import msgspec

from ocrq.client import batch, by_reference, calls
from ocrq.client.batch import BatchBody, Event, EventParser, sources_of
from ocrq.client.calls import (
    Call,
    ClientBase,
    Job,
    JobRef,
    ResultFormat,
    TextFormat,
    http_timeout,
)
from ocrq.client.errors import (
    ApiError,
    Conflict,
    NotFound,
    checked,
    checked_stream,
    conflict_or_failure,
)
from ocrq.client.pacing import Deadline, LongPoll
from ocrq.client.upload import ProgressCallback, Source, Upload, prepare_upload
from ocrq.shared.schemas import (
    BatchAccepted,
    BatchView,
    Capabilities,
    Fields,
    JobList,
    JobView,
    Page,
    Result,
    UploadTicket,
)
from ocrq.shared.schemas import Source as Reference
from ocrq.shared.usage import UsageReport

T = TypeVar("T")


class Client(ClientBase[httpx.Client]):
    """Synchronous client; one httpx.Client, reused by every call (and thread-safe)."""

    def _connect(self, **options: Any) -> httpx.Client:
        return httpx.Client(**options)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pools."""
        self._http.close()
        if self._foreign is not None:
            self._foreign.close()

    def _send(self, call: Call, content: bytes | Iterator[bytes] | None = None) -> httpx.Response:
        with self._reaching():
            response = self._http.request(**self._request_args(call, content))
        return checked(response)

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, made again after a 503 (nothing was done) a few times."""
        tries = 0
        while True:
            try:
                return attempt()
            except ApiError as e:
                delay = self._resubmit_delay(e, tries)
                if delay is None:
                    raise
                time.sleep(delay)
                tries += 1

    def _send_for_result(self, job: JobRef, call: Call) -> httpx.Response:
        try:
            return self._send(call)
        except Conflict as e:
            raise conflict_or_failure(e, self.status(job)) from e

    def capabilities(self) -> Capabilities:
        """What the producer accepts (GET /v1/capabilities), read once per client; an older
        producer without that route reads as one without a store (every upload inline)."""
        with self._capabilities_lock:
            if self._capabilities is None:
                try:
                    response = self._send(by_reference.CAPABILITIES)
                    self._capabilities = by_reference.capabilities_of(response)
                except NotFound:
                    self._capabilities = by_reference.NO_STORE
            return self._capabilities

    def submit(
        self,
        source: Source,
        *,
        filename: str | None = None,
        idempotency_key: str | None = None,
        wait: int = 0,
        progress: ProgressCallback | None = None,
        **options: Any,
    ) -> Job | JobView:
        """Upload a path or bytes; retries a 503 a few times (Retry-After).

        Over the producer's inline limit, when it has an object store, the file goes there by
        upload (POST /v1/uploads, a PUT) and the job is queued on it; else it is the raw body.
        Files stream from disk either way; ``progress(sent, total)`` follows the bytes.
        ``wait`` > 0 (``Prefer: wait``): the job's view, result included, when it ends within
        that many seconds (at most the server's OCRQ_MAX_WAIT_S), else the accepted Job.
        """
        upload = prepare_upload(source, filename)
        if by_reference.through_store(upload, self.capabilities()):
            by_reference.json_options(options)  # before the upload, not after it
            upload_id = self._upload(upload, progress)
            reference = Reference(upload_id=upload_id)
            return self._submit_reference(
                reference, upload.filename, options, idempotency_key, wait
            )
        call = calls.submit(upload, options, idempotency_key, wait)
        return self._retrying(lambda: calls.submitted(self._send(call, upload.chunks(progress))))

    def upload(
        self,
        source: Source,
        *,
        filename: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> str:
        """PUT a document into the producer's object store (POST /v1/uploads); the upload id
        to queue it with, ``submit_source(upload_id=…)``."""
        return self._upload(prepare_upload(source, filename), progress)

    def _upload(self, upload: Upload, progress: ProgressCallback | None) -> str:
        call, body = by_reference.ticket_call(upload)
        ticket = self._retrying(lambda: calls.decode(self._send(call, body), UploadTicket))
        headers = by_reference.put_headers(ticket.headers, upload)
        http = self._put_client(ticket.url)
        with self._reaching(ticket.url.partition("?")[0]):
            response = http.request(
                ticket.method, ticket.url, headers=headers, content=upload.chunks(progress)
            )
        checked(response)
        return ticket.upload_id

    def submit_source(
        self,
        *,
        key: str | None = None,
        url: str | None = None,
        upload_id: str | None = None,
        filename: str | None = None,
        idempotency_key: str | None = None,
        wait: int = 0,
        **options: Any,
    ) -> Job | JobView:
        """Queue a job on a document the producer never carries: an ``s3://`` key under your
        tenant's prefix (OCRQ_SOURCE_PREFIXES), an ``https://`` URL a worker fetches, or an
        ``upload()``'s id. Exactly one; ``wait`` as in submit."""
        reference = by_reference.reference(key=key, url=url, upload_id=upload_id)
        return self._submit_reference(reference, filename, options, idempotency_key, wait)

    def _submit_reference(
        self,
        reference: Reference,
        filename: str | None,
        options: dict[str, Any],
        idempotency_key: str | None,
        wait: int,
    ) -> Job | JobView:
        call, body = by_reference.source_call(reference, filename, options, idempotency_key, wait)
        return self._retrying(lambda: calls.submitted(self._send(call, body)))

    def status(self, job: JobRef, *, wait: int = 0) -> JobView:
        """The job's view; ``wait`` > 0 long-polls until it changes (at most that long)."""
        return calls.decode(self._send(calls.status(job, wait)), JobView)

    def wait(
        self, job: JobRef, *, timeout: float = 300.0, raise_on_failure: bool = False
    ) -> JobView:
        """Long-poll until the job is terminal; WaitTimeout past ``timeout`` seconds."""
        poll = LongPoll(timeout, raise_on_failure)
        view = self.status(job)
        while (seconds := poll.next_wait(view)) is not None:
            view = self.status(job, wait=seconds)
        return view

    @overload
    def result(self, job: JobRef, *, format: None = ...) -> Result: ...
    @overload
    def result(
        self,
        job: JobRef,
        *,
        format: TextFormat,
        chunk_tokens: int | None = ...,
        keep_headers_footers: bool | None = ...,
    ) -> str: ...
    @overload
    def result(self, job: JobRef, *, format: Literal["pdf"]) -> bytes: ...
    def result(
        self,
        job: JobRef,
        *,
        format: ResultFormat | None = None,
        chunk_tokens: int | None = None,
        keep_headers_footers: bool | None = None,
    ) -> Result | str | bytes:
        """The result (a Result), or as ``format``: text, or the searchable PDF's bytes.

        JobFailed (the job's code) when it failed, Conflict when not ready.
        """
        call = calls.result(
            job, fmt=format, chunk_tokens=chunk_tokens, keep_headers_footers=keep_headers_footers
        )
        return calls.rendered(self._send_for_result(job, call), format)

    def table_csv(self, job: JobRef, number: int) -> str:
        """The job's n-th table (reading order, from 1) as CSV."""
        return self._send_for_result(job, calls.table(job, number)).text

    def image(self, job: JobRef, name: str) -> bytes:
        """A figure's PNG (``Block.image``, one of ``Result.images``)."""
        return self._send(calls.image(job, name)).content

    def page(self, job: JobRef, number: int) -> Page:
        """One page's result as soon as that page is read (Conflict until then)."""
        return calls.decode(self._send(calls.page(job, number)), Page)

    def fields(self, job: JobRef) -> Fields:
        """The fields the job's ``extract`` schema asked for, each with where it was read."""
        return calls.decode(self._send_for_result(job, calls.result(job, fmt="fields")), Fields)

    def markdown(self, job: JobRef) -> str:
        """The result as Markdown."""
        return self._send_for_result(job, calls.result(job, markdown=True)).text

    def cancel(self, job: JobRef) -> str:
        """Cancel an active job: "cancelled"; Conflict when it had already ended."""
        return calls.new_status(self._send(calls.cancel(job)))

    def delete(self, job: JobRef) -> None:
        """Delete a job and its result (cancelling it when active); then it is NotFound."""
        self._send(calls.delete(job))

    def jobs(self, *, limit: int = 20, offset: int = 0) -> JobList:
        """A page of your recent jobs, newest first (``next_offset`` for the next page)."""
        return calls.decode(self._send(calls.list_jobs(limit, offset)), JobList)

    def usage(
        self, *, start: str | None = None, end: str | None = None, tenant: str | None = None
    ) -> UsageReport:
        """Your usage per UTC day, ``start``..``end`` (YYYY-MM-DD, both included; default the
        last 30 days); ``tenant``: another tenant's, with an admin credential."""
        return calls.decode(self._send(calls.usage(start, end, tenant)), UsageReport)

    def usage_csv(
        self, *, start: str | None = None, end: str | None = None, tenant: str | None = None
    ) -> str:
        """The same usage as CSV: a header, then one row per day."""
        return self._send(calls.usage(start, end, tenant, as_csv=True)).text

    def submit_batch(
        self,
        sources: Source | Iterable[Source],
        *,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> BatchAccepted:
        """Upload many files (or one ZIP) as one batch; every file's fate in the answer."""
        body = BatchBody(sources_of(sources))
        call = batch.submit_call(body, options, idempotency_key)
        return calls.decode(self._send(call, body.chunks()), BatchAccepted)

    def batch_status(self, batch_id: str, *, limit: int = 100, offset: int = 0) -> BatchView:
        """The batch's counts, pages and a page of its jobs."""
        return calls.decode(self._send(batch.status_call(batch_id, limit, offset)), BatchView)

    def iter_batch_results(self, batch_id: str) -> Iterator[dict[str, Any]]:
        """Each ended job of the batch: {id, filename, status, error, result}, in order."""
        with (
            self._reaching(),
            self._http.stream(
                "GET", f"/v1/batches/{batch_id}/results", timeout=http_timeout(self.timeout)
            ) as response,
        ):
            checked_stream(response)
            for line in response.iter_lines():
                if line:
                    yield msgspec.json.decode(line)

    def events(self, job_or_batch: str, *, batch: bool = False) -> Iterator[Event]:
        """A job's (or a batch's) live events, until it ends."""
        kind = "batches" if batch else "jobs"
        parser = EventParser()
        with (
            self._reaching(),
            self._http.stream(
                "GET", f"/v1/{kind}/{job_or_batch}/events", timeout=http_timeout(self.timeout + 30)
            ) as response,
        ):
            checked_stream(response)
            for line in response.iter_lines():
                if (event := parser.line(line)) is not None:
                    yield event

    def submit_many(
        self, sources: Iterable[Source], *, concurrency: int = 4, wait: int = 0, **options: Any
    ) -> list[Job | JobView | ApiError]:
        """Upload in threads; in order, an upload that failed holds its ApiError (``wait=``
        as in submit: a JobView for a job that ended in time)."""

        def one(source: Source) -> Job | JobView | ApiError:
            try:
                return self.submit(source, wait=wait, **options)
            except ApiError as e:
                return e

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(one, sources))

    def wait_many(
        self, jobs: Iterable[JobRef], *, timeout: float = 300.0, raise_on_failure: bool = False
    ) -> list[JobView]:
        """Wait for every job (one shared deadline); jobs run in parallel on the server."""
        deadline = Deadline(timeout)
        return [
            self.wait(job, timeout=deadline.left(), raise_on_failure=raise_on_failure)
            for job in jobs
        ]
