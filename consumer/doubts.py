"""Pages whose text may be wrong say so: in the result, and at the top of their Markdown.

An OCR engine returns text for anything it is shown; a page in a script it has no model
for comes back as confident-looking garbage. So each page the engine read is checked
against what the engine says about it (its confidence, the script it detected) and gets a
plain-language warning, which the job's summary counts (``Result.doubtful_pages``).
"""

from __future__ import annotations

from ocrq.consumer.engines.base import PageImage
from ocrq.shared.render.markdown import NOTE, warning_notes
from ocrq.shared.schemas import Page

__all__ = ["NOTE", "page_warnings", "review_pages"]


def page_warnings(
    page: Page, reads_scripts: frozenset[str] | None, min_confidence: float
) -> list[str]:
    """Why this page's text may be wrong, as sentences a reader understands."""
    warnings = []
    unreadable = [s for s in page.scripts if reads_scripts is not None and s not in reads_scripts]
    if unreadable:
        readable = ", ".join(sorted(reads_scripts or ()))
        warnings.append(
            f"the page looks like {', '.join(unreadable)} script, which this engine cannot"
            f" read (it reads {readable}): its text is likely wrong; use the vLLM engine"
        )
    if page.confidence is not None and page.confidence < min_confidence:
        warnings.append(
            f"the engine's confidence is low ({page.confidence:.2f}, below"
            f" {min_confidence:.2f}): check this page's text against the document"
        )
    return warnings


def review_pages(
    pages: list[Page],
    images: list[PageImage],
    reads_scripts: frozenset[str] | None,
    min_confidence: float,
) -> None:
    """Stamp each engine page with its rotation and warnings; note them in its Markdown.

    The rotation is the rasteriser's turn plus any the engine made itself (Tesseract turns
    a page over when it reads far better that way: consumer/engines/readings.py).
    """
    rotations = {image.number: image.rotation for image in images}
    for page in pages:
        page.rotation = (rotations.get(page.number, 0) + page.rotation) % 360
        page.warnings = page_warnings(page, reads_scripts, min_confidence)
        if page.warnings and page.markdown is not None:
            notes = warning_notes(page.warnings)
            page.markdown = f"{notes}\n\n{page.markdown}" if page.markdown else notes
