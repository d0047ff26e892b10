"""Masking: every text of a page (its Markdown, blocks, table cells and HTML) with each value
of personal data replaced by its kind's mask, before the page is stored anywhere."""

from __future__ import annotations

from typing import Any

from ocrq.consumer.redact.detect import Detector
from ocrq.shared.redaction import mask
from ocrq.shared.render.markdown import page_markdown
from ocrq.shared.schemas import Fields, Page, Segment


def masked(text: str, detector: Detector) -> str:
    """The text with each span replaced by its mask."""
    for span in reversed(detector.find(text)):
        text = text[: span.start] + mask(span.kind) + text[span.end :]
    return text


def mask_page(page: Page, detector: Detector, keep_furniture: bool) -> None:
    """Mask the page's texts in place, its Markdown written again from its blocks (the
    result counts the masks at the end). A figure's crop could show what was masked: it is
    not kept."""
    for block in page.blocks:
        block.text = masked(block.text, detector)
        if block.table is not None:
            block.table.html = masked(block.table.html, detector)
            for cell in block.table.cells:
                cell.text = masked(cell.text, detector)
        if block.label == "figure":
            block.image, block.text = None, ""
    if page.markdown is not None and page.blocks:
        page.markdown = page_markdown(page, keep_furniture=keep_furniture)
    elif page.markdown is not None:  # an engine that gives text without blocks
        page.markdown = masked(page.markdown, detector)


def mask_segments(segments: list[Segment], detector: Detector) -> None:
    """Mask the text that several pages share (a multi-page engine request)."""
    for segment in segments:
        segment.markdown = masked(segment.markdown, detector)


def mask_value(value: Any, detector: Detector) -> Any:
    """A JSON value with every string in it masked."""
    if isinstance(value, str):
        return masked(value, detector)
    if isinstance(value, list):
        return [mask_value(v, detector) for v in value]
    if isinstance(value, dict):
        return {k: mask_value(v, detector) for k, v in value.items()}
    return value


def mask_fields(fields: Fields, detector: Detector) -> None:
    """Mask extracted values and the page text they were read from."""
    fields.values = mask_value(fields.values, detector)
    for source in fields.sources:
        source.value = mask_value(source.value, detector)
        source.text = masked(source.text, detector)
