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

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pymupdf

from ocrq.consumer.layout.placement import insert_in_order, mark_captions
from ocrq.consumer.layout.rects import centre_inside
from ocrq.consumer.layout.scan_figures import find_figures
from ocrq.consumer.layout.scan_tables import find_tables
from ocrq.consumer.layout.structure import Frame, Rect, join_lines, page_blocks, parse_page
from ocrq.consumer.layout.words import ReadWord, engine_lines
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
    shape = page.new_shape()
    fallback_added = False
    for words_of_line in engine_lines(words):
        line = [word for word in words_of_line if word.text.strip()]
        if not line:
            continue
        latin = all(_is_latin1(word.text) for word in line)
        if not latin and not fallback_added:
            # Only pages with such words pay for the (in-memory) font: about 50 ms.
            page.insert_font(fontname=_FALLBACK_NAME, fontbuffer=_FALLBACK.buffer)
            fallback_added = True
        font, name = (_LATIN, "helv") if latin else (_FALLBACK, _FALLBACK_NAME)
        _write_line(shape, line, scale, font, name)
    shape.commit()
    return doc


def _is_latin1(text: str) -> bool:
    return all(ord(char) < 256 for char in text)


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


def _write_line(
    shape: Any, line: list[ReadWord], scale: float, font: pymupdf.Font, name: str
) -> None:
    """Each word at the line's size, scaled horizontally to its box (a PDF's Tz, via morph)."""
    size, baseline = _size_and_baseline(line, scale, font)
    for word in line:
        natural = font.text_length(word.text, fontsize=size)
        stretch = (word.box[2] - word.box[0]) * scale / natural if natural > 0 else 1.0
        origin = pymupdf.Point(word.box[0] * scale, baseline)
        shape.insert_text(
            origin,
            word.text,
            fontsize=size,
            fontname=name,
            render_mode=3,
            morph=(origin, pymupdf.Matrix(max(stretch, 0.05), 1)),
        )


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
    page image (it sees words only); words in a figure are not body text. Other words the
    layout puts in no region become text blocks of their own: nothing read is dropped.
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
    taken |= {i for i, word in enumerate(words) if any(centre_inside(word.box, f) for f in figures)}
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
    found = [table.block for table in tables] + [_figure(pixels, box) for box in figures]
    for block in [*found, *specks]:
        insert_in_order(blocks, block)
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
        """The words in the box, line by line in the engine's order."""
        words = self._claim(box, _rect(box))
        return [" ".join(w.text for w in line) for line in engine_lines(words)]

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
        box = (
            min(w.box[0] for w in line) * scale,
            min(w.box[1] for w in line) * scale,
            max(w.box[2] for w in line) * scale,
            max(w.box[3] for w in line) * scale,
        )
        bbox, bbox_px = frame.place(box)
        confidence = round(sum(w.confidence for w in line) / len(line), 4)
        block = Block(
            label="text",
            text=join_lines([" ".join(w.text for w in line)]),
            bbox=bbox,
            bbox_px=bbox_px,
            confidence=confidence,
        )
        at = next((i for i, b in enumerate(out) if b.bbox_px[1] > bbox_px[1]), len(out))
        out.insert(at, block)
    return out
