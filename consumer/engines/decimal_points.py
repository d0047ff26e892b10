"""Decimal points the readings left out of a number, put back where the pixels show them.

At 150 DPI a decimal point is a speck of two or three pixels, and both recognisers drop it
from numbers: a table's "76.6 85.2" came back as "766 852" beside "79.8 71.0" on the same
row, a receipt's "0.70" as "070". The point is still on the page: a small blot on the
baseline between two digits. A number read as digits alone gets its point back where its
image shows exactly one such blot standing clear between two of its digits (a serif "1"'s
foot broken off its stem lies against it), with nothing over it (a colon), each digit one
blot, alike in size (faint print breaks and joins digits), and where the point leaves as
many digits after it as the page's other numbers have after theirs (two on a receipt, one
in that table): a speck elsewhere is not taken for a point. On held-out documents the
numbers with a point read exactly went from 237 to 281 of 299, every change a point put in
(BENCHMARKS.md, "Reading quality, seventeenth pass").

Receipts break amounts two more ways. A fixed-width font gives the point a whole character's
cell, whose blank sides read as a space: "RM1." "38", "21" ".60". And a point read as a comma
("98,37" beside "98.37"). On a page whose amounts (two places) are mostly written with a point,
an amount read with a comma gets a point (a thousands comma has three digits after it), and
the two halves of one split at its point are joined where they stand closer than SPLIT_GAP.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy
from PIL import Image

from ocrq.consumer.layout.ink import ink_parts, otsu_level
from ocrq.consumer.layout.words import ReadWord

DIGITS = re.compile(r"\d{2,}")
DECIMAL = re.compile(r"\d+([.,])(\d+)")
DIGIT_HEIGHT = 0.45  # of the word's height: a blot this tall is a digit
SAME_HEIGHT = 0.7  # of the tallest digit: the least height of each of a number's digits
SAME_WIDTH = 0.6  # of their median width: the least width of each digit but a "1"
POINT_SIZE = 0.3  # of the digits' height: a point is no wider nor taller than this
BASELINE = 0.15  # of the digits' height: a point's foot is this close to the digits' foot
# Amounts: a currency or sign before, letters after (a receipt's tax code: "9.90SR").
AMOUNT = re.compile(r"[A-Za-z$€£(+-]{0,3}\d+[.,]\d{2}[A-Za-z)%*]{0,3}")
COMMA_AMOUNT = re.compile(r"[A-Za-z$€£(+-]{0,3}\d+,\d{2}[A-Za-z)%*]{0,3}")
POINT_ENDED = re.compile(r"[A-Za-z$€£(+-]{0,3}\d+\.")
NUMBER_ENDED = re.compile(r"[A-Za-z$€£(+-]{0,3}\d+")
CENTS = re.compile(r"\d{2}[A-Za-z)%*]{0,3}")
POINT_CENTS = re.compile(r"\.\d{2}[A-Za-z)%*]{0,3}")
MIN_POINT_AMOUNTS = 3
POINT_MAJORITY = 2
# Of a character's width: on 80 receipts (SROIE 300-379) the 32 pairs -1.1 to 1.5 characters
# apart were each one amount split at its point; of 5 pairs 1.7 or more apart, one was.
SPLIT_GAP = 1.6
Blot = tuple[int, int, int, int]  # a connected blot of ink: x, y, width, height


def with_decimal_points(image_path: str, words: Sequence[ReadWord]) -> list[ReadWord]:
    """The words, numbers read without their decimal point given it back (see above)."""
    places = _decimal_places(words)
    if not places:
        return list(words)
    separator, counts = places
    out = _points_put_back(image_path, words, separator, counts)
    if separator == "." and _point_page(out):
        out = _commas_as_points(image_path, _split_amounts_joined(out))
    return out


def _grey(image_path: str) -> numpy.ndarray:
    """The page image in grey levels."""
    with Image.open(image_path) as opened:
        return numpy.asarray(opened.convert("L"))


def _points_put_back(
    image_path: str, words: Sequence[ReadWord], separator: str, counts: set[int]
) -> list[ReadWord]:
    """The words, each digits-only one whose pixels show a point between its digits given it."""
    candidates = [i for i, word in enumerate(words) if DIGITS.fullmatch(word.text)]
    if not candidates:
        return list(words)
    grey = _grey(image_path)
    out = list(words)
    for i in candidates:
        at = _point_position(grey, words[i])
        if at is not None and len(words[i].text) - at in counts:
            text = words[i].text
            out[i] = words[i]._replace(text=f"{text[:at]}{separator}{text[at:]}")
    return out


def _point_page(words: Sequence[ReadWord]) -> bool:
    """True where the page's amounts (two places) are written with a point: at least
    MIN_POINT_AMOUNTS of them, and POINT_MAJORITY times as many as with a comma."""
    points = sum(1 for w in words if AMOUNT.fullmatch(w.text) and "." in w.text)
    commas = sum(1 for w in words if AMOUNT.fullmatch(w.text) and "," in w.text)
    return points >= MIN_POINT_AMOUNTS and points >= POINT_MAJORITY * commas


def _commas_as_points(image_path: str, words: list[ReadWord]) -> list[ReadWord]:
    """The words, an amount read with a comma given a point where its pixels show a point:
    on a page of amounts with a point, "98,37" beside "98.37" is a point read as a comma (a
    thousands comma has three digits after it, never two); an address's "55,57" is drawn
    with a comma's tail below the digits."""
    commas = [i for i, word in enumerate(words) if COMMA_AMOUNT.fullmatch(word.text)]
    if not commas:
        return words
    grey = _grey(image_path)
    out = list(words)
    for i in commas:
        if _drawn_as_point(grey, words[i]):
            out[i] = words[i]._replace(text=words[i].text.replace(",", "."))
    return out


