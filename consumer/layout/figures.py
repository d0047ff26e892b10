"""Figure crops: each figure block's region as a PNG, named and linked from its block.

A page's figures are named ``p{page}-{k}.png`` (k from 1, in reading order); the block's
``image`` is that name and its text the Markdown link ``![figure k](images/p{page}-{k}.png)``.
At most ``MAX_FIGURES`` per page; a region under ``MIN_SIDE_PX`` on a side is no figure
worth keeping (a rule, a logo speck) and stays without an image.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
from collections.abc import Callable, Iterator

import pymupdf
from PIL import Image

from ocrq.shared.schemas import Block, Page

MAX_FIGURES = 32
MIN_SIDE_PX = 16


def figure_name(page: int, k: int) -> str:
    """The file name of figure ``k`` (1-based) of page ``page``."""
    return f"p{page}-{k}.png"


def _figures(page: Page) -> Iterator[tuple[int, Block]]:
    """The page's figure blocks worth cropping, numbered from 1, at most MAX_FIGURES."""
    k = 0
    for block in page.blocks:
        if block.label != "figure" or len(block.bbox_px) != 4:
            continue
        x0, y0, x1, y1 = block.bbox_px
        if x1 - x0 < MIN_SIDE_PX or y1 - y0 < MIN_SIDE_PX:
            continue
        k += 1
        if k > MAX_FIGURES:
            return
        yield k, block


def _crop_all(page: Page, crop: Callable[[Block], bytes]) -> dict[str, bytes]:
    files = {}
    for k, block in _figures(page):
        name = figure_name(page.number, k)
        files[name] = crop(block)
        block.image = name
        block.text = f"![figure {k}](images/{name})"
    return files


def crop_figures(image_path: str, page: Page) -> dict[str, bytes]:
    """Crop each figure block's bbox_px from the page image file; sets image and text.

    The image must be the one the blocks refer to (``page.width`` by ``page.height``, upright).
    """
    with Image.open(image_path) as image:
        image.load()

        def crop(block: Block) -> bytes:
            out = io.BytesIO()
            x0, y0, x1, y1 = block.bbox_px
            region = image.crop((x0, y0, x1, y1))
            if region.mode not in ("RGB", "L", "RGBA", "LA"):
                region = region.convert("RGB")
            region.save(out, format="PNG")
            return out.getvalue()

        return _crop_all(page, crop)


def crop_pdf_figures(path: str, index: int, dpi: int, page: Page) -> dict[str, bytes]:
    """Render each figure block's region of PDF page ``index`` (0-based) at ``dpi`` as PNG."""
    with pymupdf.open(path, filetype="pdf") as doc:
        pdf_page = doc.load_page(index)
        # Blocks are in the displayed page; clip wants the unrotated page's coordinates.
        width, height = pdf_page.rect.width, pdf_page.rect.height

        def crop(block: Block) -> bytes:
            x0, y0, x1, y1 = block.bbox
            shown = pymupdf.Rect(x0 * width, y0 * height, x1 * width, y1 * height)
            clip = shown * pdf_page.derotation_matrix
            pixmap = pdf_page.get_pixmap(clip=clip, dpi=dpi, alpha=False)
            return bytes(pixmap.tobytes("png"))

        return _crop_all(page, crop)
