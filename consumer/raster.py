"""Turn uploaded documents into page images on disk (PDF pages via PyMuPDF, images via Pillow).

The sync functions are module-level and picklable: the worker runs them in a process pool,
because rendering is CPU-bound and PyMuPDF is not thread-safe. ``Rasteriser`` is the async
facade over such a pool.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import math
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pymupdf
from PIL import Image, ImageOps

from ocrq.consumer.engines.base import PageImage, Word
from ocrq.consumer.fields.lines import Line
from ocrq.consumer.layout.figures import crop_figures, crop_pdf_figures
from ocrq.consumer.orientation import turn_upright
from ocrq.consumer.pool import BrokenProcessPool, PoolClosed, RecyclingPool
from ocrq.consumer.redact.pdf import write_redacted_pdf
from ocrq.consumer.searchable import write_searchable_pdf
from ocrq.consumer.textlayer import extract_text_page
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import figure_file
from ocrq.shared.schemas import Page

PDF = "application/pdf"
RENDER_TIMEOUT_S = 120.0
# JPEG and PNG uploads are passed through untouched when small enough, upright, opaque and
# in a colour model every engine reads; anything else is re-encoded as PNG. Re-encoding a
# one-page PNG scan cost a lone job ~50 ms of its ~60 ms of rendering (BENCHMARKS.md).
_PASSTHROUGH_MODES = frozenset({"L", "RGB"})
_PASSTHROUGH_AS = {"JPEG": ("jpg", "image/jpeg"), "PNG": ("png", "image/png")}
_END_MARKS = {"jpg": b"\xff\xd9", "png": b"IEND\xaeB`\x82"}  # the last bytes of the image

# Formats Pillow may open: the uploads the producer accepts, never EPS or other plugins.
_IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "TIFF", "BMP")
_INDIRECT_REF = re.compile(r"(\d+)\s+\d+\s+R")

T = TypeVar("T")


def page_file(out_dir: str, number: int, suffix: str = "png") -> str:
    """The path of page ``number`` (1-based) in ``out_dir``: page-0001.png, …"""
    return str(Path(out_dir) / f"page-{number:04d}.{suffix}")


# --- PDF ---------------------------------------------------------------------------------


def _open_pdf(path: str) -> pymupdf.Document:
    """Open a PDF, mapping parse failures and passwords to catalogue codes."""
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as e:  # MuPDF raises several unrelated types for unreadable input
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the PDF cannot be opened") from e
    if doc.needs_pass:
        doc.close()
        raise OcrqError(ErrorCode.ENCRYPTED_DOCUMENT, "the PDF needs a password to open")
    return doc


def _page_objects_missing(doc: pymupdf.Document) -> bool:
    """True when a page of a repaired PDF points at objects that are not in the file.

    MuPDF repairs a truncated file silently and renders its lost pages blank; a page whose
    dictionary or content streams are gone means the upload was cut, not that it is empty.
    """
    for index in range(doc.page_count):
        xref = doc.page_xref(index)
        if doc.xref_get_key(xref, "Type") != ("name", "/Page"):
            return True
        _, contents = doc.xref_get_key(xref, "Contents")
        for ref in _INDIRECT_REF.findall(contents):
            if doc.xref_object(int(ref)) == "null":
                return True
    return False


def _pdf_page_count(path: str) -> int:
    doc = _open_pdf(path)
    try:
        count = doc.page_count
        if count and doc.is_repaired and _page_objects_missing(doc):
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the PDF is truncated or damaged")
        return int(count)
    except OcrqError:
        raise
    except Exception as e:
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the PDF page tree cannot be read") from e
    finally:
        doc.close()


def _fitting_zoom(page_rect: pymupdf.Rect, dpi: int, max_pixels: int) -> float:
    """The zoom for ``dpi``, lowered so the rendered page holds at most max_pixels."""
    zoom = dpi / 72.0
    area_pt = max(page_rect.width * page_rect.height, 1.0)
    if area_pt * zoom * zoom > max_pixels:
        zoom = math.sqrt(max_pixels / area_pt)
    # Pixel edges round outwards: step down until the rounded size fits too.
    while zoom > 0.01 and _pixel_area(page_rect, zoom) > max_pixels:
        zoom *= 0.995
    return zoom


def _pixel_area(page_rect: pymupdf.Rect, zoom: float) -> int:
    box = (page_rect * pymupdf.Matrix(zoom, zoom)).irect
    return int(box.width) * int(box.height)


def render_pdf_page(path: str, index: int, dpi: int, out_dir: str, max_pixels: int) -> PageImage:
    """Render page ``index`` (0-based) of the PDF at ``path`` to a PNG in out_dir.

    The document is reopened per call so a long PDF is never held whole in memory; the dpi
    is lowered for pages whose render would exceed max_pixels.
    """
    doc = _open_pdf(path)
    try:
        if not 0 <= index < doc.page_count:
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, f"the PDF has no page {index + 1}")
        page = doc.load_page(index)
        zoom = _fitting_zoom(page.rect, dpi, max_pixels)
        pixmap = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        # The PNG says its true resolution: Tesseract sizes its layout analysis by it, and
        # read a 150 DPI page labelled 96 DPI measurably worse (BENCHMARKS.md).
        resolution = max(1, round(72 * zoom))
        target = page_file(out_dir, index + 1)
        _save_png(pixmap, target, resolution)
        return PageImage(
            number=index + 1,
            path=target,
            media_type="image/png",
            width=pixmap.width,
            height=pixmap.height,
        )
    except OcrqError:
        raise
    except Exception as e:
        message = f"page {index + 1} of the PDF cannot be rendered"
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, message) from e
    finally:
        doc.close()
        # MuPDF keeps decoded images in a process-wide store (256 MB) that outlives the
        # document; the next page reopens it, so the cache is dead weight: a 300-page scan
        # would otherwise grow the process by the whole store (BENCHMARKS.md, rasterising).
        pymupdf.TOOLS.store_shrink(100)


def _save_png(pixmap: pymupdf.Pixmap, target: str, resolution: int) -> None:
    """The rendered page as a PNG at the least compression: MuPDF's own writer took 0.17 s
    for a scanned receipt against PIL's 0.07 (the same on born-digital pages, 0.04 s), and
    its files are within 15 % of these in size, either way (BENCHMARKS.md, "Reading
    quality, eighth pass")."""
    if pixmap.n != 3:  # not plain RGB: MuPDF writes what it has
        pixmap.set_dpi(resolution, resolution)
        pixmap.save(target, output="png")
        return
    size = (pixmap.width, pixmap.height)
    image = Image.frombuffer("RGB", size, pixmap.samples_mv, "raw", "RGB", pixmap.stride, 1)
    image.save(target, format="PNG", compress_level=1, dpi=(resolution, resolution))


# --- images ------------------------------------------------------------------------------


def _open_image(path: str, max_pixels: int, frame: int = 0) -> Image.Image:
    """Open an image lazily (header only) at ``frame``; refuse it when it has too many pixels."""
    try:
        with warnings.catch_warnings():
            # Our own limit below replaces Pillow's bomb warning.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(path, formats=_IMAGE_FORMATS)
            if frame:
                image.seek(frame)  # reads that frame's header only
    except Image.DecompressionBombError as e:
        raise OcrqError(ErrorCode.IMAGE_TOO_LARGE, "the image has too many pixels") from e
    except EOFError as e:
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, f"the image has no page {frame + 1}") from e
    except Exception as e:  # Pillow's parsers raise many types on malformed headers
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the image cannot be read") from e
    width, height = image.size
    if width <= 0 or height <= 0:
        image.close()
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the image has no pixels")
    if width * height > max_pixels:
        image.close()
        raise OcrqError(
            ErrorCode.IMAGE_TOO_LARGE,
            f"the image is {width}x{height} pixels, over the limit of {max_pixels}",
        )
    return image


