"""Fetching a tool's ``url`` (opt-in): the address checks webhooks get, redirects included.

Every hop is resolved once and checked (``ocrq.shared.egress``), the request goes to the
address that was checked, and a redirect is followed by hand, so that its target is checked
again: a public page that redirects to 127.0.0.1 or to the cloud metadata address is refused.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx

from ocrq.shared.egress import (
    AddressPolicy,
    BlockedTarget,
    Resolver,
    Target,
    pinned_client,
    resolve_checked,
    send,
)
from ocrq.shared.errors import ErrorCode, OcrqError

MAX_REDIRECTS = 5
MAX_CONNECTIONS = 1  # the hops of one fetch go one after another
REDIRECTS = frozenset({301, 302, 303, 307, 308})
RESOLVE_TIMEOUT_S = 5.0  # one host's DNS answer, within the fetch's own deadline
PRIVATE_ENV = "OCRQ_MCP_ALLOW_PRIVATE_URLS"


async def fetch_url(
    url: str,
    *,
    allow_private: bool,
    max_bytes: int,
    timeout_s: float,
    resolve: Resolver | None = None,
    blocked: AddressPolicy | None = None,
) -> bytes:
    """The body of an http(s) URL, redirects followed and checked, all within ``timeout_s``.

    ``resolve`` and ``blocked`` replace the system resolver and the address policy (tests).
    """
    try:
        async with (
            asyncio.timeout(timeout_s),
            pinned_client(MAX_CONNECTIONS, timeout_s) as http,
        ):
            deadline = asyncio.get_running_loop().time() + timeout_s
            return await follow(http, url, deadline, allow_private, max_bytes, resolve, blocked)
    except TimeoutError as e:
        raise OcrqError(ErrorCode.TIMEOUT, f"{url}: not fetched within {timeout_s:g} s") from e


async def follow(
    http: httpx.AsyncClient,
    url: str,
    deadline: float,
    allow_private: bool,
    max_bytes: int,
    resolve: Resolver | None,
    blocked: AddressPolicy | None,
) -> bytes:
    """GET ``url`` and the redirects it leads to, each hop's address checked before use."""
    loop = asyncio.get_running_loop()
    current = url
    for hop in range(MAX_REDIRECTS + 1):
        target = await checked(current, url, hop, allow_private, deadline, resolve, blocked)
        reply = await send(
            http,
            "GET",
            target,
            headers={"accept": "*/*"},
            deadline_s=max(deadline - loop.time(), 0.001),
            max_bytes=max_bytes,
        )
        location = reply.headers.get("location")
        if reply.status in REDIRECTS and location:
            current = str(httpx.URL(current).join(location).copy_with(fragment=None))
            continue
        if not 200 <= reply.status < 300:
            raise OcrqError(ErrorCode.INVALID_REQUEST, f"{current}: HTTP {reply.status}")
        if reply.truncated:
            raise OcrqError(ErrorCode.PAYLOAD_TOO_LARGE, f"{current}: over {max_bytes} bytes")
        return reply.body
    raise OcrqError(ErrorCode.INVALID_REQUEST, f"{url}: more than {MAX_REDIRECTS} redirects")


async def checked(
    current: str,
    url: str,
    hop: int,
    allow_private: bool,
    deadline: float,
    resolve: Resolver | None,
    blocked: AddressPolicy | None,
) -> Target:
    """The checked target of one hop; its refusal names the hop and how to allow it."""
    where = current if hop == 0 else f"{url} redirected to {current}"
    if urlsplit(current).scheme not in ("http", "https"):
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{where}: only http(s) URLs are fetched")
    timeout = max(min(RESOLVE_TIMEOUT_S, deadline - asyncio.get_running_loop().time()), 0.001)
    try:
        return await resolve_checked(
            current,
            allow_private=allow_private,
            timeout_s=timeout,
            resolve=resolve,
            blocked=blocked,
        )
    except BlockedTarget as e:
        message = f"{where}: {e.message} ({PRIVATE_ENV}=true allows it)"
        raise OcrqError(e.code, message) from e
    except OcrqError as e:
        raise OcrqError(e.code, f"{where}: {e.message}") from e
