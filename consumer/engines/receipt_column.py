"""A receipt scanned on a sheet is read on its own column of the page, not on the whole sheet.

A till roll laid on a scanner's glass comes back as a page with a narrow strip of text
(readings.is_till_roll). Everything read after the first reading then works on that strip:
the page again as one block, lines the first reading missed, weak lines read again. On the
twelve held-out SROIE receipts scanned on A4 sheets, reading the strip took their
character errors from 784 to 445, in about the same time (BENCHMARKS.md, "Reading quality,
eighth pass"). The strip is cut out once, with a margin, and the words' boxes are moved
back onto the page at the end (on_page).
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from PIL import Image

from ocrq.consumer.layout.words import ReadWord, moved

SURE = 0.5  # words read at least this confidently mark the column (as is_till_roll does)
# The margin kept either side of the sure words, in their median heights: a line printed
# wider or fainter than the rest is still on the column. The column takes the sheet's whole
# height: cut to the sure words' height too, it lost faint footers ("Thank you / Please
# come again") that the first reading had not read (BENCHMARKS.md, "Reading quality,
# eighth pass").
MARGIN_LINES = 4.0

Origin = tuple[int, int]
Box = tuple[int, int, int, int]


def column_box(words: list[ReadWord], width: int, height: int) -> Box:
    """The page's text column: as wide as its sure words with a margin, as tall as the
    image (a footer or a shop's name printed faintly, which the first reading may have
    missed, is still the receipt's)."""
    sure = [w.box for w in words if w.confidence >= SURE] or [w.box for w in words]
    margin = MARGIN_LINES * median(b[3] - b[1] for b in sure)
    x0 = max(0, int(min(b[0] for b in sure) - margin))
    x1 = min(width, int(max(b[2] for b in sure) + margin) + 1)
    return (x0, 0, x1, height) if x0 < x1 else (0, 0, width, height)


def cut_column(path: str, words: list[ReadWord]) -> tuple[str, Box]:
    """The column cut out of the image at ``path``, written beside it (``<stem>-column.png``,
    resolution kept), and its box on that image."""
    with Image.open(path) as image:
        box = column_box(words, image.width, image.height)
        dpi = image.info.get("dpi")
        column = image.crop(box)
    target = Path(path).with_name(f"{Path(path).stem}-column.png")
    column.save(target, format="PNG", compress_level=1, **({"dpi": dpi} if dpi else {}))
    return str(target), box


def in_column(words: list[ReadWord], box: Box) -> list[ReadWord]:
    """The words that lie on the column, in its pixels (the others are left out)."""
    x0, y0, x1, y1 = box
    inside = [w for w in words if w.box[0] >= x0 and w.box[1] >= y0 and w.box[2] <= x1]
    return [moved(w, -x0, -y0) for w in inside if w.box[3] <= y1]


def on_page(words: list[ReadWord], origin: Origin) -> list[ReadWord]:
    """Words read on a column, in the pixels of the image it was cut from."""
    if origin == (0, 0):
        return words
    return [moved(w, origin[0], origin[1]) for w in words]
