"""Lines the first reading missed: ink on the page that none of its words covers, read alone.

Tesseract leaves whole lines out of receipts: the ones printed larger or fainter than the
rest (a "TOTAL RM 64.15" in double height, a shop's name, a GST summary), or beside a stamp
or a handwritten sum. Measured on 40 development receipts (SROIE 010-049), reading them took
CER from 10.7 % to 10.2 %. Here the page's ink is found, the words' boxes are wiped off it,
and each band of rows left with ink of a text's height is read as one line (Tesseract,
single-line segmentation); a confident reading with letters or digits joins the page's
words, on the line that shares its row or as a line of its own, in reading order. Faint
print that the threshold cuts into runs of rows too low to count is joined into one band;
a band Tesseract reads weakly, on a row of its own, is kept where the second recogniser
(PP-OCRv6) reads it surely, with that reading's characters.

Only pages read with some doubt are searched: on a confident one (born-digital renders and
clean scans, read at 0.92-0.93, against receipts' 0.74-0.78) the ink no word covers is a
diagram's, whose labels would come into the body text (+0.4 CER points on a skewed paper).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from statistics import median
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from ocrq.consumer.engines.faint_print import paper_level
from ocrq.consumer.engines.line_rereads import ReadsLines, better_line
from ocrq.consumer.engines.readings import read_words
from ocrq.consumer.layout.rects import area, clip, union
from ocrq.consumer.layout.structure import Rect
from ocrq.consumer.layout.words import ReadWord, moved

# Grey levels a pixel must differ from the paper by to be print: above a photo's shading
# and a scan's noise, below faint thermal print (measured on SROIE receipts).
INK_LEVELS = 80
ROW_INK = 0.01  # share of the page's width inked for a row to be part of a band
WIPE_PAD = 2  # pixels round each word's box wiped with it (its anti-aliased edge)
# A band's height against the page's median word height: lower is specks and rules' edges,
# higher is pictures, logos and stamps (double-height totals measure 1.8-2.0).
MIN_HEIGHT = 0.6
MAX_HEIGHT = 4.0
# Runs of inked rows each lower than MIN_HEIGHT and at most this far apart (of the median
# word height) are pieces of one band: faint thermal print leaves rows inside a line with
# almost no ink at the threshold ("CHANGE .... RM 10.00" came in runs of 5, 2 and 4 rows,
# each too low to count). A run high enough stays apart from a rule's few rows beside it.
ROW_GAP = 0.25
MAX_BANDS = 12  # read at most this many a page, tallest ink first (the time is bounded)
CROP_PAD = 0.3  # of the band's height, round it when cut out
# A band's reading is kept at this mean confidence (Tesseract's, 0..1) with this many
# letters or digits. Measured: missed lines of text read at 0.63-0.96, rules, specks and
# shading below 0.5 or as one or two symbols.
MIN_CONFIDENCE = 0.6
MIN_ALNUM = 2
# ... or, on a row no line was read on, where the second recogniser (PP-OCRv6,
# line_reader.py) reads the band this surely: faint thermal print that Tesseract read
# "CUANGE csasccsecssecccsse WH 10.00" at 0.05-0.5, PP-OCRv6 "CHANGE..RM10.00" at 0.95.
# The band then takes that reading's characters, as a weak line re-read does.
SURE_SECOND = 0.9
# ... and is at most this high (of the median word height): taller ink that it reads surely
# is handwriting ("A04114" written over a receipt, which Tesseract read "777"), not print.
VOUCHED_HEIGHT = 1.5
SAME_ROW = 0.5  # vertical overlap, of the shorter, at which a band is on an existing line
DOUBTFUL_PAGE = 0.85  # a page read below this mean confidence is searched (see above)


def read_missed_lines(
    api: Any,
    image_path: str,
    words: Sequence[ReadWord],
    join_rows: bool,
    second: ReadsLines | None = None,
) -> list[ReadWord]:
    """The page's words with the lines the first reading missed read and put in place.

    ``api`` is a Tesseract API set for single lines in the page's languages. ``join_rows``:
    the page is one column (a till roll), so a band on a line's row is the rest of that line
    ("TOTAL" read, its "64.15" missed); on other pages it may be another column's.
    ``second``: a line recogniser that may vouch for a band Tesseract read weakly.
    """
    if not words:
        return list(words)
    with Image.open(image_path) as opened:
        grey = opened.convert("L")
    placed, text_height = list(words), _text_height(words)
    for band in missed_bands(grey, words):
        found = _read_band(api, grey, band)
        fresh = [w for w in found if not _covers_read_word(w.box, placed)]
        if not _confident(fresh):  # the second opinion only for a line missed whole
            alone = not _on_a_row(placed, band)
            fresh = _vouched(second, grey, band, fresh, text_height) if alone else []
        if fresh:
            placed = _placed(placed, fresh, join_rows)
    return placed


def missed_bands(grey: Image.Image, words: Sequence[ReadWord]) -> list[Rect]:
    """Boxes of the bands of rows holding ink of a text's height that no word covers."""
    pixels = np.asarray(grey)  # one byte a pixel: a long till roll's photo is 20-30 MP
    paper = paper_level(pixels)
    ink = (pixels < max(0, paper - INK_LEVELS)) | (pixels > min(255, paper + INK_LEVELS))
    for word in words:
        x0, y0, x1, y1 = (int(v) for v in word.box)
        ink[
            max(0, y0 - WIPE_PAD) : y1 + WIPE_PAD + 1, max(0, x0 - WIPE_PAD) : x1 + WIPE_PAD + 1
        ] = False
    text_height = _text_height(words)
    inked_rows = ink.sum(axis=1) > max(3, ROW_INK * ink.shape[1])
    bands = []
    runs = _joined_pieces(_runs(inked_rows), MIN_HEIGHT * text_height, ROW_GAP * text_height)
    for top, bottom in runs:
        if MIN_HEIGHT * text_height <= bottom - top <= MAX_HEIGHT * text_height:
            columns = np.flatnonzero(ink[top:bottom].any(axis=0))
            box = (float(columns[0]), float(top), float(columns[-1] + 1), float(bottom))
            bands.append((int(ink[top:bottom].sum()), box))
    tallest = sorted(bands, reverse=True)[:MAX_BANDS]
    return sorted((box for _, box in tallest), key=lambda box: box[1])


