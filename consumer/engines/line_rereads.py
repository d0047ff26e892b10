"""The confidence-gated re-read: weak lines of Tesseract's reading read again by PP-OCRv6.

A line whose words Tesseract read with little confidence is cut from the page image and
read by a second recogniser (consumer/engines/line_reader.py). Where that one is surer of
the line than Tesseract was, the line keeps its characters, with a space wherever either
reading saw one: PP-OCRv6 reads characters better but runs words together ("TOTALRM"),
Tesseract keeps words apart but misreads their letters ("T0TAL", "Sdn biid"). The words
keep Tesseract's boxes where they are the same words, and otherwise get boxes from where
PP-OCRv6 placed their characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher
from functools import reduce
from typing import NamedTuple, Protocol

import numpy
from PIL import Image, ImageDraw

from ocrq.consumer.engines.cjk_spacing import has_cjk
from ocrq.consumer.engines.line_gaps import squeezed, unsqueezed
from ocrq.consumer.engines.line_reader import LINE_HEIGHT, MIN_WIDTH, LineText
from ocrq.consumer.layout.rects import area, centre_inside, clip, union
from ocrq.consumer.layout.structure import Rect
from ocrq.consumer.layout.words import ReadWord, engine_lines

# A line read below this mean confidence (Tesseract's, 0..1, weighted by characters) is read
# again. Measured on receipts and pages (BENCHMARKS.md): re-reading every line gains little
# more, and lines read at 0.95 or above are almost always right already.
WEAK_LINE = 0.95
PAD = 0.15  # of the line's height, added round its box before it is cut out
TALL_WORD = 1.5  # times the line's median word height: left out of the height cut out
# The most a page spends on second readings, in columns of the model's input (its time is
# about proportional: 58 µs a column on one core here, so about a second a page). A page of
# weak lines (a poor scan, a dense form) reads its weakest within it.
BUDGET_COLUMNS = 16_000
# A line Tesseract read below this, in which the second recogniser finds no letter or digit,
# is not text: a dashed rule crossed by a stamp, which Tesseract read "Fone nn 2 +--+ + = eet"
# and PP-OCRv6 "十-一------一-", or specks read ". =".
# Such lines are dropped (BENCHMARKS.md, "Reading quality, third pass").
NOT_TEXT = 0.5
# ... and so are those in which it reads few of the letters and digits the first reading
# found: a dashed rule that Tesseract read "de AA à a de Aa EE AR AR ah A 296 La RE" (45
# letters) PP-OCRv6 read "2" (SROIE 307).
SCANT = 0.25
# A second reading this much shorter or longer than the first (characters, spaces aside) is
# of something else (two lines in one box, a rule, a picture): the first is kept.
LENGTH_RATIO = 2.0
# ... unless the second is shorter and this sure of a line the first read below WEAK_FIRST.
SURE_SECOND = 0.9
WEAK_FIRST = 0.6
# An own word with this share of its area (or more) inside another line's word is that
# word's ink read into the line (a dot of its "i"): it does not keep the word in the cut.
# Half or more: a 2 x 2 px speck half inside 160F's "Cotisations" is one (rects.mostly_inside
# asks for more than half).
SAME_INK = 0.5


class ReadsLines(Protocol):
    def read(self, line: Image.Image) -> LineText: ...


class Reread(NamedTuple):
    """The page's words after the re-read, and how many lines were read again and kept."""

    words: list[ReadWord]
    lines_read: int
    lines_kept: int


def reread_weak_lines(image_path: str, words: Sequence[ReadWord], reader: ReadsLines) -> Reread:
    """Read again the page's weak lines, weakest first within the page's budget; keep the
    surer reading, line by line."""
    lines = engine_lines(words)
    weak = weakest_lines(lines)
    if not weak:
        return Reread(list(words), 0, 0)
    kept = 0
    with Image.open(image_path) as opened:
        image = opened.convert("RGB")
    for i in weak:
        others = [word.box for j, line in enumerate(lines) if j != i for word in line]
        better = reread_line(lines[i], image, reader, others)
        if better is not None:
            lines[i], kept = better, kept + 1
    return Reread([word for line in lines for word in line], len(weak), kept)


