"""Put a job's pages and segments together into the Result."""

from __future__ import annotations

from ocrq.consumer.engines.base import EngineOutput
from ocrq.shared.schemas import EngineInfo, Page, Result, Segment, Status, Timings, Usage


def merge_usage(outputs: list[EngineOutput]) -> Usage:
    """Sum the usage of every engine call."""
    usage = Usage()
    for out in outputs:
        usage.requests += out.usage.requests
        usage.prompt_tokens += out.usage.prompt_tokens
        usage.completion_tokens += out.usage.completion_tokens
    return usage


def document_markdown(pages: list[Page], segments: list[Segment]) -> str:
    """Markdown in page order: a page's own text, or once per segment at its first page."""
    by_first = {s.first_page: s for s in segments}
    parts: list[str] = []
    for page in pages:
        if page.markdown is not None:
            text = page.markdown
        elif page.number in by_first:
            text = by_first[page.number].markdown
        else:
            continue
        if text.strip():
            parts.append(text.strip())
    return "\n\n".join(parts) + ("\n" if parts else "")


def assemble(
    *,
    job_id: str,
    media_type: str,
    text_pages: list[Page],
    outputs: list[EngineOutput],
    engine: EngineInfo,
    timings: Timings,
) -> Result:
    """The Result of a finished job."""
    pages = sorted(
        [*text_pages, *(p for out in outputs for p in out.pages)], key=lambda p: p.number
    )
    segments = sorted((s for out in outputs for s in out.segments), key=lambda s: s.first_page)
    return Result(
        id=job_id,
        status=Status.DONE.value,
        media_type=media_type,
        page_count=len(pages),
        markdown=document_markdown(pages, segments),
        pages=pages,
        segments=segments,
        doubtful_pages=sum(1 for page in pages if page.warnings),
        engine=engine,
        timings=timings,
        usage=merge_usage(outputs),
    )
