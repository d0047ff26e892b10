"""Generators of real test documents (PDFs and images), built with PyMuPDF or by hand.

Plain functions returning bytes, so tests and benchmarks can write them wherever they need.
Import as ``from documents import text_pdf`` (``tests/`` must be on the Python path).
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import functools
import io
import random
import struct
import zlib
from collections.abc import Sequence

import pymupdf

DEFAULT_WORDS: tuple[str, ...] = tuple(
    "The quick brown fox jumps over the lazy dog while the invoice total reads 1234.56 EUR".split()
)

_MARGIN = 36.0


def _word_list(words: Sequence[str] | None) -> list[str]:
    return list(DEFAULT_WORDS if words is None else words)


def _page_text(number: int, words: Sequence[str]) -> str:
    return " ".join([f"Page {number}", *words])


def _write_text(page: pymupdf.Page, text: str, fontsize: float) -> None:
    """Write text into the page's margins, shrinking the font until it fits."""
    box = pymupdf.Rect(_MARGIN, _MARGIN, page.rect.width - _MARGIN, page.rect.height - _MARGIN)
    while fontsize >= 4:
        if page.insert_textbox(box, text, fontsize=fontsize, fontname="helv") >= 0:
            return
        fontsize *= 0.8
    raise ValueError("text does not fit on the page")


def text_pdf(
    pages: int = 1,
    words: list[str] | None = None,
    page_size: tuple[float, float] = (595, 842),
) -> bytes:
    """A born-digital PDF; page n's text layer reads ``Page n`` followed by the words."""
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=page_size[0], height=page_size[1])
        _write_text(page, _page_text(number, _word_list(words)), fontsize=12)
    return bytes(doc.tobytes(garbage=1, deflate=True))


def _text_pixmap(text: str, width_pt: float, height_pt: float, dpi: int) -> pymupdf.Pixmap:
    """Render text in a large clear font to a greyscale pixmap (no text layer survives)."""
    scratch = pymupdf.open()
    page = scratch.new_page(width=width_pt, height=height_pt)
    _write_text(page, text, fontsize=28)
    return page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)


def scanned_pdf(pages: int = 1, words: list[str] | None = None, dpi: int = 150) -> bytes:
    """A PDF whose pages are only an image of rendered text: no text layer at all."""
    doc = pymupdf.open()
    width, height = 595, 842
    for number in range(1, pages + 1):
        pixmap = _text_pixmap(_page_text(number, _word_list(words)), width, height, dpi)
        page = doc.new_page(width=width, height=height)
        page.insert_image(page.rect, pixmap=pixmap)
    return bytes(doc.tobytes(garbage=1, deflate=True))


def sized_pdf(sizes: list[tuple[int, int]]) -> bytes:
    """A PDF whose page n has size ``sizes[n-1]`` in points (tells pages apart by pixel size)."""
    doc = pymupdf.open()
    for number, (width, height) in enumerate(sizes, start=1):
        page = doc.new_page(width=width, height=height)
        page.insert_text((2, min(height - 2, 12)), f"Page {number}", fontsize=8)
    return bytes(doc.tobytes(garbage=1, deflate=True))


def encrypted_pdf(owner_password: str = "owner", user_password: str = "user") -> bytes:
    """An AES-256 encrypted text PDF that needs the user password to open."""
    source = pymupdf.open("pdf", text_pdf(pages=2))
    return bytes(
        source.tobytes(
            encryption=pymupdf.mupdf.PDF_ENCRYPT_AES_256,
            owner_pw=owner_password,
            user_pw=user_password,
        )
    )


def truncated_pdf() -> bytes:
    """A valid three-page text PDF cut in half: later pages' objects are missing."""
    whole = text_pdf(pages=3)
    return whole[: len(whole) // 2]


def zero_page_pdf() -> bytes:
    """A syntactically valid PDF with an empty page tree, written by hand with a correct xref."""
    return hand_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"])


PAGE = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 300] >>"


def cyclic_pdf() -> bytes:
    """A page tree whose node lists itself among its kids."""
    pages = b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>"
    return hand_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", pages, PAGE])


def lying_count_pdf() -> bytes:
    """A page tree that claims 100000 pages and holds one."""
    pages = b"<< /Type /Pages /Kids [3 0 R] /Count 100000 >>"
    return hand_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", pages, PAGE])