def reread_line(
    line: list[ReadWord], image: Image.Image, reader: ReadsLines, others: Sequence[Rect] = ()
) -> list[ReadWord] | None:
    """The line as the second reading leaves it, [] where it is not text; None: the first
    reading stands. Of a line found not to be text, the words taller than its cut (left
    out of it) are read on their own: beside a dashed rule, "TAX INVOICE" can be text.
    Words of other lines (``others``, boxes) between the line's own are painted over (``_cut``)."""
    text = _text_box(line)
    x0, y0, x1, y1 = (round(v) for v in _padded(text, *image.size))
    shown = _cut(image, (x0, y0, x1, y1), text, [w.box for w in line], others)
    squeeze = squeezed(shown, [w.box for w in line], x0, text[3] - text[1])
    second = unsqueezed(reader.read(squeeze.image), squeeze)
    if not not_text(line, second):
        return better_line(line, second, x0)
    cut = _cut_words(line)
    taller = [word for word in line if word not in cut]
    if not taller:
        return []
    again = reread_line(taller, image, reader, others)
    return taller if again is None else again


def _cut(
    image: Image.Image,
    box: tuple[int, int, int, int],
    text: Rect,
    own: Sequence[Rect],
    others: Sequence[Rect],
) -> Image.Image:
    """The line's cut (``box``) from the page, with the words of other lines that sit in a
    gap between its own words painted over in the cut's paper colour.

    Tesseract may put a row's words on two lines (a form's columns: 160F's "8 1. cotisations
    sociales" came as "el . 4" on one line and "c otisations sociales" on another), and the
    box of one then spans the other's words: read again, they were written twice. Such a
    word has its centre inside the line's ``text`` box and shares no column with the line's
    own words (but for marks of its own ink read into the line, mostly inside it). A word of
    the next line under the line's words is left as it was: painted over on SROIE 005, the
    cut of "***Thank You***" over a circled sum read surer as "Thank You 31-00", its
    asterisks lost. Where the boxes meet, the line's own words keep their ink.
    """
    original = image.crop(box)
    crop = original.copy()
    x0, y0, _, _ = box
    hidden = [other for other in others if _in_a_gap(other, text, own)]
    if hidden and crop.width and crop.height:
        paper = tuple(int(v) for v in numpy.percentile(numpy.asarray(crop), 90, axis=(0, 1)))
        draw = ImageDraw.Draw(crop)
        for a, b, c, d in hidden:
            draw.rectangle((a - x0, b - y0, c - x0 - 1, d - y0 - 1), fill=paper)
        for left, top, right, bottom in own:
            at = (round(left - x0), round(top - y0))
            crop.paste(original.crop((*at, round(right - x0), round(bottom - y0))), at)
    return crop


def _in_a_gap(other: Rect, text: Rect, own: Sequence[Rect]) -> bool:
    """True for a word whose centre is inside the line's text box and whose columns no own
    word shares; an own word with SAME_INK of its area inside it is its ink read into the
    line (a dot of its "i") and does not count."""
    if not centre_inside(other, text):
        return False
    return not any(
        word[0] < other[2]
        and other[0] < word[2]
        and area(clip(word, other)) < SAME_INK * area(word)
        for word in own
    )


def weakest_lines(lines: list[list[ReadWord]]) -> list[int]:
    """The weak lines to read again, weakest first, as many as the page's budget allows."""
    confidences = [(line_confidence(line), i) for i, line in enumerate(lines)]
    chosen, spent = [], 0.0
    for _, i in sorted(item for item in confidences if item[0] < WEAK_LINE):
        spent += reading_cost(_text_box(lines[i]))
        if spent > BUDGET_COLUMNS:
            break
        chosen.append(i)
    return chosen


