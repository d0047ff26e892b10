"""The searchable PDF: the document's pages with an invisible text layer at the words' boxes.

What OCRmyPDF gives, for every engine: a PDF source keeps its pages as they were (a page read
from its own text layer gets nothing added), an image becomes one PDF page per image page,
and every OCR'd page gets each recognised word as an invisible run (render mode 3) stretched
over the word's box, so that selecting and searching work in any viewer.

The runs are written by consumer/invisible_text.py; this module places them: from the
upright page image the engine read to the page as it came (Page.rotation), then through the
PDF page's own transform (its /Rotate, its crop box), at the render's true scale.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import io
import os
import struct
import warnings
from collections.abc import Iterator
from typing import Any, Protocol, TypeVar

import pymupdf
from PIL import Image, ImageOps

from ocrq.consumer.engines.base import Word
from ocrq.consumer.invisible_text import Box, InvisibleFonts, Run, add_text_layer
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import Page

PDF = "application/pdf"
T = TypeVar("T")
Made = TypeVar("Made", covariant=True)


class Output(Protocol[Made]):
    """What becomes of the finished PDF: its bytes, or a file (with MuPDF's save options)."""

    def __call__(self, doc: pymupdf.Document, **options: bool | int) -> Made: ...


_MAX_PAGE_PT = 14400.0  # the largest page PDF readers accept (200 inches)
_IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "TIFF", "BMP")  # as consumer/raster.py opens
# EXIF orientations a counter-clockwise turn undoes; mirrored ones are re-encoded.
_EXIF_TURNS = {1: 0, 3: 180, 6: 270, 8: 90}
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_COLOURS = {0: 1, 2: 3, 3: 1}  # colour type → components; alpha types take MuPDF's route


def build_searchable_pdf(
    doc_path: str, media_type: str, pages: list[Page], words: dict[int, list[Word]], dpi: int
) -> bytes:
    """The searchable PDF of the pages read (in page order); CPU-bound, run it off the loop."""
    return _searchable(doc_path, media_type, pages, words, dpi, _as_bytes)


def write_searchable_pdf(
    doc_path: str,
    media_type: str,
    pages: list[Page],
    words: dict[int, list[Word]],
    dpi: int,
    out_path: str,
) -> int:
    """build_searchable_pdf saved to ``out_path`` instead: a long document's PDF is never
    held whole in memory (nor sent back from the render process); its size."""
    return _searchable(doc_path, media_type, pages, words, dpi, _saved_to(out_path))


def _searchable(
    doc_path: str,
    media_type: str,
    pages: list[Page],
    words: dict[int, list[Word]],
    dpi: int,
    output: Output[T],
) -> T:
    if not pages:
        raise OcrqError(ErrorCode.INTERNAL, "a searchable PDF needs at least one page")
    read = sorted({page.number: page for page in pages}.values(), key=lambda page: page.number)
    try:
        if media_type == PDF:
            return _from_pdf(doc_path, read, words, output)
        return _from_image(doc_path, read, words, dpi, output)
    except OcrqError:
        raise
    except Exception as e:  # MuPDF and Pillow raise many unrelated types on damaged input
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the searchable PDF cannot be built") from e
    finally:
        pymupdf.TOOLS.store_shrink(100)  # MuPDF's image cache outlives the document


def _as_bytes(doc: pymupdf.Document, **options: bool | int) -> bytes:
    return bytes(doc.tobytes(**options))


def _saved_to(path: str) -> Output[int]:
    def save(doc: pymupdf.Document, **options: bool | int) -> int:
        doc.save(path, **options)
        return os.path.getsize(path)

    return save


# --- what each page says, and where ----------------------------------------------------


def page_runs(page: Page, words: list[Word] | None) -> list[Run]:
    """The page's text runs: its words, else each block's lines spread over the block's box."""
    found = [(word.text, word.box) for word in words] if words is not None else _block_lines(page)
    runs = []
    for text, box in found:
        clean = " ".join(text.split())
        clipped = _clip(box, page.width, page.height)
        if clean and clipped:
            runs.append((clean, clipped))
    return runs


def _block_lines(page: Page) -> list[Run]:
    lines: list[Run] = []
    for block in page.blocks:
        if block.label == "figure":  # its text is an image link, not words on the page
            continue
        if block.table is not None and block.table.cells:
            for cell in block.table.cells:
                if len(cell.bbox) == 4:
                    x0, y0, x1, y1 = cell.bbox
                    box = (x0 * page.width, y0 * page.height, x1 * page.width, y1 * page.height)
                    lines.extend(_spread(cell.text, box))
        elif len(block.bbox_px) == 4:
            x0, y0, x1, y1 = block.bbox_px
            lines.extend(_spread(block.text, (x0, y0, x1, y1)))
    return lines