def _drawn_as_point(grey: numpy.ndarray, word: ReadWord) -> bool:
    """True where the word's pixels show one small mark in its lower half, its separator,
    and it ends on the baseline of the characters around it, not below it as a comma's tail
    does; False where unsure (faint print breaks digits into marks of their own)."""
    x0, y0, x1, y1 = (round(v) for v in word.box)
    crop = grey[max(y0, 0) : y1, max(x0, 0) : x1]
    if crop.size == 0 or crop.min() == crop.max():
        return False
    blots = ink_blots(crop)
    tall_blots = [b for b in blots if b[3] >= DIGIT_HEIGHT * crop.shape[0]]
    if not tall_blots:
        return False
    tall = max(b[3] for b in tall_blots)
    foot = max(b[1] + b[3] for b in tall_blots)
    marks = [
        (y, h)
        for x, y, w, h in blots
        if h < DIGIT_HEIGHT * crop.shape[0] and w <= tall / 2 and y + h > foot - tall / 2
    ]
    return len(marks) == 1 and marks[0][0] + marks[0][1] - foot <= BASELINE * tall


def _split_amounts_joined(words: list[ReadWord]) -> list[ReadWord]:
    """The words, an amount read as two ("21." "10SR", "RM1" ".38") joined again where the
    gap between them is narrower than SPLIT_GAP characters: a receipt's fixed-width font
    gives the point a whole character's cell, whose blank sides read as a space."""
    out: list[ReadWord] = []
    for word in words:
        last = out[-1] if out else None
        if last is not None and _split_amount(last, word):
            x0, y0, x1, y1 = last.box
            box = (
                min(x0, word.box[0]),
                min(y0, word.box[1]),
                max(x1, word.box[2]),
                max(y1, word.box[3]),
            )
            confidence = min(last.confidence, word.confidence)
            out[-1] = last._replace(text=last.text + word.text, box=box, confidence=confidence)
        else:
            out.append(word)
    return out


