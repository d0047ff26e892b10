"""A document by URL (``{"source": {"url": …}}``): fetched by the worker, streamed to a file.

The address checks are the webhooks' (shared/egress.py): the host is resolved once, every
address is checked (no loopback, private or link-local target unless
OCRQ_WEBHOOK_ALLOW_PRIVATE), and the request connects to the checked address. Redirects are
never followed: a 3xx fails the job, since its target was never checked.

What the origin answers decides what becomes of the job:

- 2xx: the body is spooled, at most OCRQ_MAX_SOURCE_BYTES (more: ``payload_too_large``);
- 404 or 410: ``not_found``; any other 4xx (401, 403 …) and 3xx: ``invalid_request``;
- 408, 429, 5xx, a refused connection, a timeout: ``SourceUnavailable``, waited out like a
  store outage (consumer/retry.py ``through_blob_outages``), then ``unavailable``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from ocrq.shared.blobs.base import BlobUnavailable
from ocrq.shared.blobs.transfer import BlobTooLarge, spool_to_file
from ocrq.shared.egress import (
    AddressPolicy,
    Resolver,
    first_connection,
    pinned_request,
    resolve_checked,
)
from ocrq.shared.errors import ErrorCode, OcrqError

GONE = frozenset({404, 410})
RETRIED = frozenset({408, 425, 429})  # the origin asks to come back later


class SourceUnavailable(BlobUnavailable):
    """The origin did not answer, or answered with a status a later try may cure."""


class SourceFetcher:
    """Fetches source URLs with a pinned client (shared/egress.py pinned_client).

    ``resolve`` and ``blocked`` replace the lookup and the address policy (tests).
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        allow_private: bool,
        resolve_timeout_s: float,
        fetch_timeout_s: float,
        resolve: Resolver | None = None,
        blocked: AddressPolicy | None = None,
    ) -> None:
        self.http = http
        self.allow_private = allow_private
        self.resolve_timeout_s = resolve_timeout_s
        self.fetch_timeout_s = fetch_timeout_s
        self.resolve, self.blocked = resolve, blocked

    async def fetch(self, url: str, path: Path, max_bytes: int) -> int:
        """Spool the URL's body to ``path``; its size. OcrqError or SourceUnavailable."""
        target = await resolve_checked(
            url,
            allow_private=self.allow_private,
            timeout_s=self.resolve_timeout_s,
            resolve=self.resolve,
            blocked=self.blocked,
        )
        deadline_s = self.fetch_timeout_s
        requests = [
            pinned_request(self.http, "GET", target, address, None, None, deadline_s)
            for address in (target.address, *target.others)
        ]
        try:
            async with asyncio.timeout(deadline_s):
                response = await first_connection(self.http, requests)
                try:
                    refuse_status(response.status_code, target.host)
                    refuse_declared_size(response.headers.get("content-length"), max_bytes)
                    return await spool_to_file(url, response.aiter_raw(), path, max_bytes)
                finally:
                    await response.aclose()
        except BlobTooLarge as e:
            raise too_large(max_bytes) from e
        except (TimeoutError, httpx.TimeoutException) as e:
            message = f"{target.host} did not send the document within {deadline_s:g} s"
            raise SourceUnavailable(message) from e
        except httpx.HTTPError as e:
            raise SourceUnavailable(f"{target.host}: {e or type(e).__name__}"[:300]) from e


def refuse_status(status: int, host: str) -> None:
    """Raise what a non-2xx answer means for the job (the module's docstring)."""
    if 200 <= status < 300:
        return
    if status in RETRIED or status >= 500:
        raise SourceUnavailable(f"the source URL's host {host} answered {status}")
    if status in GONE:
        raise OcrqError(ErrorCode.NOT_FOUND, f"the source URL answered {status}: no document")
    if 300 <= status < 400:
        message = f"the source URL answered {status}: redirects are not followed"
        raise OcrqError(ErrorCode.INVALID_REQUEST, message)
    raise OcrqError(ErrorCode.INVALID_REQUEST, f"the source URL answered {status}")


def refuse_declared_size(content_length: str | None, max_bytes: int) -> None:
    """Fail at once when the origin says the body is over the limit (it is checked anyway)."""
    if content_length and content_length.isdigit() and int(content_length) > max_bytes:
        raise too_large(max_bytes)


def too_large(max_bytes: int) -> OcrqError:
    """The error of a document over OCRQ_MAX_SOURCE_BYTES."""
    message = f"the document is larger than {max_bytes} bytes (OCRQ_MAX_SOURCE_BYTES)"
    return OcrqError(ErrorCode.PAYLOAD_TOO_LARGE, message)
