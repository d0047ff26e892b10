"""Which Host a request may name, and which Origin may change state: DNS rebinding and CSRF.

A web page the user visits can reach a producer on 127.0.0.1 two ways. By DNS rebinding, its
own name starts answering 127.0.0.1, so the browser treats the producer as that page's origin
and lets it read every answer: only the Host header (the page's name) tells them apart. And
by plain cross-site POSTs (CORS-simple: no preflight), which the browser sends with the
page's Origin. So every request must name an allowed host (400 before any route runs), and
a POST, PUT, PATCH or DELETE whose Origin is another origin than the host it was sent to is
refused (403). A client that is not a browser sends no Origin and passes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import Settings

LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARD_BINDS = ("", "0.0.0.0", "::", "[::]", "*")
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The kubelet probes with Host = the pod's IP and Prometheus scrapes the same way: these
# read-only paths answer whatever the Host, so a Host list never fails a probe.
ANY_HOST_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HostPolicy:
    """The hosts a request may name: (name, port) pairs; port None admits any port."""

    entries: frozenset[tuple[str, int | None]]
    any_host: bool = False

    def admits(self, host: str, port: int | None) -> bool:
        """True when ``host[:port]`` (normalised) is allowed."""
        return self.any_host or (host, None) in self.entries or (host, port) in self.entries


def split_host(raw: str) -> tuple[str, int | None]:
    """``name``, ``name:port``, ``[v6]:port`` as (lower-case name, port); ValueError if bad."""
    text = raw.strip().lower()
    if text.startswith("["):
        name, sep, rest = text.partition("]")
        name, rest = name + sep, rest.removeprefix(":")
        if not sep or (rest and not rest.isdigit()):
            raise ValueError(f"not a host[:port]: {raw!r}")
    elif text.count(":") > 1:  # a bare IPv6 address, as OCRQ_HOST may hold it
        name, rest = f"[{text}]", ""
    else:
        name, _, rest = text.partition(":")
    if not name or (rest and not rest.isdigit()):
        raise ValueError(f"not a host[:port]: {raw!r}")
    return name.rstrip("."), int(rest) if rest else None


def bracketed(address: str) -> str:
    """An IPv6 literal as it appears in a Host header ([::1]); anything else as it is."""
    try:
        return f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        return address


def host_policy(settings: Settings) -> HostPolicy:
    """OCRQ_ALLOWED_HOSTS as a policy; empty: the bind address and the localhost names.

    Bound to every interface, the bind address names no host: then an API with keys admits
    any host (a rebinding page cannot present a key), and an open API only localhost names,
    so an open API is never usable from the network without OCRQ_ALLOWED_HOSTS saying so.
    """
    listed = [part.strip() for part in settings.api.allowed_hosts.split(",") if part.strip()]
    if "*" in listed:
        return HostPolicy(frozenset(), any_host=True)
    if listed:
        return HostPolicy(frozenset(parse_entries(listed)))
    names = list(LOCAL_NAMES)
    if settings.api.host.strip() not in WILDCARD_BINDS:
        names.append(bracketed(settings.api.host.strip()))
    elif settings.api.api_keys.strip():
        return HostPolicy(frozenset(), any_host=True)
    return HostPolicy(frozenset((name.lower(), None) for name in names))


def parse_entries(listed: Iterable[str]) -> list[tuple[str, int | None]]:
    """Each ``name`` or ``name:port`` of OCRQ_ALLOWED_HOSTS; a malformed one names the setting."""
    try:
        return [split_host(item) for item in listed]
    except ValueError as e:
        raise ValueError(f"OCRQ_ALLOWED_HOSTS: {e}") from e


def origin_netloc(origin: str) -> tuple[str, int | None] | None:
    """An Origin header as (host, port), the scheme's default port left out; None if opaque."""
    try:
        parts = urlsplit(origin.strip())
        host, port = split_host(parts.netloc)
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    return host, None if port == DEFAULT_PORTS.get(parts.scheme.lower()) else port


def same_origin(origin: str, host: str, port: int | None) -> bool:
    """True when the Origin names the host (and port) the request was sent to."""
    found = origin_netloc(origin)
    if found is None:  # "null" (sandboxed frames, file://) or garbage: another site
        return False
    # The Host header leaves the scheme's default port out too; 80 and 443 both count.
    return found == (host, port) or (found[0] == host and {found[1], port} <= {None, 80, 443})


def check_request(policy: HostPolicy, method: str, path: str, headers: dict[bytes, bytes]) -> None:
    """Raise the catalogue error a request earns for its Host or Origin; None when it passes."""
    raw_host = headers.get(b"host")
    if raw_host is None:
        return  # HTTP/1.0 without Host: no browser sends that, so no page can be behind it
    try:
        host, port = split_host(raw_host.decode("latin-1"))
    except ValueError:
        raise OcrqError(ErrorCode.INVALID_REQUEST, "the Host header is malformed") from None
    if path not in ANY_HOST_PATHS and not policy.admits(host, port):
        raise OcrqError(
            ErrorCode.INVALID_REQUEST,
            f"host {host[:100]!r} is not served here: add it to OCRQ_ALLOWED_HOSTS",
        )
    origin = headers.get(b"origin")
    if method in STATE_CHANGING and origin is not None:
        if not same_origin(origin.decode("latin-1"), host, port):
            raise OcrqError(
                ErrorCode.FORBIDDEN, "cross-origin requests may not change anything here"
            )


def host_guard(settings: Settings) -> Callable[[ASGIApp], ASGIApp]:
    """A middleware factory: Host allow-list and same-origin check on every HTTP request."""
    policy = host_policy(settings)

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == ScopeType.HTTP:
                headers = dict(scope["headers"])
                check_request(policy, scope["method"], scope["path"], headers)
            await app(scope, receive, send)

        return middleware

    return wrap
