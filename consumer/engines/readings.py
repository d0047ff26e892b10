"""Second opinions where Tesseract's first reading of a page is weak, the better one kept.

Two readings, each measured on real pages (BENCHMARKS.md, "Reading quality"):

- Upside down: the orientation classifier turns about one receipt in ten the wrong way up
  (3 of 30 SROIE receipts, at scores of 0.73-0.91), and Tesseract's OSD is no better judge.
  Text read upside down comes back as confident-looking garbage, but its mean confidence is
  low; a page read below ``FLIP_BELOW`` is read again turned half a turn, and the turn is
  kept when that reading is clearly more confident.
- Till rolls: Tesseract splits a receipt's "TOTAL ..... 60.31" rows into separate columns
  and drops faint or dotted parts; read as one block they stay whole. A narrow page is read
  as one block from the start (first_segmentation); a receipt scanned on a sheet (a narrow
  column of text) is read both ways and the reading with more confidence-weighted
  characters wins. Wider pages keep the automatic layout, where one block would interleave
  columns.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from itertools import groupby
from pathlib import Path
from typing import Any, NamedTuple

from ocrq.consumer.engines.cpu import text_block
from ocrq.consumer.engines.faint_print import faint_ink_level, stretched
from ocrq.consumer.engines.receipt_column import Origin, cut_column, in_column
from ocrq.consumer.engines.straighten import straightened
from ocrq.consumer.layout.rects import union
from ocrq.consumer.layout.words import ReadWord
from ocrq.shared.schemas import Block

# tesserocr's PSM.AUTO, PSM.SINGLE_BLOCK and PSM.SINGLE_LINE, named here so that the parent
# process, which never reads, does not load libtesseract to import them.
PSM_AUTO = 3
PSM_SINGLE_BLOCK = 6
PSM_SINGLE_LINE = 7
# Narrower than this (width over height) a page is a till roll. SROIE receipts measure
# 0.34-0.59 (some scanned on a sheet, 0.70-0.77); A4 and Letter pages 0.71-0.77.
NARROW_PAGE = 0.6
# A receipt scanned on a sheet: its text's extent, width over height. Measured: SROIE
# receipts on A4-shaped scans 0.31-0.40, pages of prose, papers and forms 0.60-0.79.
NARROW_TEXT = 0.5
# Mean confidence below which a page may be upside down. Measured: upright receipts read at
# 0.55-0.93 (most above 0.75), pages read upside down at 0.30-0.50.
FLIP_BELOW = 0.6
FLIP_MARGIN = 0.15  # how much more confident the turned reading must be to be kept
# Mean confidence below which a page of faint print is read again stretched (faint_print.py).
FAINT_BELOW = 0.6
SURE_WORD = 0.8  # a word read at least this confidently counts in known_word_share
KNOWN_WORDS_FROM = 5  # fewer words of three letters or more than this give no share

ApiFor = Callable[[str, int], Any]


class Reading(NamedTuple):
    """One reading of a page: the image read, its words (each on its line and paragraph),
    its confidence."""

    path: str  # the image it read
    words: list[ReadWord]
    confidence: float | None
    turned: bool = False  # True: read turned half a turn from the image it was given
    reread: bool = False  # True: a second reading was made and compared
    till_roll: bool = False  # True: a receipt (is_till_roll)
    # Where the image read lies on the page image: its top-left corner there (a receipt's
    # column cut out of a sheet, receipt_column.py); its words are in its own pixels.
    origin: Origin = (0, 0)


def read_image(api: Any, path: str) -> Reading:
    """One full recognition of an image file by this API."""
    api.SetImageFile(path)
    api.Recognize()
    words = read_words(api)
    confidence = round(api.MeanTextConf() / 100, 4) if words else None
    return Reading(path, words, confidence)


def known_word_share(api: Any) -> float:
    """Of the words of three letters or more in the API's last reading, the share that its
    models' word lists hold and that it read at SURE_WORD or above (0 below
    KNOWN_WORDS_FROM such words: too few to tell).

    Text in another script read with Latin models comes back as Latin look-alikes
    ("HanoroBañ", "AHAQÏH YNOBAAAETAI"), few of them words: measured at 0.18 at most on
    Greek, Hebrew, Cyrillic, Japanese and Chinese pages, against 0.23 to 0.95 on Latin
    receipts and pages (BENCHMARKS.md, "Reading quality, seventh pass").
    """
    from tesserocr import RIL

    iterator = api.GetIterator()
    if iterator is None:
        return 0.0
    known = total = 0
    iterator.Begin()
    while True:
        try:
            text = iterator.GetUTF8Text(RIL.WORD) or ""
        except RuntimeError:  # "No text returned": an empty element
            text = ""
        if sum(c.isalpha() for c in text) >= 3:
            total += 1
            sure = iterator.Confidence(RIL.WORD) / 100 >= SURE_WORD
            known += sure and bool(iterator.WordIsFromDictionary())
        if not iterator.Next(RIL.WORD):
            return known / total if total >= KNOWN_WORDS_FROM else 0.0


def first_segmentation(width: int, height: int) -> int:
    """How a page is first read: a narrow page (a till roll) as one block, others as laid out.

    Measured on 40 SROIE receipts with their weak lines read again: reading a narrow receipt
    both ways and keeping the better gave 11.99 % CER, one block alone 12.32 %, at a whole
    Tesseract reading (0.5-0.8 s) less a receipt.
    """
    return PSM_SINGLE_BLOCK if width < NARROW_PAGE * height else PSM_AUTO


def best_reading(
    api_for: ApiFor, languages: str, first: Reading, width: int, height: int
) -> Reading:
    """The page's best reading from its first one (first_segmentation): upright or turned
    over; a receipt scanned on a sheet is cut out (receipt_column.py) and also read there as
    one block, the better kept."""
    psm = first_segmentation(width, height)
    reading = _unfaded(api_for, languages, _right_way_up(api_for, languages, first, psm), psm)
    if psm == PSM_SINGLE_BLOCK:
        return reading._replace(till_roll=True)
    if not is_till_roll(reading.words, width, height):
        return reading
    path, box = cut_column(reading.path, reading.words)
    if reading.path != first.path:  # made here (turned, stretched): the column is read now
        Path(reading.path).unlink(missing_ok=True)
    column = reading._replace(path=path, words=in_column(reading.words, box))
    block = read_image(api_for(languages, PSM_SINGLE_BLOCK), path)
    best = block if weight(block.words) > weight(column.words) else column
    return best._replace(
        turned=reading.turned, reread=True, till_roll=True, origin=(box[0], box[1])
    )


def is_till_roll(words: list[ReadWord], width: int, height: int) -> bool:
    """A narrow page, or a page whose confidently read text forms a narrow column (a receipt
    scanned on a sheet)."""
    if width < NARROW_PAGE * height:
        return True
    sure = [w.box for w in words if w.confidence >= 0.5]
    if not sure:
        return False
    text_width = max(b[2] for b in sure) - min(b[0] for b in sure)
    text_height = max(b[3] for b in sure) - min(b[1] for b in sure)
    return text_width < NARROW_TEXT * text_height


def _unfaded(api_for: ApiFor, languages: str, reading: Reading, psm: int) -> Reading:
    """The reading, or, where it is weak and the print faint, the page read again with its
    ink stretched to black (faint_print.py) when that reads more. After the turn: read
    upside down, both readings are weak whatever the ink, and the stretched one of a
    receipt turned over read worse once upright (CER 22 % against 18 %)."""
    if reading.confidence is None or reading.confidence >= FAINT_BELOW:
        return reading
    ink = faint_ink_level(reading.path)
    if ink is None:
        return reading
    path = stretched(reading.path, ink)
    second = read_image(api_for(languages, psm), path)
    if weight(second.words) <= weight(reading.words):
        Path(path).unlink(missing_ok=True)
        return reading._replace(reread=True)
    if reading.turned:  # a file made by _right_way_up, read no further
        Path(reading.path).unlink(missing_ok=True)
    return second._replace(turned=reading.turned, reread=True)


def _right_way_up(api_for: ApiFor, languages: str, first: Reading, psm: int) -> Reading:
    """The first reading, or the page read turned over when that is far more confident."""
    if first.confidence is None or first.confidence >= FLIP_BELOW:
        return first
    # PIL turns by exactly half a turn without resampling: the same pixels, upside down.
    turned = straightened(first.path, 180, suffix="turned")
    second = read_image(api_for(languages, psm), turned)
    if (second.confidence or 0.0) >= first.confidence + FLIP_MARGIN:
        return second._replace(turned=True, reread=True)
    Path(turned).unlink(missing_ok=True)
    return first._replace(reread=True)


def weight(words: list[ReadWord]) -> float:
    """Characters read, each counted by its word's confidence."""
    return sum(len(w.text) * w.confidence for w in words)