def _spread(text: str, box: Box) -> Iterator[Run]:
    """Each non-empty line of ``text`` in its share of the box's height, top to bottom."""
    rows = [line for line in text.splitlines() if line.strip()]
    x0, y0, x1, y1 = box
    step = (y1 - y0) / max(len(rows), 1)
    for index, line in enumerate(rows):
        yield line, (x0, y0 + index * step, x1, y0 + (index + 1) * step)


def _clip(box: Box, width: int, height: int) -> Box | None:
    """The box cut to the page; None when nothing of it is left."""
    x0, y0 = max(box[0], 0.0), max(box[1], 0.0)
    x1, y1 = min(box[2], float(width)), min(box[3], float(height))
    return (x0, y0, x1, y1) if x1 - x0 >= 0.5 and y1 - y0 >= 0.5 else None


def upright_to_original(page: Page) -> pymupdf.Matrix:
    """Pixels of the upright image (what the engine read) to pixels of the page as it came."""
    # The page image was turned counter-clockwise by page.rotation; this turns it back.
    width, height = original_size(page)
    return {
        90: pymupdf.Matrix(0, 1, -1, 0, width, 0),
        180: pymupdf.Matrix(-1, 0, 0, -1, width, height),
        270: pymupdf.Matrix(0, -1, 1, 0, 0, height),
    }.get(page.rotation % 360, pymupdf.Matrix(1, 1))


def original_size(page: Page) -> tuple[int, int]:
    """The page's pixel size as it came, before it was turned upright."""
    sideways = page.rotation % 180 == 90
    return (page.height, page.width) if sideways else (page.width, page.height)


def pixels_to_user_space(page: Page, target: pymupdf.Page) -> pymupdf.Matrix:
    """Upright-image pixels to the target page's PDF user space (rotation, crop box, scale)."""
    width, height = original_size(page)
    rect = target.rect  # the page as displayed, which is what was rendered
    scale = pymupdf.Matrix(rect.width / width, rect.height / height)
    # transformation_matrix maps PDF space to MuPDF's; its inverse goes back.
    to_display = upright_to_original(page) * scale
    return pymupdf.Matrix(to_display * target.derotation_matrix * ~target.transformation_matrix)


def _add_layer(
    target: pymupdf.Page, page: Page, words: dict[int, list[Word]], fonts: InvisibleFonts
) -> None:
    runs = page_runs(page, words.get(page.number))
    add_text_layer(target, runs, pixels_to_user_space(page, target), fonts)


# --- PDF sources -----------------------------------------------------------------------


def _from_pdf(path: str, pages: list[Page], words: dict[int, list[Word]], output: Output[T]) -> T:
    """The PDF's read pages as they were, the OCR'd ones with their text layer."""
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as e:  # MuPDF raises several unrelated types for unreadable input
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the PDF cannot be opened") from e
    with doc:
        if doc.needs_pass:
            raise OcrqError(ErrorCode.ENCRYPTED_DOCUMENT, "the PDF needs a password to open")
        missing = [page.number for page in pages if not 1 <= page.number <= doc.page_count]
        if missing:
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, f"the PDF has no page {missing[0]}")
        doc.select([page.number - 1 for page in pages])  # the rest is dropped when saved
        fonts = InvisibleFonts(doc)
        for index, page in enumerate(pages):
            if page.source != "text_layer":  # a born-digital page is searchable already
                _add_layer(doc[index], page, words, fonts)
        fonts.finish()
        # Only this layer's streams are new (and deflated): the pages' own stay as they were.
        return output(doc, garbage=1)


# --- image sources ---------------------------------------------------------------------


def _from_image(
    path: str, pages: list[Page], words: dict[int, list[Word]], dpi: int, output: Output[T]
) -> T:
    """One PDF page per image page read, holding the image and its text layer."""
    image = open_image(path)
    with image, pymupdf.open() as doc:
        fonts = InvisibleFonts(doc)
        for page in pages:
            seek_frame(image, page.number - 1)
            target = _image_page(doc, path, image, dpi)
            _add_layer(target, page, words, fonts)
        fonts.finish()
        return output(doc, garbage=1, deflate=True, deflate_images=True)


def open_image(path: str) -> Image.Image:
    """The upload's image (the rasteriser has held it to the job's pixel limit already)."""
    try:
        with warnings.catch_warnings():
            # The rasteriser has already held the image to the job's pixel limit.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return Image.open(path, formats=_IMAGE_FORMATS)
    except Exception as e:  # Pillow's parsers raise many types on malformed headers
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the image cannot be read") from e


def seek_frame(image: Image.Image, frame: int) -> None:
    """Go to page ``frame`` (0-based) of a multi-page image; corrupt_document past its end."""
    try:
        image.seek(frame)
    except EOFError as e:
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, f"the image has no page {frame + 1}") from e


