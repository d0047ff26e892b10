"""The layout of a scanned page: its image plus the engine's words as invisible text.

The layout model reads PDF pages (text boxes, fonts, and the rendered page), so a scan is
made into one: a page of A4's area holding the page image, with each recognised word
written in render mode 3 (invisible) over its box, its font size from its line's height and
stretched or squeezed to the box's width, so that PyMuPDF extracts the same words back, in
the same lines. The blocks' text then comes from the engine's words, not from that page.
"""
# PyMuPDF ships partial annotations: its constructors and methods are untyped.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pymupdf

from ocrq.consumer.layout.placement import insert_figure_text, insert_in_order, mark_captions
from ocrq.consumer.layout.rects import centre_inside
from ocrq.consumer.layout.scan_figures import find_figures, has_caption
from ocrq.consumer.layout.scan_tables import find_tables
from ocrq.consumer.layout.structure import Frame, Rect, join_lines, page_blocks, parse_page
from ocrq.consumer.layout.words import ReadWord, engine_lines, printed_lines
from ocrq.shared.schemas import Block

# The invisible page has A4's area whatever the image's size: the model was made on pages
# in points, and a 200 DPI scan measured in pixels (three times too large) lost its
# headings and tables (measured on a generated report page).
A4_AREA_PT = 595.0 * 842.0
_LATIN = pymupdf.Font("helv")  # the base-14 font: Latin-1 only, nothing embedded
# Droid Sans Fallback: Latin, Greek, Cyrillic and CJK; in memory only, never saved here.
_FALLBACK = pymupdf.Font("cjk")
_FALLBACK_NAME = "ocrqfallback"
SPECK_CHARS = 2  # a region holding this few characters is ordered by its position only


def page_scale(width: int, height: int) -> float:
    """Points per pixel of the invisible page: the image scaled to A4's area."""
    return math.sqrt(A4_AREA_PT / max(width * height, 1))


def invisible_text_page(
    image_path: str, width: int, height: int, words: Sequence[ReadWord]
) -> pymupdf.Document:
    """A one-page PDF: the page image with the words as invisible text over their boxes."""
    scale = page_scale(width, height)
    doc = pymupdf.open()
    page = doc.new_page(width=width * scale, height=height * scale)
    page.insert_image(page.rect, filename=image_path)
    lines = [[w for w in line if w.text.strip()] for line in engine_lines(words)]
    lines = [line for line in lines if line]
    latin = [all(_is_latin1(word.text) for word in line) for line in lines]
    glyphs = _fallback_glyphs(page, lines, latin)
    operators = [
        _line_operators(line, scale, page.rect.height, glyphs if not is_latin else None)
        for line, is_latin in zip(lines, latin, strict=True)
    ]
    if operators:
        page.insert_font(fontname="helv")
        contents = page.get_contents()[-1]
        doc.update_stream(contents, doc.xref_stream(contents) + "".join(operators).encode())
    return doc


def _is_latin1(text: str) -> bool:
    return all(ord(char) < 256 for char in text)


def _fallback_glyphs(
    page: pymupdf.Page, lines: list[list[ReadWord]], latin: list[bool]
) -> dict[str, int]:
    """The fallback font's glyph of each character of the lines not in Latin-1, once the
    font is on the page; none where every line is Latin-1 (the font costs about 50 ms).

    The font's own character map gives them: the document's table of widths, asked for up
    to the page's highest character, took 40 ms for a page of Han (the same glyphs).
    """
    chars = {
        char
        for line, is_latin in zip(lines, latin, strict=True)
        if not is_latin
        for word in line
        for char in word.text
    }
    if not chars:
        return {}
    page.insert_font(fontname=_FALLBACK_NAME, fontbuffer=_FALLBACK.buffer)
    return {char: _FALLBACK.has_glyph(ord(char)) for char in chars}