def image_pages(image: Image.Image) -> int:
    """Pages of an image: every frame of a TIFF (a multi-page scan), else one.

    The frames of an animated WebP are an animation, not pages: only the first is read.
    """
    if image.format != "TIFF":
        return 1
    try:
        return int(getattr(image, "n_frames", 1))  # walks every frame's header
    except Exception as e:  # a cut or damaged TIFF: Pillow raises many types here
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the TIFF's pages cannot be read") from e


def _scaled_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    scale = min(1.0, max_side / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _decoded_rgb(image: Image.Image, max_side: int) -> Image.Image:
    """Decode the first frame, upright, in RGB, with its longer side at most max_side."""
    if image.format == "JPEG":
        # Let libjpeg decode at 1/2, 1/4 or 1/8 scale when that still covers max_side.
        image.draft("RGB", (max_side, max_side))
    image.load()
    # Each copy of a 35 MP scan costs 0.08 s: the orientation is applied in place, and an
    # RGB image is not converted to RGB again.
    ImageOps.exif_transpose(image, in_place=True)
    upright = image
    if upright.mode in {"RGBA", "LA", "PA"} or "transparency" in upright.info:
        # Transparent areas read as paper, not as black.
        rgba = upright.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        upright = flat
    rgb = upright if upright.mode == "RGB" else upright.convert("RGB")
    size = _scaled_size(*rgb.size, max_side)
    if size != rgb.size:
        rgb = rgb.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    return rgb


def _scaled_dpi(image: Image.Image, width: int) -> tuple[float, float] | None:
    """The upload's own resolution, scaled as its pixels were (engines size text by it)."""
    dpi = image.info.get("dpi")
    try:
        scale = width / image.width
        return (float(dpi[0]) * scale, float(dpi[1]) * scale) if dpi and dpi[0] > 1 else None
    except (TypeError, ValueError, IndexError, ZeroDivisionError):  # odd metadata: none is fine
        return None


def _passthrough_as(image: Image.Image, max_side: int) -> tuple[str, str] | None:
    """(suffix, media type) to copy the upload under as it is, or None to re-encode it."""
    kind = _PASSTHROUGH_AS.get(image.format or "")
    fits = (
        image.mode in _PASSTHROUGH_MODES
        and max(image.size) <= max_side
        and image.getexif().get(0x0112, 1) == 1  # no EXIF orientation to apply
        and "transparency" not in image.info
        and not getattr(image, "is_animated", False)  # an APNG's frames are not pages
    )
    return kind if fits else None


def _intact(path: str, suffix: str) -> bool:
    """True when the file ends where its image ends and every chunk checks out (PNG CRCs).

    Engines decode more strictly than Pillow: an upload with a damaged chunk, or with
    anything after its image (a polyglot carrying another file), is re-encoded, not copied.
    """
    with open(path, "rb") as file:
        file.seek(0, 2)
        file.seek(max(0, file.tell() - 64))
        tail = file.read()
    if not tail.rstrip(b"\0").endswith(_END_MARKS[suffix]):
        return False
    try:
        with Image.open(path, formats=_IMAGE_FORMATS) as image:
            image.verify()
    except Exception:  # verify raises several types on damaged data
        return False
    return True


def normalise_image(
    path: str, out_dir: str, max_pixels: int, max_side: int, index: int = 0
) -> PageImage:
    """Turn page ``index`` of an image into an RGB PNG (or the JPEG itself), side ≤ max_side."""
    image = _open_image(path, max_pixels, index)
    number = index + 1
    try:
        if index >= image_pages(image):  # a WebP animation's later frames are not pages
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, f"the image has no page {number}")
        if (kind := _passthrough_as(image, max_side)) and _intact(path, kind[0]):
            image.load()  # decode once so a broken file fails here, not in the engine
            target = page_file(out_dir, number, kind[0])
            shutil.copyfile(path, target)
            return PageImage(
                number=number,
                path=target,
                media_type=kind[1],
                width=image.width,
                height=image.height,
            )
        rgb = _decoded_rgb(image, max_side)
        target = page_file(out_dir, number)
        resolution = _scaled_dpi(image, rgb.width)
        extra = {"dpi": resolution} if resolution else {}
        rgb.save(target, format="PNG", compress_level=1, **extra)  # tmpfs: speed over size
        return PageImage(
            number=number, path=target, media_type="image/png", width=rgb.width, height=rgb.height
        )
    except OcrqError:
        raise
    except Exception as e:  # decoders raise many types on damaged data
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the image cannot be decoded") from e
    finally:
        image.close()