def _image_page(doc: pymupdf.Document, path: str, image: Image.Image, dpi: int) -> pymupdf.Page:
    """A new page sized from the image's pixels at its resolution, holding the image."""
    first = image.tell() == 0 and not _has_frames(image)
    # A PNG's data is copied as it is; asking Pillow for its EXIF would decode it all.
    png = _png_image(doc, path) if first and image.format == "PNG" else None
    orientation = 1 if png or not first else image.getexif().get(0x0112, 1)
    sideways = orientation in (5, 6, 7, 8)
    width, height = image.size[::-1] if sideways else image.size
    x_res, y_res = _resolution(image, dpi)
    if sideways:
        x_res, y_res = y_res, x_res
    scale = min(1.0, _MAX_PAGE_PT / max(width * 72 / x_res, height * 72 / y_res))
    target = doc.new_page(width=width * 72 / x_res * scale, height=height * 72 / y_res * scale)
    turn = _EXIF_TURNS.get(orientation)
    if png:
        target.insert_image(target.rect, xref=png, keep_proportion=False)
    elif first and image.format == "JPEG" and turn is not None:
        # MuPDF embeds a JPEG's bytes as they are; the turn undoes its EXIF orientation.
        target.insert_image(target.rect, filename=path, rotate=turn, keep_proportion=False)
    else:
        xref = target.insert_image(target.rect, stream=_upright_png(image), keep_proportion=False)
        _compress_image(doc, xref)
    return target


def _resolution(image: Image.Image, dpi: int) -> tuple[float, float]:
    """The image's own pixels per inch, else the job's dpi."""
    found: Any = image.info.get("dpi")
    try:
        x_res, y_res = float(found[0]), float(found[1])
    except (TypeError, ValueError, IndexError):  # absent or odd metadata: the job's dpi
        return float(dpi), float(dpi)
    return (x_res, y_res) if x_res > 1 and y_res > 1 else (float(dpi), float(dpi))


def _has_frames(image: Image.Image) -> bool:
    return bool(getattr(image, "is_animated", False))  # an APNG: its first frame only


def _upright_png(image: Image.Image) -> bytes:
    """The current frame, EXIF-upright, as PNG (MuPDF reads no WebP, nor TIFF frames)."""
    frame = ImageOps.exif_transpose(image) if image.tell() == 0 else image.copy()
    if frame.mode not in ("1", "L", "LA", "RGB", "RGBA"):
        frame = frame.convert("RGBA" if "A" in frame.getbands() else "RGB")
    buffer = io.BytesIO()
    frame.save(buffer, format="PNG", compress_level=1)
    return bytes(buffer.getvalue())


def _png_image(doc: pymupdf.Document, path: str) -> int | None:
    """An image object holding the PNG's data as it is (PDF reads PNG's predictors).

    None for a PNG that needs decoding: interlaced, transparent, animated or turned by EXIF.
    """
    with open(path, "rb") as file:
        data = file.read()
    if not data.startswith(_PNG_SIGNATURE):
        return None
    header, palette, parts, position = b"", b"", [], len(_PNG_SIGNATURE)
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind in (b"tRNS", b"acTL", b"eXIf"):  # transparency, animation, orientation
            return None
        header = body if kind == b"IHDR" else header
        palette = body if kind == b"PLTE" else palette
        if kind == b"IDAT":
            parts.append(body)
    if len(header) != 13:
        return None
    width, height, depth, colour, _, _, interlaced = struct.unpack(">IIBBBBB", header)
    if interlaced or colour not in _PNG_COLOURS or (colour == 3 and not palette):
        return None
    space = {0: "/DeviceGray", 2: "/DeviceRGB"}.get(colour)
    space = space or f"[/Indexed/DeviceRGB {len(palette) // 3 - 1} <{palette.hex()}>]"
    xref = int(doc.get_new_xref())
    doc.update_object(
        xref,
        f"<</Type/XObject/Subtype/Image/Width {width}/Height {height}/ColorSpace {space}"
        f"/BitsPerComponent {depth}>>",
    )
    doc.update_stream(xref, b"".join(parts), compress=False)
    doc.xref_set_key(xref, "Filter", "/FlateDecode")
    columns = f"/Colors {_PNG_COLOURS[colour]}/BitsPerComponent {depth}/Columns {width}"
    doc.xref_set_key(xref, "DecodeParms", f"<</Predictor 15{columns}>>")
    return xref


def _compress_image(doc: pymupdf.Document, xref: int) -> None:
    """Deflate an image MuPDF stored raw now, so a long TIFF never sits decoded in memory."""
    if doc.xref_get_key(xref, "Filter")[0] == "null":
        doc.update_stream(xref, doc.xref_stream_raw(xref), compress=True)
