"""The redacted PDF: every page as an image with the masked values burnt black, and an
invisible text layer of the words that were not masked.

No page keeps its own content: a born-digital page's text would still hold what was masked,
so it is rendered like a scan. The boxes come from Page.redactions (0..1 of the upright
page) and are mapped onto the page as it came, as the searchable PDF maps words.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
import os

import pymupdf
from PIL import Image, ImageDraw, ImageOps

from ocrq.consumer.fields.lines import Line
from ocrq.consumer.invisible_text import InvisibleFonts, Run, add_text_layer
from ocrq.consumer.redact.boxes import covered
from ocrq.consumer.searchable import (
    PDF,
    open_image,
    original_size,
    pixels_to_user_space,
    seek_frame,
    upright_to_original,
)
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Page

# A burnt box reaches past the words' own, for ink at their edges (a font's glyphs may
# overhang the box a text layer gives): a fifth of the line's height, at least 2 px.
PAD_PX, PAD_SHARE = 2.0, 0.2


def write_redacted_pdf(
    doc_path: str,
    media_type: str,
    pages: list[Page],
    lines: dict[int, list[Line]],
    dpi: int,
    out_path: str,
) -> int:
    """The redacted PDF of the pages read, saved to ``out_path``; its size (CPU-bound)."""
    try:
        with pymupdf.open() as out:
            fonts = InvisibleFonts(out)
            for page in sorted(pages, key=lambda p: p.number):
                image = burnt_page(doc_path, media_type, page, dpi)
                target = out.new_page(width=image.width * 72 / dpi, height=image.height * 72 / dpi)
                target.insert_image(target.rect, stream=png_bytes(image))
                runs = unmasked_runs(page, lines.get(page.number, []))
                add_text_layer(target, runs, pixels_to_user_space(page, target), fonts)
            fonts.finish()
            out.save(out_path, garbage=1, deflate=True, deflate_images=True)
    except OcrqError:
        raise
    except Exception as e:  # MuPDF and Pillow raise many unrelated types on damaged input
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the redacted PDF cannot be built") from e
    return os.path.getsize(out_path)


def burnt_page(doc_path: str, media_type: str, page: Page, dpi: int) -> Image.Image:
    """The page as it came (not turned upright), its redactions filled black."""
    image = page_image(doc_path, media_type, page.number, dpi)
    width, height = original_size(page)
    sx, sy = image.width / max(width, 1), image.height / max(height, 1)
    turn = upright_to_original(page)
    draw = ImageDraw.Draw(image)
    for redaction in page.redactions:
        for x0, y0, x1, y1 in redaction.boxes:
            upright = pymupdf.Rect(
                x0 * page.width, y0 * page.height, x1 * page.width, y1 * page.height
            )
            r = upright * turn
            pad = max(PAD_PX, PAD_SHARE * min(r.width * sx, r.height * sy))
            box = (r.x0 * sx - pad, r.y0 * sy - pad, r.x1 * sx + pad, r.y1 * sy + pad)
            draw.rectangle(box, fill="black")
    return image


def page_image(doc_path: str, media_type: str, number: int, dpi: int) -> Image.Image:
    """Page ``number`` (1-based) as an RGB image, as the document shows it."""
    if media_type == PDF:
        with pymupdf.open(doc_path, filetype="pdf") as doc:
            pixmap = doc[number - 1].get_pixmap(dpi=dpi)
            return Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)
    with open_image(doc_path) as source:
        seek_frame(source, number - 1)
        frame = ImageOps.exif_transpose(source) if number == 1 else source.copy()
        return frame.convert("RGB")


def png_bytes(image: Image.Image) -> bytes:
    """The image as PNG."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()


def unmasked_runs(page: Page, lines: list[Line]) -> list[Run]:
    """The words of the page that no redaction covers, in pixels of the upright page."""
    runs: list[Run] = []
    for line in lines:
        for word in line.words:
            if covered(word.box, page.redactions):
                continue
            x0, y0, x1, y1 = word.box
            runs.append(
                (word.text, (x0 * page.width, y0 * page.height, x1 * page.width, y1 * page.height))
            )
    return runs