# --- inspection --------------------------------------------------------------------------


def inspect_document(path: str, media_type: str, max_pages: int, max_image_pixels: int) -> int:
    """Return the page count without rendering; raise OcrqError when unfit."""
    if media_type != PDF:
        return _image_page_count(path, max_pages, max_image_pixels)
    count = _pdf_page_count(path)
    if count == 0:
        raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, "the PDF has no pages")
    if count > max_pages:
        _too_many(count, max_pages, "PDF")
    return count


def _image_page_count(path: str, max_pages: int, max_pixels: int) -> int:
    with _open_image(path, max_pixels) as image:
        count = image_pages(image)
    if count > max_pages:
        _too_many(count, max_pages, "image")
    for frame in range(1, count):  # every page's size, from its header, before any decoding
        _open_image(path, max_pixels, frame).close()
    return count


def _too_many(count: int, max_pages: int, what: str) -> None:
    raise OcrqError(
        ErrorCode.TOO_MANY_PAGES, f"the {what} has {count} pages, over the limit of {max_pages}"
    )


def crop_page_figures(
    images: list[PageImage], pages: list[Page]
) -> tuple[list[Page], dict[str, bytes]]:
    """Each page's figure regions cropped from its rendering, keyed "images/<name>", and
    the pages with their figure blocks naming them (this runs in a render process: the
    pages come back as copies)."""
    paths = {image.number: image.path for image in images}
    files: dict[str, bytes] = {}
    for page in pages:
        if page.number in paths:
            crops = crop_figures(paths[page.number], page)
            files.update({figure_file(name): data for name, data in crops.items()})
    return pages, files


