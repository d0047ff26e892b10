"""Fields without an LLM: labels on the page matched to the schema, their values beside them.

For each scalar the schema asks for, the labels to look for are its name's words (with a few
common abbreviations: "no" for number…), its title and a short description. A line holding a
label gives the value after it on the same line, else on the line below; the value must read
as the property's kind (consumer/fields/values.py), so "Date: soon" is no date. When several
lines qualify, the one whose text before the value is most nearly the label alone wins, and
for amounts the largest ("Total" over "Total tax"). Without any label, a date, e-mail, phone,
IBAN, card or VAT number is taken as the first valid one on the page, a company or vendor as
the first line of text, an address as the lines that look like one near the top: each with a
lower confidence. Values nested in arrays (line items) are not read in this mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ocrq.consumer.fields.lines import Box, Line, union
from ocrq.consumer.fields.values import kind_of, name_words, read_value
from ocrq.shared.field_schema import leaf_paths

_ABBREVIATIONS = {
    "number": ["no", "nr", "num", "#"],
    "date": ["dated"],
    "total": ["grand total", "amount due", "total due", "balance due"],
    "telephone": ["tel"],
    "phone": ["tel", "telephone"],
}
_PARTY_WORDS = frozenset(
    "company vendor merchant seller supplier store shop issuer business".split()
)
_LEGAL_FORM = re.compile(
    r"\b(sdn\.? bhd|bhd|ltd|limited|llc|inc|gmbh|plc|corp|s\.a\.|s\.a\.r\.l|pte|pty|"
    r"enterprise|trading|company)\b\.?",
    re.I,
)
_REGISTRATION = re.compile(r"\b(co\.? ?reg|gst|reg\.? no)\b|\(\s*\d{4,}-\w\s*\)|^\d{5,}-\w$", re.I)
# Not label text: currencies and leaders between a label and its amount ("TOTAL RM ....").
_FILLER = re.compile(r"\b(rm|usd|eur|gbp|myr|sgd|chf|inr)\b|[$€£¥:=#.*_-]+", re.I)
# A final amount's words: "Total rounded", "Grand total", "Nett total" and "Total amount" are
# the total, not a step to it.
_FINAL_WORDS = re.compile(r"\b(rounded|grand|payable|due|nett?|amount|amt)\b", re.I)
BELOW_SHARE = 0.6  # a value on the line below its label counts for less than one beside it
_ADDRESS_CUE = re.compile(
    r"\b(jalan|jln|street|st|road|rd|avenue|ave|lane|taman|lot|no\.?\s*\d+|\d{5}|strasse|rue)\b",
    re.I,
)
_NOT_ADDRESS = re.compile(r"\b(tel|fax|phone|gst|date|invoice|receipt|email|www)\b", re.I)
LABEL_CONFIDENCE, BELOW_CONFIDENCE, GUESS_CONFIDENCE = 0.9, 0.75, 0.4


@dataclass
class Found:
    """A value read from the page and where."""

    value: Any
    text: str
    page: int
    boxes: list[Box]
    confidence: float
    score: float = 0.0


def label_phrases(name: str, schema: dict[str, Any]) -> list[str]:
    """The label texts that name a property, longest first."""
    words = name_words(name)
    phrases = {" ".join(words)}
    for i, word in enumerate(words):
        for short in _ABBREVIATIONS.get(word, []):
            phrases.add(" ".join([*words[:i], short, *words[i + 1 :]]))
    if len(words) > 1 and kind_of(name, schema) not in ("text", "number"):
        # A typed value checks itself: "Date:" labels invoice_date, "Total" a total_amount.
        phrases.add(words[-1])
    for key in ("title", "description"):
        text = str(schema.get(key, "")).strip().lower().rstrip(".")
        if text and len(text.split()) <= 4:
            phrases.add(text)
    return sorted((p for p in phrases if p), key=len, reverse=True)


def read_fields(schema: dict[str, Any], lines: list[Line]) -> dict[str, Found | None]:
    """Every scalar path of the schema (arrays left out) and what was found for it."""
    found: dict[str, Found | None] = {}
    for path, sub in leaf_paths(schema):
        if "*" in path.split("/"):
            continue
        name = path.rsplit("/", 1)[-1]
        found[path] = labelled(name, sub, lines) or unlabelled(name, sub, lines)
    return found


def labelled(name: str, schema: dict[str, Any], lines: list[Line]) -> Found | None:
    """The best value beside (or below) a label of the property."""
    phrases = label_phrases(name, schema)
    amount = kind_of(name, schema) == "amount"
    best: Found | None = None
    for index in range(len(lines)):
        found = beside_or_below(lines, index, phrases, name, schema)
        if found is not None and (best is None or _better(found, best, amount)):
            best = found
    return best


def beside_or_below(
    lines: list[Line], index: int, phrases: list[str], name: str, schema: dict[str, Any]
) -> Found | None:
    """The value a label on line ``index`` names, scored: beside it, else on the line below."""
    line = lines[index]
    hit = label_at(line.text, phrases)
    if hit is None:
        return None
    start, end = hit
    amount = kind_of(name, schema) == "amount"
    found = value_on(line, end, name, schema, LABEL_CONFIDENCE)
    if found is not None:
        found.score = label_share(line.text, start, end, found.text, amount)
        return found
    below = line_below(lines, index)
    found = value_on(below, 0, name, schema, BELOW_CONFIDENCE) if below else None
    if found is not None:  # the label's whole line is its key part
        found.score = BELOW_SHARE * label_share(line.text, start, end, "", amount)
    return found


def _better(found: Found, best: Found, amount: bool) -> bool:
    """The best share wins; among equals, for an amount, the later line: a document's final
    total comes after its subtotals ("Total", "Rounding", "Total rounded")."""
    if abs(found.score - best.score) > 1e-6:
        return found.score > best.score
    return amount


def label_share(text: str, start: int, end: int, value: str, amount: bool) -> float:
    """How much of the text before the value the label is: 1 for "Total: 9.00"."""
    at = text.find(value, end) if value else -1
    key = text[: at if at >= 0 else len(text)]
    key = _FILLER.sub(" ", key)
    label = _FILLER.sub(" ", text[start:end])
    if amount:
        key, label = _FINAL_WORDS.sub(" ", key), _FINAL_WORDS.sub(" ", label)
    return len(label.split()) / max(1, len(key.split()))


def label_at(text: str, phrases: list[str]) -> tuple[int, int] | None:
    """Where the first of the phrases appears in the line as whole words (case-insensitive)."""
    lowered = text.lower()
    for phrase in phrases:
        pattern = rf"(?<![\w]){re.escape(phrase)}\.?(?![\w])"
        match = re.search(pattern, lowered)
        if match:
            return match.start(), match.end()
    return None


def value_on(
    line: Line, offset: int, name: str, schema: dict[str, Any], confidence: float
) -> Found | None:
    """The property's value in the line's text from ``offset``, boxed by its words."""
    text = line.text
    read = read_value(text[offset:], name, schema)
    if read is None:
        return None
    value, source = read
    at = text.find(source, offset)
    boxes = words_box(line, at, at + len(source)) if at >= 0 else [line.box]
    return Found(value, source, line.page, boxes, round(confidence * line.confidence, 3))


def words_box(line: Line, start: int, end: int) -> list[Box]:
    """The box around the line's words that overlap characters start..end."""
    boxes, position = [], 0
    for word in line.words:
        if position < end and position + len(word.text) > start:
            boxes.append(word.box)
        position += len(word.text) + 1
    return [union(boxes)] if boxes else [line.box]


