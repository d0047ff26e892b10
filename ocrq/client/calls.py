"""The API's requests as data, and the settings and plumbing both clients share around them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote, urlsplit

import httpx
import msgspec

from ocrq.client.errors import ApiError, unreachable
from ocrq.client.pacing import MAX_RETRY_SLEEP_S, SUBMIT_RETRIES, resubmit_delay
from ocrq.client.upload import Upload, query_params
from ocrq.shared.schemas import Capabilities, JobView, Result

DEFAULT_URL = "http://127.0.0.1:8000"

T = TypeVar("T")
HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """An accepted submission."""

    id: str
    status: str
    created_at: str


JobRef = Job | JobView | str
# The result's formats (docs/results.md); "pdf" comes as bytes, the others as text.
TextFormat = Literal["json", "markdown", "html", "text", "chunks"]
ResultFormat = TextFormat | Literal["pdf"]


def job_path(job: JobRef, suffix: str = "") -> str:
    """``/v1/jobs/{id}``; the id is quoted so a bad one cannot address another route."""
    job_id = job if isinstance(job, str) else job.id
    return f"/v1/jobs/{quote(job_id, safe='')}{suffix}"


@dataclass(frozen=True)
class Call:
    """One API request short of its body; either client sends it with its own I/O."""

    method: str
    path: str
    params: dict[str, str] | None = None
    headers: dict[str, str] | None = None
    extra_s: float = 0.0  # a long-poll's wait, on top of the client's timeout


def submit(
    upload: Upload, options: dict[str, Any], idempotency_key: str | None, wait: int = 0
) -> Call:
    """The upload of a document, options as query parameters; ``wait`` > 0 asks the server
    to answer with the job's view when it ends within that many seconds (Prefer: wait)."""
    params, headers = query_params(upload, options), upload.headers(idempotency_key)
    if wait > 0:
        headers["Prefer"] = f"wait={wait}"
    return Call("POST", "/v1/jobs", params=params, headers=headers, extra_s=max(wait, 0))


def submitted(response: httpx.Response) -> Job | JobView:
    """The job a submission made: its view when it ended within ``Prefer: wait``."""
    if response.status_code == 200 and "preference-applied" in response.headers:
        return decode(response, JobView)
    return decode(response, Job)


def status(job: JobRef, wait: int) -> Call:
    """The job's view; a long-poll of ``wait`` seconds when > 0."""
    params = {"wait": str(wait)} if wait else None
    return Call("GET", job_path(job), params=params, extra_s=wait)


def result(
    job: JobRef,
    *,
    markdown: bool = False,
    fmt: ResultFormat | Literal["fields"] | None = None,
    chunk_tokens: int | None = None,
    keep_headers_footers: bool | None = None,
) -> Call:
    """The job's result: JSON, Markdown, or any format the API renders (``fmt``)."""
    headers = {"Accept": "text/markdown"} if markdown else None
    params: dict[str, str] = {}
    if fmt is not None:
        params["format"] = fmt
    if chunk_tokens is not None:
        params["chunk_tokens"] = str(chunk_tokens)
    if keep_headers_footers is not None:
        params["keep_headers_footers"] = str(keep_headers_footers).lower()
    return Call("GET", job_path(job, "/result"), params=params or None, headers=headers)


def rendered(response: httpx.Response, fmt: ResultFormat | None) -> Result | str | bytes:
    """A result response: the Result (no format), the PDF's bytes, or the text."""
    if fmt is None:
        return decode(response, Result)
    return response.content if fmt == "pdf" else response.text


def table(job: JobRef, number: int) -> Call:
    """The job's n-th table (from 1) as CSV."""
    return Call("GET", job_path(job, f"/tables/{number}.csv"))


def image(job: JobRef, name: str) -> Call:
    """One figure of the job (a Block.image name, "p1-1.png")."""
    return Call("GET", job_path(job, f"/images/{quote(name, safe='')}"))