def text_layer_page(
    path: str, index: int, dpi: int, layout: bool = True
) -> tuple[Page, dict[str, bytes]] | None:
    """A page from its text layer and its figures ("images/<name>" → PNG), else None."""
    page = extract_text_page(path, index, dpi, layout)
    if page is None:
        return None
    crops = crop_pdf_figures(path, index, dpi, page)
    return page, {figure_file(name): data for name, data in crops.items()}


SEARCHABLE_S_PER_PAGE = 1.0


# --- async facade ------------------------------------------------------------------------


class Rasteriser:
    """Async facade: inspection and rendering run in an executor, each wait bounded."""

    def __init__(
        self,
        pool: RecyclingPool,
        max_pixels: int,
        max_side: int,
        timeout_s: float = RENDER_TIMEOUT_S,
    ) -> None:
        self.pool = pool
        self.max_pixels = max_pixels
        self.max_side = max_side
        self.timeout_s = timeout_s

    async def _run(
        self, what: str, function: Callable[..., T], *args: object, timeout_s: float | None = None
    ) -> T:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        return await self._run_once(what, function, *args, retry_if_broken=True, timeout_s=timeout)

    async def _run_once(
        self,
        what: str,
        function: Callable[..., T],
        *args: object,
        retry_if_broken: bool,
        timeout_s: float,
    ) -> T:
        try:  # an OcrqError raised in the pool comes back pickled as itself (shared/errors.py)
            return await self.pool.run(timeout_s, function, *args)
        except TimeoutError as e:
            raise OcrqError(ErrorCode.TIMEOUT, f"{what} took over {timeout_s:g} s") from e
        except PoolClosed as e:
            raise OcrqError(ErrorCode.UNAVAILABLE, "the worker is shutting down") from e
        except BrokenProcessPool as e:
            # A renderer process died; maybe another job's document killed it. Once more on
            # the fresh pool: a second crash means this document crashes MuPDF.
            if retry_if_broken:
                return await self._run_once(
                    what, function, *args, retry_if_broken=False, timeout_s=timeout_s
                )
            raise OcrqError(ErrorCode.CORRUPT_DOCUMENT, f"{what} crashed the renderer") from e

    async def inspect(self, path: str, media_type: str, max_pages: int) -> int:
        """The document's page count, or OcrqError when it is unfit to render."""
        return await self._run(
            "inspecting the document",
            inspect_document,
            path,
            media_type,
            max_pages,
            self.max_pixels,
        )

    async def render(
        self, path: str, media_type: str, index: int, dpi: int, out_dir: str
    ) -> PageImage:
        """Render PDF page ``index`` (0-based), or the normalised image when index is 0."""
        if media_type == PDF:
            return await self._run(
                f"rendering page {index + 1}",
                render_pdf_page,
                path,
                index,
                dpi,
                out_dir,
                self.max_pixels,
            )
        return await self._run(
            f"normalising page {index + 1} of the image",
            normalise_image,
            path,
            out_dir,
            self.max_pixels,
            self.max_side,
            index,
        )

    async def upright(self, page: PageImage) -> PageImage:
        """The page turned upright when it was rendered sideways or upside down."""
        return await self._run(
            f"detecting the orientation of page {page.number}", turn_upright, page
        )

    async def text_layer(
        self, path: str, index: int, dpi: int, layout: bool = True
    ) -> tuple[Page, dict[str, bytes]] | None:
        """PDF page ``index`` (0-based) from its text layer when good, with its figures;
        else None (OCR it)."""
        return await self._run(
            f"reading the text of page {index + 1}", text_layer_page, path, index, dpi, layout
        )

    async def searchable_pdf(
        self,
        path: str,
        media_type: str,
        pages: list[Page],
        words: dict[int, list[Word]],
        dpi: int,
        out_path: str,
    ) -> int:
        """The document's read pages with an invisible text layer (consumer/searchable.py),
        written to ``out_path`` (never sent back whole from the render process); its size."""
        return await self._pdf(
            "making the searchable PDF",
            write_searchable_pdf,
            path,
            media_type,
            pages,
            words,
            dpi,
            out_path,
        )

    async def redacted_pdf(
        self,
        path: str,
        media_type: str,
        pages: list[Page],
        lines: dict[int, list[Line]],
        dpi: int,
        out_path: str,
    ) -> int:
        """The redacted PDF (consumer/redact/pdf.py) written to ``out_path``; its size."""
        return await self._pdf(
            "drawing the redacted PDF",
            write_redacted_pdf,
            path,
            media_type,
            pages,
            lines,
            dpi,
            out_path,
        )

    async def _pdf(
        self,
        what: str,
        write: Callable[..., int],
        path: str,
        media_type: str,
        pages: list[Page],
        *rest: object,
    ) -> int:
        """A PDF written in a render process; a page takes milliseconds, so a long document
        gets time in proportion."""
        timeout_s = self.timeout_s + SEARCHABLE_S_PER_PAGE * len(pages)
        return await self._run(what, write, path, media_type, pages, *rest, timeout_s=timeout_s)

    async def figures(
        self, images: list[PageImage], pages: list[Page]
    ) -> tuple[list[Page], dict[str, bytes]]:
        """The pages with their figures named, and the crops, made in a render process."""
        return await self._run("cropping the figures", crop_page_figures, images, pages)