def reading_cost(box: Rect) -> float:
    """What reading a line costs the second recogniser: its width at the model's height."""
    x0, y0, x1, y1 = box
    return max(LINE_HEIGHT * (x1 - x0) / max(y1 - y0, 1.0), MIN_WIDTH)


def line_confidence(line: Sequence[ReadWord]) -> float:
    """Tesseract's confidence in a line: its words', weighted by their characters."""
    chars = sum(len(word.text) for word in line)
    return sum(word.confidence * len(word.text) for word in line) / max(chars, 1)


def not_text(line: list[ReadWord], second: LineText) -> bool:
    """True for a weak line in which the second recogniser reads no letter or digit (Han
    aside: on these Latin pages a dashed rule reads as 一 and 十), or fewer than a
    SCANT share of those the first read."""
    letters = sum(c.isalnum() and not has_cjk(c) for c in second.text)
    first = sum(c.isalnum() for word in line for c in word.text)
    return line_confidence(line) < NOT_TEXT and (not letters or letters < SCANT * first)


def better_line(line: list[ReadWord], second: LineText, left: float) -> list[ReadWord] | None:
    """The line as merged words, when the second reading is the surer; else None."""
    plain_first = "".join(word.text for word in line)
    plain_second = second.text.replace(" ", "")
    if not plain_second or second.confidence <= line_confidence(line):
        return None
    if has_cjk(plain_second):  # a rule or dots read as 一 and 十: the model knows Chinese too
        return None
    second = _half_width(second)
    ratio = len(plain_second) / max(len(plain_first), 1)
    if ratio > LENGTH_RATIO or (ratio < 1 / LENGTH_RATIO and not _noise_left_out(line, second)):
        return None
    return _merged_words(line, second, left)


def _noise_left_out(line: list[ReadWord], second: LineText) -> bool:
    """True when a far shorter second reading is sure of a line the first read weakly: what
    the first read more is noise (a rule read "ssi—(C;C;*" after "GST SUMMARY", a boxed
    "CASH" read "r “A SH ee ~ OT"). Far longer, it is not kept however sure: a crop round
    a speck or a stamp ("+", "Wa") takes in the next line's text, read twice then."""
    return second.confidence >= SURE_SECOND and line_confidence(line) < WEAK_FIRST


def _half_width(reading: LineText) -> LineText:
    """Full-width forms as the ASCII they stand for (U+FF08 as "("): a Latin page's text."""
    chars = [chr(ord(c) - 0xFEE0) if "\uff01" <= c <= "\uff5e" else c for c in reading.chars]
    return LineText(chars, reading.probabilities, reading.centres)


Span = tuple[int, int]  # a word's first and last character in the second reading


class _Char(NamedTuple):
    char: str
    centre: float  # page pixels


def _merged_words(line: list[ReadWord], second: LineText, left: float) -> list[ReadWord]:
    """The second reading's characters cut into words where either reading has a space."""
    plain: list[_Char] = []
    cuts: set[int] = set()
    for c, x in zip(second.chars, second.centres, strict=True):
        if not c.isspace():
            plain.append(_Char(c, left + x))
        elif plain:
            cuts.add(len(plain) - 1)
    first_words = [word.text for word in line]
    spans = _first_spans(first_words, "".join(c.char for c in plain))
    # The first reading's spaces; a word the second reading has nothing of (a rule or speck
    # read as "|" or "~~" before a line) makes none: it cut "Total" into "T otal".
    cuts |= {span[1] for span in spans[:-1] if span is not None}
    ends = sorted({cut for cut in cuts if cut < len(plain) - 1} | {len(plain) - 1})
    starts = [0, *(end + 1 for end in ends[:-1])]
    words = [_word(line, plain, a, b, spans) for a, b in zip(starts, ends, strict=True)]
    sure = round(second.confidence, 4)
    return [word._replace(second_confidence=sure) for word in words]