def _split_amount(left: ReadWord, right: ReadWord) -> bool:
    """True where the two words on one line are the two halves of an amount, split at its
    point, with less than SPLIT_GAP of a character between them."""
    if left.line != right.line or not (
        (POINT_ENDED.fullmatch(left.text) and CENTS.fullmatch(right.text))
        or (NUMBER_ENDED.fullmatch(left.text) and POINT_CENTS.fullmatch(right.text))
    ):
        return False
    cell = (right.box[2] - right.box[0]) / len(right.text)
    return left.box[0] < right.box[0] and right.box[0] - left.box[2] < SPLIT_GAP * cell


def _decimal_places(words: Sequence[ReadWord]) -> tuple[str, set[int]] | None:
    """The page's decimal separator and how many digits its numbers have after it."""
    found = [m for w in words if (m := DECIMAL.fullmatch(w.text.strip("()$€£%:;")))]
    if not found:
        return None
    separator = Counter(m.group(1) for m in found).most_common(1)[0][0]
    return separator, {len(m.group(2)) for m in found if m.group(1) == separator}


def _point_position(grey: numpy.ndarray, word: ReadWord) -> int | None:
    """How many of the word's digits lie before the one point its pixels show between two
    of them; None where there is no such point, or more than one, or the digits are not
    one blot each."""
    x0, y0, x1, y1 = (round(v) for v in word.box)
    crop = grey[max(y0, 0) : y1, max(x0, 0) : x1]
    if crop.size == 0 or crop.min() == crop.max():
        return None
    blots = ink_blots(crop)
    height = crop.shape[0]
    digits = [b for b in blots if b[3] >= DIGIT_HEIGHT * height]
    if len(digits) != len(word.text) or not _one_blot_a_digit(digits, word.text):
        return None
    tall = max(b[3] for b in digits)
    foot = max(b[1] + b[3] for b in digits)
    marks = [b for b in blots if b not in digits]
    points = [b for b in marks if _is_point(b, tall, foot)]
    if len(points) != 1 or any(_above(b, points[0]) for b in marks):
        return None  # no point, several, or a colon's lower dot
    return _gap_index(points[0], digits)


def ink_blots(grey: numpy.ndarray) -> list[Blot]:
    """The grey image's blots of ink (darker than its Otsu level, 8-connected), left to right."""
    mask = grey <= otsu_level(grey)
    return sorted((a, b, c - a + 1, d - b + 1) for a, b, c, d in ink_parts(mask))


def _one_blot_a_digit(digits: list[Blot], text: str) -> bool:
    """True where the blots look like the text's digits one by one: all about as tall, none
    wider than tall (two digits run together), and none but a "1" much narrower than the
    others (a digit broken in two). Faint print breaks and joins digits: SROIE 334's
    postcode "40300" made five blots, a "0" in two halves and "00" in one, with a speck
    between them on the baseline."""
    tall = max(b[3] for b in digits)
    if any(b[3] < SAME_HEIGHT * tall or b[2] > tall for b in digits):
        return False
    widths = sorted(b[2] for b, char in zip(digits, text, strict=True) if char != "1")
    if not widths:
        return True
    usual = widths[len(widths) // 2]
    return all(
        b[2] >= SAME_WIDTH * usual for b, char in zip(digits, text, strict=True) if char != "1"
    )


def _is_point(blot: Blot, digit: int, foot: int) -> bool:
    """True for a dot (small, about as wide as tall) on the digits' baseline."""
    _, y, w, h = blot
    small = w <= POINT_SIZE * digit and h <= POINT_SIZE * digit and w <= 2 * h and h <= 2 * w
    return small and abs(y + h - foot) <= BASELINE * digit


def _above(blot: Blot, point: Blot) -> bool:
    """True where the blot lies over the point, sharing a column with it."""
    x, y, w, h = blot
    return y + h <= point[1] and x < point[0] + point[2] and point[0] < x + w


def _gap_index(blot: Blot, digits: list[Blot]) -> int | None:
    """i where the blot stands clear between digits i-1 and i, a blank column either side:
    the foot of a serif "1" broken off its stem touches it (SROIE 379's "100")."""
    for i in range(1, len(digits)):
        left, right = digits[i - 1], digits[i]
        if left[0] + left[2] < blot[0] and blot[0] + blot[2] < right[0]:
            return i
    return None
