"""Outbound HTTP to addresses a tenant names (webhooks, fetched URLs): checked, then pinned.

A URL's host is resolved once, every address it resolves to is checked against a policy (no
loopback, private, link-local, … unless allowed), and the request connects to the address
that was checked: the URL is rewritten to it, ``Host`` keeps the name and TLS sends it as
SNI and checks the certificate against it. The HTTP client never resolves the name again, so
a DNS answer that changes between the check and the connection (rebinding) cannot redirect
it. Redirects are never followed. Each exchange has one deadline, connect to last byte, and
reads at most ``max_bytes`` of the reply.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import msgspec

from ocrq.shared.errors import ErrorCode, OcrqError

# (host, port) -> the addresses it resolves to, as strings.
Resolver = Callable[[str, int], Awaitable[list[str]]]
AddressPolicy = Callable[[str], bool]  # True: this address must not be reached

# getaddrinfo blocks a thread for as long as the resolver takes: a pool of its own, so a slow
# or hostile resolver starves only other lookups, never asyncio's default executor (the
# producer decodes base64 there). A lookup past its timeout keeps its thread until it returns.
RESOLVER_THREADS = 4
_resolver_pool = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="ocrq-resolve")

NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the IPv4 address in the last 32 bits
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local use, never global
SIX_TO_FOUR = ipaddress.ip_network("2002::/16")  # RFC 3056: the IPv4 address in bits 16-48
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d (:: and ::1 aside)


class BlockedTarget(OcrqError):
    """A host that resolves to an address the policy refuses (invalid_request)."""

    def __init__(self, host: str) -> None:
        super().__init__(
            ErrorCode.INVALID_REQUEST, f"{host} is a private, loopback or link-local address"
        )


class Target(msgspec.Struct, frozen=True):
    """A URL whose host was resolved and checked: where a request to it connects."""

    url: str
    scheme: str  # http | https
    host: str  # the name, lower case (the Host header, TLS SNI, certificate check)
    port: int
    address: str  # the checked IP address the connection goes to
    others: tuple[str, ...] = ()  # the host's other checked addresses, tried when it fails


class Reply(msgspec.Struct, frozen=True):
    """The head and the first ``max_bytes`` of a reply."""

    status: int
    headers: dict[str, str]
    body: bytes
    truncated: bool  # more followed and was dropped unread


def pinned_client(max_connections: int, timeout_s: float) -> httpx.AsyncClient:
    """An HTTP client for pinned requests: no connection kept, no proxy, no redirects.

    A request goes to a checked address with the host in Host and SNI, so a kept connection
    could serve another host at the same address, its certificate checked for the first
    one only: none is kept. An explicit transport also leaves out HTTP(S)_PROXY: a proxy
    would resolve names itself.
    """
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(limits=limits, retries=0),
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=False,
    )


def embedded_address(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def blocked_address(address: str) -> bool:
    """True for an address a tenant's URL must not reach: loopback, private, link-local, …

    IPv6 forms that carry an IPv4 address are judged by that address: a NAT64 gateway or a
    6to4 relay would deliver ``64:ff9b::7f00:1`` to 127.0.0.1.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone id is no part of it
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in NAT64_LOCAL:
            return True
        inner = embedded_address(ip)
        if inner is not None:
            return not inner.is_global or inner.is_multicast
    return not ip.is_global or ip.is_multicast


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses getaddrinfo gives for a host, looked up on the resolver pool."""
    loop = asyncio.get_running_loop()
    infos = await loop.run_in_executor(
        _resolver_pool,
        lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP),
    )
    return [str(info[4][0]) for info in infos]


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host in ASCII, port) of an http(s) URL with a host; invalid_request otherwise."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as e:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "not a valid URL") from e
    scheme, host = parsed.scheme, parsed.raw_host.decode("ascii").lower()
    if scheme not in ("http", "https") or not host:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "an http(s) URL with a host")
    port = parsed.port if parsed.port is not None else (443 if scheme == "https" else 80)
    if not 0 < port < 65536:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"port {port} is out of range")
    return scheme, host, port


def literal_address(host: str) -> str | None:
    """The host itself when it is an IP address literal (no lookup needed)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