def _size_and_baseline(
    line: list[ReadWord], scale: float, font: pymupdf.Font
) -> tuple[float, float]:
    """The line's font size and baseline in points: the engine's, else from its box."""
    if line[0].size > 0 and line[0].baseline > 0:
        return line[0].size * scale, line[0].baseline * scale
    top = min(word.box[1] for word in line) * scale
    bottom = max(word.box[3] for word in line) * scale
    size = max((bottom - top) / (font.ascender - font.descender), 1.0)
    return size, bottom + font.descender * size


def _line_operators(
    line: list[ReadWord], scale: float, page_height: float, glyphs: dict[str, int] | None
) -> str:
    """PDF operators writing a line's words invisibly (render mode 3) at the line's size,
    each scaled horizontally to its box.

    Written here, not with PyMuPDF's Shape.insert_text, which looks the font up in the
    page's resources on every call: the invisible page of a dense scan (800-1000 words)
    took 0.15-0.18 s that way, 0.07-0.08 s this way. The operators and their numbers are
    insert_text's with its morph, so the words extract to the same sizes and boxes, and the
    layout model (whose boxes a change in a size's sixth digit moves) sees the same page.
    """
    font, name = (_LATIN, "helv") if glyphs is None else (_FALLBACK, _FALLBACK_NAME)
    size, baseline = _size_and_baseline(line, scale, font)
    font_size = f"/{name} {pymupdf.format_g(size)} Tf"
    out = []
    for word in line:
        natural = sum(_advance(font, char) for char in word.text) * size  # font.text_length
        stretch = (word.box[2] - word.box[0]) * scale / natural if natural > 0 else 1.0
        x, y = word.box[0] * scale, page_height - baseline
        at = pymupdf.Matrix(1, 0, 0, 1, x, y)
        morph = ~at * pymupdf.Matrix(max(stretch, 0.05), 1) * at
        out.append(
            f"q\n{_numbers(morph, 5)} cm\nBT\n1 0 0 1 {_numbers((x, y))} Tm\n"
            f"{font_size} 3 Tr {_encoded(word.text, glyphs)}TJ\nET\nQ\n"
        )
    return "".join(out)


@functools.cache
def _advance(font: pymupdf.Font, char: str) -> float:
    """A character's advance in the font at size 1 (what Font.text_length sums, at 20 µs a
    call where this is a dictionary lookup; the two fonts live as long as the module)."""
    return float(font.glyph_advance(ord(char)))


def _numbers(values: Sequence[float], places: int | None = None) -> str:
    """Numbers as PyMuPDF writes them in content streams (a matrix's rounded to 5 places)."""
    if places is not None:
        values = [round(v, places) if abs(v) >= 10 ** -(places - 1) else 0 for v in values]
    return " ".join(pymupdf.format_g(v) for v in values)


def _encoded(text: str, glyphs: dict[str, int] | None) -> str:
    """The text as a TJ array: Latin-1 codes in the base-14 font, glyph numbers (4 hex
    digits) in the embedded fallback font, as PyMuPDF writes them."""
    if glyphs is None:
        return "[<" + "".join(f"{ord(char):02x}" for char in text) + ">]"
    return "[<" + "".join(f"{glyphs[char]:04x}" for char in text) + ">]"


def structured_blocks(
    image_path: str, width: int, height: int, words: Sequence[ReadWord]
) -> list[Block] | None:
    """scanned_blocks, or None when the layout step fails on this page: an engine then keeps
    its own plain blocks rather than failing the page (the text was read; only its
    structure is missing)."""
    try:
        return scanned_blocks(image_path, width, height, words)
    except Exception:  # the model, MuPDF and numpy raise unrelated types
        return None


