"""Where each masked value was on its page: the boxes of its words, burnt into the PDF.

Values are found again in the page's lines of words (consumer/fields/lines.py), which carry
boxes. A block whose text holds more masks than boxes were found inside it (a value split
over lines, an engine without word boxes) is covered whole: the PDF must not show a value
the text hid.
"""

from __future__ import annotations

from ocrq.consumer.fields.keyvalue import words_box
from ocrq.consumer.fields.lines import Box, Line
from ocrq.consumer.layout.rects import centre_inside
from ocrq.consumer.redact.detect import Detector
from ocrq.shared.redaction import mask
from ocrq.shared.schemas import Page, Redaction


def line_redactions(lines: list[Line], detector: Detector) -> dict[int, list[Redaction]]:
    """Each page's values found in its lines, with the box of their words."""
    found: dict[int, list[Redaction]] = {}
    for line in lines:
        for span in detector.find(line.text):
            [box] = words_box(line, span.start, span.end)
            found.setdefault(line.page, []).append(Redaction(kind=span.kind, boxes=[rounded(box)]))
    return found


def rounded(box: Box) -> list[float]:
    """A box as the Result writes it."""
    return [round(c, 4) for c in box]


def block_cover(page: Page, redactions: list[Redaction], kinds: list[str]) -> list[Redaction]:
    """Redactions for the blocks that hold more masks than boxes were found in them."""
    extra = []
    for block in page.blocks:
        if len(block.bbox) != 4:
            continue
        masks = sum(block.text.count(mask(kind)) for kind in kinds)
        inside = sum(1 for r in redactions for b in r.boxes if centre_inside(b, block.bbox))
        if masks > inside:
            extra.append(Redaction(kind="block", boxes=[list(block.bbox)]))
    return extra


def covered(box: Box, redactions: list[Redaction]) -> bool:
    """Whether a word's box (0..1) overlaps a redaction: its text leaves the PDF's layer."""
    for redaction in redactions:
        for x0, y0, x1, y1 in redaction.boxes:
            if box[0] < x1 and box[2] > x0 and box[1] < y1 and box[3] > y0:
                return True
    return False