def _text_height(words: Sequence[ReadWord]) -> float:
    """The median height of the words' boxes."""
    return float(median(word.box[3] - word.box[1] for word in words))


def _runs(flags: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """(first, last + 1) of each run of True."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], flags.view(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _joined_pieces(runs: list[tuple[int, int]], lowest: float, gap: float) -> list[tuple[int, int]]:
    """The runs with pieces joined: a run lower than ``lowest`` rows joins the one before it,
    at most ``gap`` rows above, when that one is also lower (a rule beside a line stays
    apart: it is a run of its own, the line's is high enough)."""
    joined: list[tuple[int, int]] = []
    for top, bottom in runs:
        if joined and _pieces(joined[-1], (top, bottom), lowest, gap):
            joined[-1] = (joined[-1][0], bottom)
        else:
            joined.append((top, bottom))
    return joined


def _pieces(above: tuple[int, int], run: tuple[int, int], lowest: float, gap: float) -> bool:
    """Whether two runs, both lower than ``lowest``, lie at most ``gap`` rows apart."""
    low = max(above[1] - above[0], run[1] - run[0]) < lowest
    return low and run[0] - above[1] <= gap


def _read_band(api: Any, grey: Image.Image, band: Rect) -> list[ReadWord]:
    """The band cut out (padded) and read as one line; boxes in page pixels."""
    x0, y0, x1, y1 = _padded_band(band, grey.size)
    api.SetImage(grey.crop((x0, y0, x1, y1)))
    api.Recognize()
    return [moved(w, x0, y0) for w in read_words(api)]


def _padded_band(band: Rect, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The band's box with CROP_PAD of its height round it, within the page, in pixels."""
    pad = CROP_PAD * (band[3] - band[1])
    x0, y0 = max(0, round(band[0] - pad)), max(0, round(band[1] - pad))
    return x0, y0, min(size[0], round(band[2] + pad)), min(size[1], round(band[3] + pad))


def _vouched(
    second: ReadsLines | None,
    grey: Image.Image,
    band: Rect,
    found: list[ReadWord],
    text_height: float,
) -> list[ReadWord]:
    """A band Tesseract read weakly, as the second recogniser reads it when that one is sure
    of it (its characters, the spaces of both: line_rereads.better_line); else nothing."""
    if second is None or not found or band[3] - band[1] > VOUCHED_HEIGHT * text_height:
        return []
    x0, y0, x1, y1 = _padded_band(band, grey.size)
    reading = second.read(grey.crop((x0, y0, x1, y1)))
    if sum(c.isalnum() for c in reading.text) < MIN_ALNUM or reading.confidence < SURE_SECOND:
        return []
    return better_line(found, reading, x0) or []


def _covers_read_word(box: Rect, words: Sequence[ReadWord]) -> bool:
    """Whether most of the box is a word read already (the edge of one, read twice)."""
    return any(area(clip(box, word.box)) > 0.5 * area(box) for word in words)


def _confident(found: Sequence[ReadWord]) -> bool:
    """Whether a band's reading is text: confident, with letters or digits."""
    chars = sum(len(w.text) for w in found)
    alnum = sum(c.isalnum() for w in found for c in w.text)
    mean = sum(w.confidence * len(w.text) for w in found) / max(chars, 1)
    return alnum >= MIN_ALNUM and mean >= MIN_CONFIDENCE


def _placed(words: list[ReadWord], found: list[ReadWord], join_rows: bool) -> list[ReadWord]:
    """The words with a band's reading added: on the line sharing its row (``join_rows``),
    else as a new line before the first line below it that it overlaps across."""
    box = _extent(found)
    lines = _lines(words)
    for start, stop in lines if join_rows else []:
        if _same_row(_extent(words[start:stop]), box):
            first = words[start]
            joined = [*words[start:stop], *(_onto(w, first) for w in found)]
            return [*words[:start], *sorted(joined, key=lambda w: w.box[0]), *words[stop:]]
    at = next(
        (start for start, stop in lines if _below_across(_extent(words[start:stop]), box)),
        len(words),
    )
    neighbour = words[at - 1] if at else words[0]
    line = max(w.line for w in words) + 1
    new = [w._replace(line=line, paragraph=neighbour.paragraph) for w in found]
    return [*words[:at], *new, *words[at:]]


def _onto(word: ReadWord, line_word: ReadWord) -> ReadWord:
    """A word moved onto an existing line: its number, paragraph and metrics."""
    return word._replace(
        line=line_word.line,
        paragraph=line_word.paragraph,
        size=line_word.size,
        baseline=line_word.baseline,
    )


def _lines(words: Sequence[ReadWord]) -> list[tuple[int, int]]:
    """(start, stop) of each line's run of words, in reading order."""
    starts = [i for i, word in enumerate(words) if i == 0 or word.line != words[i - 1].line]
    return list(zip(starts, [*starts[1:], len(words)], strict=True))


def _extent(words: Sequence[ReadWord]) -> Rect:
    return reduce(union, (word.box for word in words))


def _same_row(line: Rect, band: Rect) -> bool:
    overlap = min(line[3], band[3]) - max(line[1], band[1])
    return overlap > SAME_ROW * min(line[3] - line[1], band[3] - band[1])


def _on_a_row(words: Sequence[ReadWord], band: Rect) -> bool:
    """Whether the band shares its row with a line of the words (its uncovered ink may be
    that line's, read into other words: "Lot3, npr Alam," for "LOT 3, JALAN PELABUR")."""
    return any(_same_row(_extent(words[start:stop]), band) for start, stop in _lines(words))


def _below_across(line: Rect, band: Rect) -> bool:
    """Whether the line lies below the band's middle and overlaps it across the page."""
    below = line[1] >= (band[1] + band[3]) / 2
    return below and min(line[2], band[2]) > max(line[0], band[0])