def scanned_blocks(
    image_path: str, width: int, height: int, words: Sequence[ReadWord]
) -> list[Block]:
    """Blocks of a scanned page: the layout of its invisible-text page, the engine's words.

    Tables the layout model missed are inferred from the words' positions, figures from the
    page image (it sees words only). The words inside a figure with a caption beside it (a
    document's diagram) follow it as one text block, before the caption; inside a figure
    without one they are left out: on receipts and forms such "figures" are stamps, logos
    and text taken for a picture, whose words, kept, cost more than a diagram's labels gave
    (BENCHMARKS.md, "Reading quality", twelfth and thirteenth passes). Other words the
    layout puts in no region become text blocks of their own.
    """
    if not any(word.text.strip() for word in words):
        return []
    scale = page_scale(width, height)
    with invisible_text_page(image_path, width, height, words) as doc:
        layout = parse_page(doc, 0)
    frame = Frame(width * scale, height * scale, width, height)
    tables_seen = [_pixels(box, scale) for box in layout.boxes if box.boxclass == "table"]
    pictures = [_pixels(box, scale) for box in layout.boxes if box.boxclass == "picture"]
    gridded = [_pixels(box, scale) for box in layout.boxes if _has_grid(box)]
    tables = find_tables(words, width, height, avoid=gridded + pictures)
    inferred = [_box(table.block.bbox_px) for table in tables]
    figures = find_figures(image_path, words, known=pictures, avoid=tables_seen + inferred)
    layout.boxes = split_round_tables(layout.boxes, inferred, scale)
    taken = set().union(*(table.words for table in tables))
    in_figures = [
        [i for i, word in enumerate(words) if centre_inside(word.box, box)] for box in figures
    ]
    taken |= {i for inside in in_figures for i in inside}
    source = WordText([word for i, word in enumerate(words) if i not in taken], scale)
    blocks = [block for block in page_blocks(layout, frame, source) if block.label != "figure"]
    # A speck read as "." or "1" gets a region of its own that the layout model may put
    # first (a receipt's bottom speck came before its title; a mark at a receipt's left
    # edge made a column of its own, read before the whole receipt): such blocks are placed
    # by position, last, so that nothing else is ordered against them.
    specks = [block for block in blocks if is_speck(block.text)]
    blocks = [block for block in blocks if not is_speck(block.text)]
    blocks = _insert_leftovers(blocks, source.unclaimed(), frame, scale)
    pixels = Frame(width, height, width, height)
    figure_blocks = [_figure(pixels, box) for box in figures]
    for block in [*[table.block for table in tables], *figure_blocks, *specks]:
        insert_in_order(blocks, block)
    for box, block, inside in zip(figures, figure_blocks, in_figures, strict=True):
        if inside and has_caption(box, words, height):
            text = _words_block([words[i] for i in inside], pixels, 1.0)
            insert_figure_text(blocks, block, text)
    mark_captions(blocks)
    return blocks