def hand_pdf(objects: list[bytes]) -> bytes:
    """A PDF of these object bodies (numbered from 1, object 1 the catalog), with its xref."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref_at = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def garbage_pdf(size: int = 4096) -> bytes:
    """Bytes that start with a PDF header and continue with deterministic junk."""
    return b"%PDF-1.7\n" + random.Random(1234).randbytes(size)


def _text_image(words: Sequence[str], width: int, height: int) -> pymupdf.Pixmap:
    scratch = pymupdf.open()
    page = scratch.new_page(width=width, height=height)
    box = pymupdf.Rect(8, 8, width - 8, height - 8)
    fontsize = max(8.0, height / 6)
    while page.insert_textbox(box, " ".join(words), fontsize=fontsize) < 0 and fontsize > 4:
        fontsize *= 0.8
    return page.get_pixmap(dpi=72, colorspace=pymupdf.csRGB)


def text_png(words: list[str] | None = None, width: int = 800, height: int = 200) -> bytes:
    """A PNG of black text on white, ``width`` x ``height`` pixels."""
    return bytes(_text_image(_word_list(words), width, height).tobytes("png"))


def text_jpeg(
    words: list[str] | None = None, width: int = 800, height: int = 200, quality: int = 90
) -> bytes:
    """A JPEG of black text on white, ``width`` x ``height`` pixels."""
    pixmap = _text_image(_word_list(words), width, height)
    return bytes(pixmap.tobytes("jpg", jpg_quality=quality))


def _solid_pixmap(width: int, height: int, rgb: tuple[int, int, int]) -> pymupdf.Pixmap:
    # From samples: Pixmap.set_rect takes seconds on a few megapixels.
    return pymupdf.Pixmap(pymupdf.csRGB, width, height, bytes(rgb) * (width * height), False)


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 60, 30)) -> bytes:
    """A plain one-colour RGB PNG."""
    return bytes(_solid_pixmap(width, height, rgb).tobytes("png"))


def jpeg(width: int, height: int, rgb: tuple[int, int, int] = (200, 60, 30)) -> bytes:
    """A plain one-colour RGB JPEG."""
    return bytes(_solid_pixmap(width, height, rgb).tobytes("jpg", jpg_quality=85))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.lru_cache(maxsize=4)
def bomb_png(width: int = 30_000, height: int = 30_000) -> bytes:
    """A ~100 KB one-bit greyscale PNG announcing width x height pixels: a decompression bomb.

    Rows are compressed one at a time, so the generator never holds the pixels.
    """
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit grey
    compressor = zlib.compressobj(9)
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte + packed zero bits
    idat = bytearray()
    for _ in range(height):
        idat += compressor.compress(row)
    idat += compressor.flush()
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", bytes(idat))
        + _png_chunk(b"IEND", b"")
    )


def _bgr_rows_bottom_up(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    row = bytes((rgb[2], rgb[1], rgb[0])) * width
    row += b"\x00" * (-len(row) % 4)  # BMP rows pad to 4 bytes
    return row * height


def bmp(width: int = 64, height: int = 48, rgb: tuple[int, int, int] = (30, 120, 200)) -> bytes:
    """A hand-written, fully valid uncompressed 24-bit BMP (BITMAPINFOHEADER)."""
    pixels = _bgr_rows_bottom_up(width, height, rgb)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    file_header = struct.pack("<2sIHHI", b"BM", 14 + len(info) + len(pixels), 0, 0, 14 + len(info))
    return file_header + info + pixels


def tiff(width: int = 64, height: int = 48, rgb: tuple[int, int, int] = (30, 120, 200)) -> bytes:
    """A hand-written, fully valid uncompressed baseline RGB TIFF (little-endian, one strip)."""
    pixels = bytes(rgb) * (width * height)
    entries = [  # (tag, type, count, value); type 3 = SHORT, 4 = LONG
        (256, 4, 1, width),
        (257, 4, 1, height),
        (258, 3, 3, 0),  # BitsPerSample: offset patched below
        (259, 3, 1, 1),  # no compression
        (262, 3, 1, 2),  # RGB
        (273, 4, 1, 0),  # StripOffsets: patched below
        (277, 3, 1, 3),
        (278, 4, 1, height),
        (279, 4, 1, len(pixels)),
    ]
    ifd_at = 8
    ifd_size = 2 + 12 * len(entries) + 4
    bits_at = ifd_at + ifd_size
    pixels_at = bits_at + 6
    ifd = struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        value = {258: bits_at, 273: pixels_at}.get(tag, value)
        packed = struct.pack("<HI", value, 0)[:4] if kind == 3 else struct.pack("<I", value)
        ifd += struct.pack("<HHI", tag, kind, count) + packed
    ifd += struct.pack("<I", 0)  # no next IFD
    return b"II*\x00" + struct.pack("<I", ifd_at) + ifd + struct.pack("<HHH", 8, 8, 8) + pixels


def webp(width: int = 64, height: int = 48, rgb: tuple[int, int, int] = (30, 120, 200)) -> bytes:
    """A lossless WebP, written with Pillow (PyMuPDF cannot write or read WebP)."""
    from PIL import Image  # Pillow ships with the OCR stack; only this format needs it

    out = io.BytesIO()
    Image.new("RGB", (width, height), rgb).save(out, "WEBP", lossless=True)
    return out.getvalue()


def multipage_tiff(sizes: list[tuple[int, int]]) -> bytes:
    """A TIFF with one frame (page) per size, written with Pillow, as scanners produce them."""
    from PIL import Image

    frames = [Image.new("RGB", size, (240, 240, 240)) for size in sizes]
    out = io.BytesIO()
    frames[0].save(out, "TIFF", save_all=True, append_images=frames[1:], compression="tiff_lzw")
    return out.getvalue()