async def resolve_checked(
    url: str,
    *,
    allow_private: bool,
    timeout_s: float,
    resolve: Resolver | None = None,
    blocked: AddressPolicy | None = None,
) -> Target:
    """Resolve a URL's host once and check every address it has; the target to connect to.

    Raises invalid_request for a URL that is not http(s), a host that does not resolve in
    ``timeout_s``, or one with any address the policy blocks (unless ``allow_private``).
    """
    scheme, host, port = split_url(url)
    policy = blocked or blocked_address
    literal = literal_address(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            async with asyncio.timeout(timeout_s):
                addresses = await (resolve or system_resolve)(host, port)
        except (OSError, ValueError, TimeoutError) as e:
            raise OcrqError(ErrorCode.INVALID_REQUEST, f"{host} does not resolve") from e
    if not addresses:
        raise OcrqError(ErrorCode.INVALID_REQUEST, f"{host} does not resolve")
    if not allow_private and any(policy(a) for a in addresses):
        raise BlockedTarget(host)
    first, *others = dict.fromkeys(addresses)  # in the resolver's order, once each
    return Target(url=url, scheme=scheme, host=host, port=port, address=first, others=tuple(others))


def pinned_request(
    client: httpx.AsyncClient,
    method: str,
    target: Target,
    address: str,
    headers: Mapping[str, str] | None,
    content: bytes | None,
    deadline_s: float,
) -> httpx.Request:
    """A request to one checked address of the target, naming the host in Host and TLS SNI."""
    url = httpx.URL(target.url)
    default_port = 443 if target.scheme == "https" else 80
    host_header = target.host if ":" not in target.host else f"[{target.host}]"
    if target.port != default_port:
        host_header += f":{target.port}"
    sent = {k: v for k, v in (headers or {}).items() if k.lower() != "host"}
    sent["host"] = host_header
    sent.setdefault("accept-encoding", "identity")  # a body is read raw, never inflated
    extensions: dict[str, Any] = {"timeout": httpx.Timeout(deadline_s).as_dict()}
    if target.scheme == "https":
        extensions["sni_hostname"] = target.host
    return client.build_request(
        method,
        url.copy_with(host=address),
        headers=sent,
        content=content,
        extensions=extensions,
    )


async def send(
    client: httpx.AsyncClient,
    method: str,
    target: Target,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    deadline_s: float,
    max_bytes: int,
) -> Reply:
    """One exchange with a checked target, connect to last byte within ``deadline_s``.

    Reads at most ``max_bytes`` of the body; the rest is dropped with the connection.
    Redirects are not followed (a 3xx is the reply). Raises timeout past the deadline,
    unavailable when the connection fails.
    """
    try:
        async with asyncio.timeout(deadline_s):
            response = await first_connection(
                client,
                [
                    pinned_request(client, method, target, address, headers, content, deadline_s)
                    for address in (target.address, *target.others)
                ],
            )
            try:
                body, truncated = await read_capped(response, max_bytes)
            finally:
                await response.aclose()  # unread bytes left: httpcore closes the connection
    except (TimeoutError, httpx.TimeoutException) as e:
        raise OcrqError(
            ErrorCode.TIMEOUT, f"{target.host} did not answer within {deadline_s:g} s"
        ) from e
    except httpx.HTTPError as e:
        reason = str(e) or type(e).__name__
        raise OcrqError(ErrorCode.UNAVAILABLE, f"{target.host}: {reason}"[:300]) from e
    return Reply(
        status=response.status_code,
        headers={k.lower(): v for k, v in response.headers.items()},
        body=body,
        truncated=truncated,
    )


async def first_connection(
    client: httpx.AsyncClient, requests: list[httpx.Request]
) -> httpx.Response:
    """The reply's head from the first address that takes the connection, in order."""
    for request in requests[:-1]:
        try:
            return await client.send(request, stream=True, follow_redirects=False)
        except httpx.ConnectError:
            continue  # refused or unreachable there: the host's next checked address
    return await client.send(requests[-1], stream=True, follow_redirects=False)


async def read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The first ``max_bytes`` of a streamed body, and whether more came."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        room = max_bytes - size
        if len(chunk) > room:
            parts.append(chunk[:room])
            return b"".join(parts), True
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts), False
