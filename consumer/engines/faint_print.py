"""Faint print stretched to full contrast before a page is read again.

Thermal receipts fade to a light grey or blue; with a dark handwritten note or a bold stamp
on the same page, the threshold Tesseract picks from the page's grey levels separates those
from everything else and takes the faint print for paper (SROIE 314: 54 words read at 0.48,
the shop's name and every item line missing). Stretched so that the ink's typical grey
becomes black and the paper stays white, the same page read 117 words at 0.66. Only a weak
first reading of faint ink is read again this way (readings.best_reading keeps the reading
with more confidence-weighted characters): black print gains nothing from it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image

INK_BELOW_PAPER = 40  # grey levels darker than the paper for a pixel to be ink
# The ink's median grey level from which print is faint. Measured: faded thermal receipts
# 160-195, receipts and pages printed in black 0-120.
FAINT_INK = 128


def paper_level(grey: NDArray[np.uint8]) -> int:
    """The paper's grey level on a grey page: the most common one (a page is mostly paper)."""
    return int(np.argmax(np.bincount(grey.ravel(), minlength=256)))


def faint_ink_level(path: str) -> float | None:
    """The median grey level of the page's ink when it is faint, else None."""
    with Image.open(path) as image:
        grey = np.asarray(image.convert("L"))
    ink = grey[grey < paper_level(grey) - INK_BELOW_PAPER]
    if ink.size == 0:
        return None
    level = float(np.median(ink))
    return level if level >= FAINT_INK else None


def stretched(path: str, ink: float) -> str:
    """The page in grey with ``ink`` made black and the paper white, written beside it as
    ``<stem>-stretched.png`` (resolution kept)."""
    with Image.open(path) as image:
        dpi = image.info.get("dpi")
        grey = np.asarray(image.convert("L"))
    scaled = (grey.astype(np.float32) - ink) * 255.0 / max(paper_level(grey) - ink, 1.0)
    target = Path(path).with_name(f"{Path(path).stem}-stretched.png")
    Image.fromarray(np.clip(scaled, 0, 255).astype(np.uint8)).save(
        target, format="PNG", compress_level=1, **({"dpi": dpi} if dpi else {})
    )
    return str(target)