def line_below(lines: list[Line], index: int) -> Line | None:
    """The next line down the same page that overlaps this one across."""
    line = lines[index]
    x0, _, x1, bottom = line.box
    for other in lines[index + 1 : index + 6]:
        ox0, top, ox1, _ = other.box
        if other.page == line.page and top >= bottom - 0.005 and ox0 < x1 and ox1 > x0:
            return other
    return None


def unlabelled(name: str, schema: dict[str, Any], lines: list[Line]) -> Found | None:
    """A value found by its shape or place alone (see the module docstring)."""
    kind = kind_of(name, schema)
    words = set(name_words(name))
    if kind in ("date", "email", "phone", "iban", "card", "vat"):
        for line in lines:
            found = value_on(line, 0, name, schema, GUESS_CONFIDENCE)
            if found is not None:
                return found
        return None
    if kind == "text" and words & _PARTY_WORDS:
        party = party_line(lines)
        return value_on(party, 0, name, schema, GUESS_CONFIDENCE) if party else None
    if kind == "text" and "address" in words:
        return address_lines(lines)
    return None


def top_lines(lines: list[Line]) -> list[Line]:
    """The lines of the first page's top 45 % that have letters."""
    if not lines:
        return []
    page = lines[0].page
    return [
        ln
        for ln in lines
        if ln.page == page and ln.box[1] < 0.45 and sum(c.isalpha() for c in ln.text) >= 3
    ]


def party_line(lines: list[Line]) -> Line | None:
    """The issuer's name: a line with a legal form (Ltd, GmbH, Sdn Bhd…) near the top, else
    the first line printed mostly in capitals, else the first line."""
    top = top_lines(lines)
    for test in (lambda t: bool(_LEGAL_FORM.search(t)), _capitals):
        found = next((ln for ln in top if test(ln.text)), None)
        if found is not None:
            return found
    return top[0] if top else None


def _capitals(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 3 and sum(c.isupper() for c in letters) >= 0.8 * len(letters)


def address_lines(lines: list[Line]) -> Found | None:
    """The run of lines near the top of the first page that reads as an address."""
    top = [
        ln
        for ln in top_lines(lines)
        if not _LEGAL_FORM.search(ln.text) and not _REGISTRATION.search(ln.text)
    ]
    start = next((i for i, ln in enumerate(top) if _ADDRESS_CUE.search(ln.text)), None)
    if start is None:
        return None
    run = [top[start]]
    for line in top[start + 1 : start + 5]:
        if _NOT_ADDRESS.search(line.text) or line.box[1] - run[-1].box[3] > 0.03:
            break
        run.append(line)
    text = " ".join(ln.text for ln in run)
    confidence = round(GUESS_CONFIDENCE * min(ln.confidence for ln in run), 3)
    return Found(text, text, run[0].page, [ln.box for ln in run], confidence)