def split_round_tables(boxes: list[Any], tables: list[Rect], scale: float) -> list[Any]:
    """The layout's text regions, each cut above and below a table found in its middle.

    A table inferred from the words' positions inside a region the model calls text would be
    placed after that whole region, its rows read after the lines below it (a receipt's fee
    table after its totals); cut, the region's part above comes before the table and its part
    below after it.
    """
    found = [
        (x0 * scale, top * scale, x1 * scale, bottom * scale) for x0, top, x1, bottom in tables
    ]
    out = []
    for box in boxes:
        inside = [
            (top, bottom)
            for x0, top, x1, bottom in found
            if box.y0 < top and bottom < box.y1 and x0 < box.x1 and box.x0 < x1
        ]
        if box.boxclass != "text" or not inside:
            out.append(box)
            continue
        edges = [box.y0, *sorted(y for span in inside for y in span), box.y1]
        out += [replace(box, y0=a, y1=b) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    return out


def is_speck(text: str) -> bool:
    """Whether a region's text is a speck: no letter or digit, or two characters at most."""
    return not any(c.isalnum() for c in text) or len("".join(text.split())) <= SPECK_CHARS


def _has_grid(box: Any) -> bool:
    info = box.table or {}
    return box.boxclass == "table" and bool(info.get("cells"))


def _pixels(box: Any, scale: float) -> Rect:
    """A layout box (points of the invisible page) in page pixels."""
    return (box.x0 / scale, box.y0 / scale, box.x1 / scale, box.y1 / scale)


def _box(values: Sequence[float]) -> Rect:
    return (float(values[0]), float(values[1]), float(values[2]), float(values[3]))


def _figure(pixels: Frame, box: Rect) -> Block:
    bbox, bbox_px = pixels.place(box)
    return Block(label="figure", text="", bbox=bbox, bbox_px=bbox_px)


def _rect(box: Any) -> Rect:
    return (float(box.x0), float(box.y0), float(box.x1), float(box.y1))


def _inside(box: Rect, region: Rect, scale: float) -> bool:
    """Whether a word's centre (pixels) lies in a region (points)."""
    cx, cy = (box[0] + box[2]) / 2 * scale, (box[1] + box[3]) / 2 * scale
    return region[0] <= cx <= region[2] and region[1] <= cy <= region[3]


class WordText:
    """Region text from the engine's words: each word goes to the first region holding it."""

    def __init__(self, words: Sequence[ReadWord], scale: float) -> None:
        self._words = [word for word in words if word.text.strip()]
        self._scale = scale
        self._claimed: set[int] = set()
        self._by_box: dict[int, list[ReadWord]] = {}

    def _claim(self, box: Any, region: Rect) -> list[ReadWord]:
        taken = [
            (i, word)
            for i, word in enumerate(self._words)
            if i not in self._claimed and _inside(word.box, region, self._scale)
        ]
        self._claimed.update(i for i, _ in taken)
        words = [word for _, word in taken]
        self._by_box.setdefault(id(box), []).extend(words)
        return words

    def lines(self, box: Any) -> list[str]:
        """The words in the box, line by line as printed (words.printed_lines)."""
        words = self._claim(box, _rect(box))
        return [" ".join(w.text for w in line) for line in printed_lines(words)]

    def confidence(self, box: Any) -> float | None:
        """The mean confidence of the box's words."""
        words = self._by_box.get(id(box), [])
        return round(sum(w.confidence for w in words) / len(words), 4) if words else None

    def cells(self, box: Any, grid: list[list[Rect]]) -> list[list[str]]:
        """Each cell's words, in reading order; the table's other words are claimed too."""
        texts = [[" ".join(w.text for w in self._claim(box, rect)) for rect in row] for row in grid]
        self._claim(box, _rect(box))
        return texts

    def unclaimed(self) -> list[ReadWord]:
        """Words no region took, in the engine's order."""
        return [word for i, word in enumerate(self._words) if i not in self._claimed]


def _insert_leftovers(
    blocks: list[Block], words: list[ReadWord], frame: Frame, scale: float
) -> list[Block]:
    """Each leftover line as a text block, before the first block that starts below it."""
    out = list(blocks)
    for line in engine_lines(words):
        block = _words_block(line, frame, scale)
        at = next((i for i, b in enumerate(out) if b.bbox_px[1] > block.bbox_px[1]), len(out))
        out.insert(at, block)
    return out


def _words_block(words: list[ReadWord], frame: Frame, scale: float) -> Block:
    """Words as one text block: a line of text per engine line, the union of their boxes."""
    box = (
        min(w.box[0] for w in words) * scale,
        min(w.box[1] for w in words) * scale,
        max(w.box[2] for w in words) * scale,
        max(w.box[3] for w in words) * scale,
    )
    bbox, bbox_px = frame.place(box)
    return Block(
        label="text",
        text=join_lines([" ".join(w.text for w in line) for line in engine_lines(words)]),
        bbox=bbox,
        bbox_px=bbox_px,
        confidence=round(sum(w.confidence for w in words) / len(words), 4),
    )