def read_words(api: Any) -> list[ReadWord]:
    """Tesseract's words in its reading order, each with its box, confidence and line."""
    from tesserocr import RIL

    iterator = api.GetIterator()
    if iterator is None:  # nothing on the page
        return []
    words: list[ReadWord] = []
    paragraph, line, size, baseline = -1, -1, 0.0, 0.0
    iterator.Begin()
    while True:
        if iterator.IsAtBeginningOf(RIL.PARA):
            paragraph += 1
        if iterator.IsAtBeginningOf(RIL.TEXTLINE):
            line += 1
            size, baseline = _line_metrics(iterator)
        try:
            text = (iterator.GetUTF8Text(RIL.WORD) or "").strip()
        except RuntimeError:  # "No text returned": an empty element
            text = ""
        box = iterator.BoundingBox(RIL.WORD)
        if text and box:
            confidence = iterator.Confidence(RIL.WORD) / 100
            words.append(ReadWord(text, _rect(box), confidence, line, size, baseline, paragraph))
        if not iterator.Next(RIL.WORD):
            return words


def _rect(box: tuple[int, int, int, int]) -> tuple[float, float, float, float]:
    return (float(box[0]), float(box[1]), float(box[2]), float(box[3]))


def _line_metrics(iterator: Any) -> tuple[float, float]:
    """The current line's font size (its row height) and baseline (mean y), 0 when unknown.

    Measured on a 200 DPI scan: the row height keeps a heading's size over the body's (1.27
    for 14 over 10.5 pt), where the box of a line without descenders shrinks (1.07).
    """
    from tesserocr import RIL

    try:
        row = iterator.RowAttributes()
        (_, y0), (_, y1) = iterator.Baseline(RIL.TEXTLINE)
    except (RuntimeError, TypeError, ValueError):
        return 0.0, 0.0
    return float(row.get("row_height", 0.0)), (float(y0) + float(y1)) / 2


def paragraph_blocks(words: list[ReadWord], width: int, height: int) -> list[Block]:
    """The engine's paragraphs in its reading order, each a text block with its box: lines
    joined by line breaks, the words' mean confidence."""
    blocks = []
    for _, group in groupby(words, key=lambda word: word.paragraph):
        paragraph = list(group)
        lines = groupby(paragraph, key=lambda word: word.line)
        text = "\n".join(" ".join(word.text for word in line) for _, line in lines)
        box = reduce(union, (word.box for word in paragraph))
        confidence = sum(word.confidence for word in paragraph) / len(paragraph)
        blocks.append(text_block(box, text, confidence, width, height))
    return blocks
