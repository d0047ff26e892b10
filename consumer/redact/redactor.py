"""One job's redaction: pages masked as they are read, boxes placed once all are read.

Pages are masked before the worker reports them (the per-page results in Redis, the live
events), so the original text of a redacted job is never stored anywhere (strict mode). The
boxes need the words, which the engines keep beside the pages: they are placed at the end,
before the redacted PDF is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocrq.consumer.engines.base import EngineOutput
from ocrq.consumer.fields.lines import Line
from ocrq.consumer.redact.boxes import block_cover, line_redactions
from ocrq.consumer.redact.detect import Detector
from ocrq.consumer.redact.masking import mask_fields, mask_page, mask_segments
from ocrq.shared.redaction import kind_names, mask
from ocrq.shared.schemas import JobOptions, Page, Result
from ocrq.shared.settings import Settings


@dataclass
class Redactor:
    """The redact option of one job, applied."""

    detector: Detector
    kinds: list[str]
    keep_furniture: bool

    @classmethod
    def of(cls, options: JobOptions, settings: Settings) -> Redactor | None:
        """The job's redactor; None when it asked for no redaction."""
        if not options.redact:
            return None
        detector = Detector(options, settings.extract.redact_countries)
        return cls(detector, kind_names(options), options.keep_headers_footers)

    def mask_pages(self, pages: list[Page]) -> None:
        """Mask pages just read, before anything stores them."""
        for page in pages:
            mask_page(page, self.detector, self.keep_furniture)

    def mask_segments(self, outputs: list[EngineOutput]) -> None:
        """Mask the text several pages share, before the result is put together."""
        mask_segments([s for out in outputs for s in out.segments], self.detector)

    def place(self, result: Result, lines: list[Line]) -> None:
        """Each page's redactions (kind and boxes, never the text), and the result's count."""
        found = line_redactions(lines, self.detector)
        for page in result.pages:
            mine = found.get(page.number, [])
            page.redactions = mine + block_cover(page, mine, self.kinds)
        texts = [b.text for p in result.pages for b in p.blocks]
        texts += [p.markdown or "" for p in result.pages if not p.blocks]
        texts += [s.markdown for s in result.segments]
        result.redacted = sum(t.count(mask(k)) for t in texts for k in self.kinds)
        if result.fields is not None:
            mask_fields(result.fields, self.detector)

    def lines_by_page(self, lines: list[Line]) -> dict[int, list[Line]]:
        """The lines grouped by page, for the redacted PDF's text layer."""
        grouped: dict[int, list[Line]] = {}
        for line in lines:
            grouped.setdefault(line.page, []).append(line)
        return grouped
