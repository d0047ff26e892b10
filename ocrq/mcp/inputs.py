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

import msgspec

from ocrq.client import DEFAULT_URL, Source
from ocrq.mcp.fetch import PRIVATE_ENV, fetch_url
from ocrq.mcp.roots import ROOTS_ENV, read_under_roots, roots_from_env
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Result

DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # the producer's default OCRQ_MAX_DOCUMENT_BYTES
FETCH_TIMEOUT_S = 60.0  # the whole fetch: every redirect, lookup and byte
TRUE, FALSE = {"1", "true", "yes", "on"}, {"", "0", "false", "no", "off"}

PageRanges = list[tuple[int, int | None]]  # (first, last); last None: to the end


class InputError(OcrqError):
    """A bad tool argument or an unreadable document; ``str()`` is ``code: message``."""

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


@dataclass(frozen=True)
class McpConfig:
    """Where the producer is, with which key, which files tools may read, which URLs fetch."""

    url: str = DEFAULT_URL
    api_key: str | None = None
    allow_urls: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    allow_private_urls: bool = False  # loopback, private and link-local addresses too
    fetch_timeout_s: float = FETCH_TIMEOUT_S
    roots: tuple[Path, ...] = ()  # resolved folders a path may lie under; none: no path


def config_from_env(environ: dict[str, str] | None = None) -> McpConfig:
    """OCRQ_URL, OCRQ_API_KEY, OCRQ_MAX_DOCUMENT_BYTES and the OCRQ_MCP_* settings."""
    env = dict(os.environ) if environ is None else environ
    raw_max = env.get("OCRQ_MAX_DOCUMENT_BYTES") or str(DEFAULT_MAX_BYTES)
    if not raw_max.isdigit():
        raise ValueError(f"OCRQ_MAX_DOCUMENT_BYTES={raw_max!r} is not a number of bytes")
    return McpConfig(
        url=env.get("OCRQ_URL") or DEFAULT_URL,
        api_key=env.get("OCRQ_API_KEY") or None,
        allow_urls=flag(env, "OCRQ_MCP_ALLOW_URLS"),
        max_bytes=int(raw_max),
        allow_private_urls=flag(env, PRIVATE_ENV),
        roots=roots_from_env(env.get(ROOTS_ENV), Path.cwd()),
    )


def flag(env: dict[str, str], name: str) -> bool:
    """A true/false environment variable; unset or blank: false."""
    value = env.get(name, "").strip().lower()
    if value not in TRUE | FALSE:
        raise ValueError(f"{name}={value!r} is neither true nor false")
    return value in TRUE


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
        data = await asyncio.to_thread(read_under_roots, path, config.roots, config.max_bytes)
        return data, Path(path).name or None
    if url:
        return await fetch(url, config), PurePosixPath(urlsplit(url).path).name or None
    assert content_base64 is not None
    return decode_base64(content_base64), None


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
    return await fetch_url(
        url,
        allow_private=config.allow_private_urls,
        max_bytes=config.max_bytes,
        timeout_s=config.fetch_timeout_s,
    )


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
