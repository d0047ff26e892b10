"""Where on the pages a value (an LLM's answer) was read from: its lines and word boxes.

A string is looked for in each line, then in two to four lines joined (an address); a number
among the line's amounts; a date among the line's dates, compared as dates. A value found
nowhere stays ungrounded: no page, no box.
"""

from __future__ import annotations

import re
from typing import Any

from ocrq.consumer.fields.keyvalue import Found, words_box
from ocrq.consumer.fields.lines import Line
from ocrq.consumer.fields.values import read_date

EXACT, NORMALISED = 0.9, 0.7
_AMOUNT = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def fold(text: str) -> str:
    """Case, spacing and edge punctuation folded away, for comparing page text with a value."""
    return re.sub(r"\s+", " ", text).strip(" .,:;").lower()


def locate(value: Any, lines: list[Line]) -> Found | None:
    """The lines a value was read from, or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _number_in(float(value), lines)
    text = str(value)
    if not fold(text):
        return None
    if _ISO_DATE.match(text):
        return _text_in(text, lines) or _date_in(text[:10], lines)
    return _text_in(text, lines)


def _text_in(text: str, lines: list[Line]) -> Found | None:
    wanted = fold(text)
    for line in lines:
        at = line.text.lower().find(wanted)
        if at >= 0:
            boxes = words_box(line, at, at + len(wanted))
            return Found(text, line.text[at : at + len(wanted)], line.page, boxes, EXACT)
    for span in (2, 3, 4):
        for i in range(len(lines) - span + 1):
            run = lines[i : i + span]
            if (
                len({ln.page for ln in run}) == 1
                and fold(" ".join(ln.text for ln in run)).find(wanted) >= 0
            ):
                joined = " ".join(ln.text for ln in run)
                return Found(text, joined, run[0].page, [ln.box for ln in run], EXACT)
    return None


def _number_in(number: float, lines: list[Line]) -> Found | None:
    for line in lines:
        for match in _AMOUNT.finditer(line.text):
            try:
                seen = float(match.group().replace(",", ""))
            except ValueError:
                continue
            if abs(seen - number) < 0.005:
                boxes = words_box(line, match.start(), match.end())
                return Found(number, match.group(), line.page, boxes, NORMALISED)
    return None


def _date_in(iso: str, lines: list[Line]) -> Found | None:
    for line in lines:
        read = read_date(line.text, {"format": "date"})
        if read is not None and read[0] == iso:
            at = line.text.find(read[1])
            boxes = words_box(line, at, at + len(read[1]))
            return Found(iso, read[1], line.page, boxes, NORMALISED)
    return None
