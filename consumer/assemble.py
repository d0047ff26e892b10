"""Put a job's pages and segments together into the Result."""

from __future__ import annotations

from ocrq.consumer.engines.base import EngineOutput
from ocrq.consumer.layout.structure import compact_heading_levels
from ocrq.shared.render.markdown import joined_markdown, page_markdown
from ocrq.shared.schemas import EngineInfo, Page, Result, Status, Timings, Usage


def merge_usage(outputs: list[EngineOutput]) -> Usage:
    """Sum the usage of every engine call."""
    usage = Usage()
    for out in outputs:
        usage.requests += out.usage.requests
        usage.prompt_tokens += out.usage.prompt_tokens
        usage.completion_tokens += out.usage.completion_tokens
    return usage


def assemble(
    *,
    job_id: str,
    media_type: str,
    text_pages: list[Page],
    outputs: list[EngineOutput],
    engine: EngineInfo,
    timings: Timings,
    keep_furniture: bool = False,
) -> Result:
    """The Result of a finished job."""
    pages = sorted(
        [*text_pages, *(p for out in outputs for p in out.pages)], key=lambda p: p.number
    )
    segments = sorted((s for out in outputs for s in out.segments), key=lambda s: s.first_page)
    # Heading levels came page by page; over the document they are made consecutive, and
    # each page's Markdown is written again with them.
    compact_heading_levels(pages)
    for page in pages:
        if page.markdown is not None:
            page.markdown = page_markdown(page, keep_furniture=keep_furniture)
    return Result(
        id=job_id,
        status=Status.DONE.value,
        media_type=media_type,
        page_count=len(pages),
        markdown=joined_markdown(pages, segments),
        pages=pages,
        segments=segments,
        doubtful_pages=sum(1 for page in pages if page.warnings),
        engine=engine,
        timings=timings,
        usage=merge_usage(outputs),
    )