def page(job: JobRef, number: int) -> Call:
    """One page's result, as soon as it is read."""
    return Call("GET", job_path(job, f"/pages/{number}"))


def list_jobs(limit: int, offset: int) -> Call:
    """A page of the caller's jobs, newest first."""
    return Call("GET", "/v1/jobs", params={"limit": str(limit), "offset": str(offset)})


def usage(first: str | None, last: str | None, tenant: str | None, as_csv: bool = False) -> Call:
    """Usage per UTC day over ``first``..``last`` (YYYY-MM-DD; default: the last 30 days)."""
    given = {"from": first, "to": last, "tenant": tenant, "format": "csv" if as_csv else None}
    return Call("GET", "/v1/usage", params={k: v for k, v in given.items() if v is not None})


def cancel(job: JobRef) -> Call:
    """Cancel an active job (it stays, as cancelled)."""
    return Call("POST", job_path(job, "/cancel"))


def delete(job: JobRef) -> Call:
    """Delete a job and its result (an active job is cancelled first)."""
    return Call("DELETE", job_path(job))


def decode(response: httpx.Response, kind: type[T]) -> T:
    """The response body as a msgspec type."""
    return msgspec.json.decode(response.content, type=kind)


def new_status(response: httpx.Response) -> str:
    """The status a cancel left the job in."""
    return decode(response, dict[str, str])["status"]


def same_origin(url: str, base_url: str) -> bool:
    """True when ``url`` is relative or names the producer itself (so its API key may go)."""
    target, base = urlsplit(url), urlsplit(base_url)
    if not target.scheme:
        return True
    return (target.scheme, target.netloc) == (base.scheme, base.netloc)


def client_headers(api_key: str | None) -> dict[str, str]:
    """Headers sent with every request."""
    headers = {"User-Agent": "ocrq-client/0.1", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def http_timeout(seconds: float) -> httpx.Timeout:
    """A timeout for every phase, connect capped at 10 s."""
    return httpx.Timeout(seconds, connect=min(seconds, 10.0))


class ClientBase(Generic[HttpT]):
    """What Client and AsyncClient share: settings, one connection pool, how a Call is sent."""

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
        self._http: HttpT = self._connect(
            base_url=self.base_url, headers=client_headers(api_key), timeout=http_timeout(timeout)
        )
        # For PUTs to another host (a presigned store URL), which must not get the API key.
        self._foreign: HttpT | None = None
        self._capabilities: Capabilities | None = None  # read once per client
        # Threads of one sync client ask for it once (the async client gates in its loop).
        self._capabilities_lock = threading.Lock()

    def _connect(self, **options: Any) -> HttpT:
        raise NotImplementedError

    def _put_client(self, url: str) -> HttpT:
        """The pool a PUT to ``url`` goes through: ours for the producer, a bare one else."""
        if same_origin(url, self.base_url):
            return self._http
        if self._foreign is None:
            headers = {"User-Agent": client_headers(None)["User-Agent"]}
            self._foreign = self._connect(headers=headers, timeout=http_timeout(self.timeout))
        return self._foreign

    def _request_args(self, call: Call, content: object = None) -> dict[str, Any]:
        """The arguments of httpx's ``request`` for ``call``."""
        return {
            "method": call.method,
            "url": call.path,
            "params": call.params,
            "headers": call.headers,
            "content": content,
            "timeout": http_timeout(self.timeout + call.extra_s),
        }

    @contextmanager
    def _reaching(self, url: str | None = None) -> Iterator[None]:
        """Turns a transport failure into Unavailable (naming ``url``, else the producer)."""
        try:
            yield
        except httpx.TransportError as e:
            raise unreachable(e, url or self.base_url) from e

    def _resubmit_delay(self, error: ApiError, attempt: int) -> float | None:
        return resubmit_delay(error, attempt, self.submit_retries, self.retry_sleep_max_s)
