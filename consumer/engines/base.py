"""What every OCR engine takes and returns."""

from __future__ import annotations

from typing import Protocol

import msgspec

from ocrq.shared.schemas import Page, Segment, Usage


class PageImage(msgspec.Struct, frozen=True, kw_only=True):
    """One rendered page on disk (under the job's /dev/shm folder)."""

    number: int  # 1-based page number in the document
    path: str  # PNG or JPEG file
    media_type: str  # image/png | image/jpeg
    width: int  # pixels
    height: int  # pixels
    rotation: int = 0  # degrees the rendering was turned (counter-clockwise) to stand upright


class Word(msgspec.Struct, frozen=True, kw_only=True):
    """A recognised word (or a line, where the engine gives no words) and its box.

    The box is in pixels of the page as recognised (upright, ``Page.width`` by ``height``);
    the searchable PDF places its invisible text there. Not part of the Result.
    """

    text: str
    box: tuple[float, float, float, float]


class EngineOutput(msgspec.Struct, kw_only=True):
    """What an engine made of one page group (the pages of one engine request).

    ``pages`` holds per-page results, one per input page (for a multi-page request these
    carry geometry and blocks only, their markdown stays None); ``segments`` holds text
    that spans several pages and must not be copied onto each page.
    """

    pages: list[Page]
    segments: list[Segment] = msgspec.field(default_factory=list)
    usage: Usage = msgspec.field(default_factory=Usage)
    words: dict[int, list[Word]] = msgspec.field(default_factory=dict)  # page number → words


class Engine(Protocol):
    """An OCR engine: vLLM over HTTP or the local CPU engine."""

    name: str
    model: str
    profile: str
    # The scripts (OSD names: "Latin", "Cyrillic", ...) the engine reads; a page detected in
    # another is flagged. None: the engine reads any script, or does not detect them.
    reads_scripts: frozenset[str] | None

    async def recognise(
        self,
        pages: list[PageImage],
        *,
        profile: str | None = None,
        languages: str | None = None,
        layout: bool = True,
    ) -> EngineOutput:
        """OCR one page group; raise OcrqError (transient or permanent code) on failure.

        ``profile`` names a model profile (vLLM), ``languages`` the job's languages (local
        engine); None means the engine's default. ``layout`` False skips the layout model
        (local engines: plain text blocks, much faster).  Engines do not retry: the worker owns
        retries and backoff.
        """
        ...

    async def warm_up(self) -> None:
        """Start what the engine runs locally (processes, models) before the first job."""
        ...

    async def probe(self) -> bool:
        """True when the engine is up and ready to answer (a cheap health check)."""
        ...

    async def aclose(self) -> None:
        """Release pools and clients."""
        ...