def _mapping(first: str, second: str) -> list[int]:
    """For each character of `first`, the index of the character of `second` it stands for
    (-1: the second reading has nothing for it)."""
    out = [0] * len(first)
    for op, i1, i2, j1, j2 in SequenceMatcher(None, first, second, autojunk=False).get_opcodes():
        for i in range(i1, i2):
            if op == "equal":
                out[i] = j1 + i - i1
            elif op == "replace":
                out[i] = j1 + (i - i1) * (j2 - j1) // (i2 - i1)
            else:
                out[i] = -1
    return out


def _first_spans(first_words: list[str], second: str) -> list[Span | None]:
    """Each first-reading word's first and last character in the second reading (None: the
    second reading has none of its characters)."""
    mapping = _mapping("".join(first_words), second)
    spans: list[Span | None] = []
    start = 0
    for word in first_words:
        part = [index for index in mapping[start : start + len(word)] if index >= 0]
        spans.append((min(part), max(part)) if part else None)
        start += len(word)
    return spans


def _word(
    line: list[ReadWord], chars: list[_Char], a: int, b: int, spans: list[Span | None]
) -> ReadWord:
    """Characters a..b as a word: the first reading's box when it is that same word.

    Its confidence stays the first reading's (of the words it overlaps): the layout steps
    measure Tesseract's confidence (what is text, what a picture's texture), not PP-OCRv6's.
    """
    inside = [k for k, span in enumerate(spans) if span and span[0] <= b and span[1] >= a]
    only = spans[inside[0]] if len(inside) == 1 else None
    if only and a <= only[0] and only[1] <= b:
        box = line[inside[0]].box
    else:
        box = _box_from_centres(line, chars, a, b)
    confidence = (
        sum(line[k].confidence for k in inside) / len(inside) if inside else line_confidence(line)
    )
    text = "".join(c.char for c in chars[a : b + 1])
    return line[0]._replace(text=text, box=box, confidence=round(confidence, 4))


def _box_from_centres(line: list[ReadWord], chars: list[_Char], a: int, b: int) -> Rect:
    """A box from the characters' centres: half-way to the neighbours, within the line."""
    x0, _, x1, _ = _line_box(line)
    _, top, _, bottom = _text_box(line)
    pitch = (chars[-1].centre - chars[0].centre) / max(len(chars) - 1, 1)
    # centres[k + 1] is chars[k]'s; one pitch beyond each end stands for the line's ends.
    centres = [chars[0].centre - pitch, *(c.centre for c in chars), chars[-1].centre + pitch]
    left = (centres[a] + centres[a + 1]) / 2
    right = (centres[b + 1] + centres[b + 2]) / 2
    return (max(x0, left), top, min(x1, max(right, left + 1)), bottom)


def _line_box(line: Sequence[ReadWord]) -> Rect:
    return reduce(union, (word.box for word in line))


def _text_box(line: Sequence[ReadWord]) -> Rect:
    """The line's box as cut out: its words' extent, but only as tall as its text. A word far
    taller than the others (an icon, a stamp read as a word) would shrink the text in the
    model's 48 pixels, and it then drops characters (measured: "run on their" read "ru o
    heir" beside a note icon)."""
    (x0, _, x1, _), (_, y0, _, y1) = _line_box(line), _line_box(_cut_words(line))
    return (x0, y0, x1, y1)


def _cut_words(line: Sequence[ReadWord]) -> list[ReadWord]:
    """The words whose height the cut takes: all but those far taller than the others."""
    heights = sorted(word.box[3] - word.box[1] for word in line)
    limit = TALL_WORD * heights[len(heights) // 2]
    return [word for word in line if word.box[3] - word.box[1] <= limit] or list(line)


def _padded(box: Rect, width: int, height: int) -> Rect:
    pad = max(2.0, PAD * (box[3] - box[1]))
    return (
        max(0.0, box[0] - pad),
        max(0.0, box[1] - pad),
        min(float(width), box[2] + pad),
        min(float(height), box[3] + pad),
    )
