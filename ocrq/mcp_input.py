"""What the MCP tools take in and give back: documents (path, URL, base64) and page selections.

Nothing here imports the MCP SDK: a failure is an ``InputError`` carrying the API's catalogue
code, which the server reports as a tool error, as it does the API's own errors.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import httpx
import msgspec

from ocrq.client import DEFAULT_URL, Source, http_timeout
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Result

DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # the producer's default OCRQ_MAX_DOCUMENT_BYTES
FETCH_TIMEOUT_S = 60.0
MAX_REDIRECTS = 5
TRUE, FALSE = {"1", "true", "yes", "on"}, {"", "0", "false", "no", "off"}

PageRanges = list[tuple[int, int | None]]  # (first, last); last None: to the end


class InputError(OcrqError):
    """A bad tool argument or an unreadable document; ``str()`` is ``code: message``."""

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


@dataclass(frozen=True)
class McpConfig:
    """Where the producer is, with which key, and whether tools may fetch URLs."""

    url: str = DEFAULT_URL
    api_key: str | None = None
    allow_urls: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES


def config_from_env(environ: dict[str, str] | None = None) -> McpConfig:
    """OCRQ_URL, OCRQ_API_KEY, OCRQ_MCP_ALLOW_URLS and OCRQ_MAX_DOCUMENT_BYTES."""
    env = dict(os.environ) if environ is None else environ
    allow = env.get("OCRQ_MCP_ALLOW_URLS", "").strip().lower()
    if allow not in TRUE | FALSE:
        raise ValueError(f"OCRQ_MCP_ALLOW_URLS={allow!r} is neither true nor false")
    raw_max = env.get("OCRQ_MAX_DOCUMENT_BYTES") or str(DEFAULT_MAX_BYTES)
    if not raw_max.isdigit():
        raise ValueError(f"OCRQ_MAX_DOCUMENT_BYTES={raw_max!r} is not a number of bytes")
    return McpConfig(
        url=env.get("OCRQ_URL") or DEFAULT_URL,
        api_key=env.get("OCRQ_API_KEY") or None,
        allow_urls=allow in TRUE,
        max_bytes=int(raw_max),
    )


async def load_document(
    config: McpConfig, path: str | None, url: str | None, content_base64: str | None
) -> tuple[Source, str | None]:
    """The one document given (a path, a URL or base64) and a file name for it."""
    choices = {"path": path, "url": url, "content_base64": content_base64}
    given = [name for name, value in choices.items() if value]
    if len(given) != 1:
        raise InputError(
            ErrorCode.INVALID_REQUEST,
            f"give exactly one of path, url or content_base64 (got {', '.join(given) or 'none'})",
        )
    if path:
        local = await asyncio.to_thread(local_file, path)
        return local, local.name
    if url:
        return await fetch(url, config), PurePosixPath(urlsplit(url).path).name or None
    assert content_base64 is not None
    return decode_base64(content_base64), None


def local_file(path: str) -> Path:
    """A path that names a readable file."""
    local = Path(path).expanduser()
    if not local.is_file():
        raise InputError(ErrorCode.INVALID_REQUEST, f"{path}: no such file")
    return local


def decode_base64(text: str) -> bytes:
    """Standard or URL-safe base64, as a data: URI or not, line breaks allowed (as the API)."""
    if text.startswith("data:"):
        text = text.partition(",")[2]
    compact = "".join(text.split()).translate(str.maketrans("-_", "+/"))
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as e:
        raise InputError(ErrorCode.INVALID_BASE64, f"content_base64 is not base64: {e}") from e


async def fetch(url: str, config: McpConfig) -> bytes:
    """GET an http(s) URL, when OCRQ_MCP_ALLOW_URLS allows it; at most ``max_bytes``."""
    if not config.allow_urls:
        raise InputError(
            ErrorCode.INVALID_REQUEST,
            "fetching URLs is off (OCRQ_MCP_ALLOW_URLS=true enables it): send path or base64",
        )
    if urlsplit(url).scheme not in ("http", "https"):
        raise InputError(ErrorCode.INVALID_REQUEST, f"{url}: only http(s) URLs are fetched")
    body = bytearray()
    try:
        async with (
            httpx.AsyncClient(
                follow_redirects=True, max_redirects=MAX_REDIRECTS,
                timeout=http_timeout(FETCH_TIMEOUT_S),
            ) as http,
            http.stream("GET", url) as response,
        ):  # fmt: skip
            if not response.is_success:
                raise InputError(ErrorCode.INVALID_REQUEST, f"{url}: HTTP {response.status_code}")
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > config.max_bytes:  # stop reading: never hold more than the limit
                    raise InputError(
                        ErrorCode.PAYLOAD_TOO_LARGE, f"{url}: over {config.max_bytes} bytes"
                    )
    except httpx.HTTPError as e:
        raise InputError(ErrorCode.INVALID_REQUEST, f"{url}: {type(e).__name__}: {e}") from e
    return bytes(body)


def parse_pages(spec: str | None) -> PageRanges | None:
    """``"1-3,5,8-"`` as ranges of page numbers (1-based); None or blank: every page."""
    if spec is None or not spec.strip():
        return None
    ranges: PageRanges = []
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = (int(last) if last.strip() else None) if dash else low
        except ValueError:
            raise InputError(
                ErrorCode.INVALID_REQUEST, f"pages {spec!r}: expected numbers and ranges like 1-3,5"
            ) from None
        if low < 1 or (high is not None and high < low):
            raise InputError(
                ErrorCode.INVALID_REQUEST, f"pages {spec!r}: {part.strip()!r} is empty"
            )
        ranges.append((low, high))
    return ranges


def wanted(number: int, ranges: PageRanges) -> bool:
    """Whether a page number falls in one of the ranges."""
    return any(low <= number and (high is None or number <= high) for low, high in ranges)


def select_pages(result: Result, ranges: PageRanges, spec: str) -> Result:
    """The result cut to the wanted pages (a segment spanning several pages comes whole)."""
    pages = [page for page in result.pages if wanted(page.number, ranges)]
    if not pages:
        raise InputError(
            ErrorCode.INVALID_REQUEST, f"pages {spec!r}: the document has {result.page_count} pages"
        )
    numbers = {page.number for page in pages}
    kept = [s for s in result.segments if any(s.first_page <= n <= s.last_page for n in numbers)]
    parts: list[str] = []
    shown: set[int] = set()
    for page in pages:
        text = page.markdown
        if text is None:  # read as part of a segment: its text once, at its first wanted page
            spans = [i for i, s in enumerate(kept) if s.first_page <= page.number <= s.last_page]
            text = "" if not spans or spans[0] in shown else kept[spans[0]].markdown
            shown.update(spans[:1])
        if text.strip():
            parts.append(text.strip())
    markdown = "\n\n".join(parts) + ("\n" if parts else "")
    return msgspec.structs.replace(result, pages=pages, segments=kept, markdown=markdown)
