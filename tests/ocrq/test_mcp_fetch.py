"""A tool's ``url`` gets the webhooks' address checks, on every redirect hop.

Every server here listens on loopback. In the tests that need a "public" address, the
address policy of ``ocrq.shared.egress`` is replaced: 127.0.0.2 stands for a public address
and anything else, 127.0.0.1 included, for a private one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.documents import png
from support.mcp_harness import mcp_session, text_of

from ocrq.mcp.fetch import fetch_url
from ocrq.shared.errors import ErrorCode, OcrqError

PUBLIC, PRIVATE = "127.0.0.2", "127.0.0.1"
DOCUMENT = png(30, 20)
LIMIT = 64 * 1024


def only_public_is_allowed(address: str) -> bool:
    """The test's address policy: True (blocked) for all but the stand-in public address."""
    return address != PUBLIC


@dataclass
class Site:
    """A loopback HTTP server: its base URL and the paths it was asked for."""

    base: str
    hits: list[str] = field(default_factory=list)


@contextmanager
def site(address: str, redirect_to: str = "") -> Iterator[Site]:
    """A server on ``address`` whose routes redirect, drip, or serve a PNG."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            name, _, rest = self.path.lstrip("/").partition("/")
            if name == "to":  # /to/<status>: a redirect to ``redirect_to``
                self.answer(int(rest), b"", location=redirect_to)
            elif name == "chain":  # /chain/<n>: n more redirects, then the document
                hops = int(rest)
                if hops:
                    self.answer(302, b"", location=f"/chain/{hops - 1}")
                else:
                    self.answer(200, DOCUMENT)
            elif name == "relative":
                self.answer(301, b"", location="../doc.png#fragment")
            elif name == "big":
                self.answer(200, b"\0" * (LIMIT + 1))
            elif name == "drip":
                self.drip()
            else:
                self.answer(200, DOCUMENT)

        def answer(self, status: int, body: bytes, location: str = "") -> None:
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def drip(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(10**6))
            self.end_headers()
            try:
                for _ in range(300):  # a byte every 0.1 s: each read is quick, the whole slow
                    self.wfile.write(b"\0")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((address, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Site(f"http://{address}:{server.server_address[1]}", hits)
    finally:
        server.shutdown()
        server.server_close()


async def fetch(url: str, timeout_s: float = 30) -> bytes:
    """``fetch_url`` as the MCP server calls it, with the test's address policy."""
    return await fetch_url(
        url, allow_private=False, max_bytes=LIMIT, timeout_s=timeout_s,
        blocked=only_public_is_allowed,
    )  # fmt: skip


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_from_an_allowed_server_to_a_refused_address_is_refused(
    status: int,
) -> None:
    with site(PRIVATE) as private, site(PUBLIC, redirect_to=f"{private.base}/secret") as public:
        assert await fetch(f"{public.base}/doc.png") == DOCUMENT  # the public server is fine
        with pytest.raises(OcrqError) as refused:
            await fetch(f"{public.base}/to/{status}")
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert refused.value.message == (
        f"{public.base}/to/{status} redirected to {private.base}/secret: 127.0.0.1 is a "
        "private, loopback or link-local address (OCRQ_MCP_ALLOW_PRIVATE_URLS=true allows it)"
    )
    assert private.hits == []  # never reached


async def test_relative_redirects_are_followed_and_each_hop_checked() -> None:
    with site(PUBLIC) as public:
        assert await fetch(f"{public.base}/relative/x") == DOCUMENT
        assert await fetch(f"{public.base}/chain/5") == DOCUMENT
        with pytest.raises(OcrqError, match=r"more than 5 redirects$") as looped:
            await fetch(f"{public.base}/chain/6")
    assert public.hits[:2] == ["/relative/x", "/doc.png"]
    assert looped.value.code is ErrorCode.INVALID_REQUEST and len(public.hits) == 2 + 6 + 6


@pytest.mark.parametrize("location", ["file:///etc/passwd", "gopher://127.0.0.2:70/x"])
async def test_a_redirect_to_another_scheme_is_refused(location: str) -> None:
    with site(PUBLIC, redirect_to=location) as public:
        with pytest.raises(OcrqError, match=r"only http\(s\) URLs are fetched$") as refused:
            await fetch(f"{public.base}/to/302")
    assert refused.value.code is ErrorCode.INVALID_REQUEST


async def test_a_body_over_the_document_limit_is_refused_not_cut() -> None:
    with site(PUBLIC) as public, pytest.raises(OcrqError, match=f"over {LIMIT} bytes$") as big:
        await fetch(f"{public.base}/big")
    assert big.value.code is ErrorCode.PAYLOAD_TOO_LARGE


async def test_a_dripping_server_ends_the_fetch_within_its_deadline() -> None:
    with site(PUBLIC) as public:
        started = time.monotonic()
        with pytest.raises(OcrqError) as slow:
            await fetch(f"{public.base}/drip", timeout_s=1)
        took = time.monotonic() - started
    assert slow.value.code is ErrorCode.TIMEOUT
    assert took < 1 + 2, took  # generous bound: the drip alone lasts 30 s


async def test_the_server_refuses_private_urls_unless_allowed(api_url: str, tmp_path: Path) -> None:
    with site(PRIVATE) as private:
        url = f"{private.base}/scan.png"
        async with mcp_session(api_url, tmp_path, OCRQ_MCP_ALLOW_URLS="true") as mcp:
            refused = await mcp.call_tool("submit_document", {"url": url})
        allow = {"OCRQ_MCP_ALLOW_URLS": "true", "OCRQ_MCP_ALLOW_PRIVATE_URLS": "true"}
        async with mcp_session(api_url, tmp_path, **allow) as mcp:
            fetched = await mcp.call_tool("submit_document", {"url": url})
    assert text_of(refused) == (
        f"invalid_request: {url}: 127.0.0.1 is a private, loopback or link-local address "
        "(OCRQ_MCP_ALLOW_PRIVATE_URLS=true allows it)"
    )
    assert private.hits == ["/scan.png"]  # only the allowed fetch reached it
    assert not fetched.is_error and fetched.structured_content["media_type"] == "image/png"
