"""Personal data in a text: each kind found by its shape, then checked where a check exists.

E-mail addresses by their shape; phone numbers by libphonenumber (valid numbers: in
international form, or national form for the job's countries); IBANs by their check digits;
card numbers by Luhn and an issuer's first digit; national ids per country with their check
digits or letters (shared/redaction.py NATIONAL_IDS); a date of birth as a date after a
birth label; custom patterns as written, each bounded in time. Overlapping finds keep the
longest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import phonenumbers
import regex
from stdnum import iban, luhn
from stdnum.de import idnr
from stdnum.es import dni
from stdnum.fr import nir
from stdnum.gb import nhs
from stdnum.it import codicefiscale
from stdnum.nl import bsn
from stdnum.us import ssn

from ocrq.consumer.fields.values import EMAIL
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.redaction import countries_of
from ocrq.shared.schemas import JobOptions, RedactPattern

PATTERN_TIMEOUT_S = 1.0  # one custom pattern over one text, at most
_IBAN = regex.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4}){3,8}\b", regex.IGNORECASE)
_CARD = regex.compile(r"(?<![\d-])[2-6]\d{3}(?:[ -]?\d){9,15}(?![\d-])")
_DATE = r"(\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d{4}-\d{2}-\d{2}|\d{1,2}\.? [A-Za-zéû]{3,9}\.? \d{4})"
_BIRTH = regex.compile(
    r"(date\s+of\s+birth|birth\s*date|d\.?o\.?b\.?|born(?:\s+on)?|geburtsdatum|geboren(?:\s+am)?|"
    r"date\s+de\s+naissance|n[ée]e?\s+le|fecha\s+de\s+nacimiento)\W{0,4}\s*" + _DATE,
    regex.IGNORECASE,
)
# Each country's id: its printed shapes, and the check of its digits.
_IDS: dict[str, tuple[regex.Pattern[str], Callable[[str], bool]]] = {
    "us": (regex.compile(r"\b\d{3}-\d{2}-\d{4}\b"), ssn.is_valid),
    "gb": (regex.compile(r"\b\d{3} ?\d{3} ?\d{4}\b"), nhs.is_valid),
    "de": (regex.compile(r"\b\d{2} ?\d{3} ?\d{3} ?\d{3}\b"), idnr.is_valid),
    "fr": (
        regex.compile(r"\b[12] ?\d{2} ?\d{2} ?(?:\d{2}|2A|2B) ?\d{3} ?\d{3} ?\d{2}\b"),
        nir.is_valid,
    ),
    "nl": (regex.compile(r"\b\d{4}\.?\d{2}\.?\d{3}\b"), bsn.is_valid),
    "es": (regex.compile(r"\b\d{8}-?[A-Z]\b", regex.IGNORECASE), dni.is_valid),
    "it": (
        regex.compile(r"\b[A-Z]{6}\d{2}[A-Z]\d{2}[A-Z]\d{3}[A-Z]\b", regex.IGNORECASE),
        codicefiscale.is_valid,
    ),
}
_NINO = regex.compile(r"\b(?![DFIQUV])[A-Z](?![DFIQUVO])[A-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b")


@dataclass(frozen=True)
class Span:
    """Characters start..end of a text hold a value of ``kind``."""

    start: int
    end: int
    kind: str


Finder = Callable[[str], Iterator[Span]]


class Detector:
    """Every finder a job's redact option asks for; ``find`` gives a text's spans."""

    def __init__(self, options: JobOptions, default_countries: str) -> None:
        countries = countries_of(options, default_countries)
        self.finders: list[Finder] = []
        for kind in options.redact or []:
            if isinstance(kind, RedactPattern):
                self.finders.append(pattern_finder(kind))
            else:
                self.finders.append(FINDERS[kind](countries))

    def find(self, text: str) -> list[Span]:
        """The spans of personal data in ``text``, in order, none overlapping."""
        spans = sorted(
            (span for finder in self.finders for span in finder(text)),
            key=lambda s: (s.start, -(s.end - s.start), PRIORITY.get(s.kind, 0)),
        )
        kept: list[Span] = []
        for span in spans:
            if not kept or span.start >= kept[-1].end:
                kept.append(span)
            elif span.end > kept[-1].end:  # overlapping: the longer reach wins
                kept[-1] = Span(kept[-1].start, span.end, kept[-1].kind)
        return kept


def emails(countries: list[str]) -> Finder:
    def find(text: str) -> Iterator[Span]:
        for m in EMAIL.finditer(text):
            yield Span(m.start(), m.end(), "email")

    return find


def phones(countries: list[str]) -> Finder:
    regions = [None, *(c.upper() for c in countries)]

    def find(text: str) -> Iterator[Span]:
        for region in regions:
            leniency = phonenumbers.Leniency.VALID
            for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=leniency):
                yield Span(m.start, m.end, "phone")

    return find


def ibans(countries: list[str]) -> Finder:
    def find(text: str) -> Iterator[Span]:
        for m in _IBAN.finditer(text):
            found = _longest_valid(m.group(), iban.is_valid)
            if found:
                yield Span(m.start(), m.start() + len(found), "iban")

    return find


def _longest_valid(candidate: str, check: Callable[[str], bool]) -> str:
    """The candidate, or its longest prefix cut at a space, that passes ``check``."""
    words = candidate.split(" ")
    for end in range(len(words), 0, -1):
        prefix = " ".join(words[:end])
        if check(prefix):
            return prefix
    return ""


def cards(countries: list[str]) -> Finder:
    def find(text: str) -> Iterator[Span]:
        for m in _CARD.finditer(text):
            digits = "".join(c for c in m.group() if c.isdigit())
            if 13 <= len(digits) <= 19 and luhn.is_valid(digits):
                yield Span(m.start(), m.end(), "credit_card")

    return find


def national_ids(countries: list[str]) -> Finder:
    checks = [_IDS[c] for c in countries if c in _IDS]

    def find(text: str) -> Iterator[Span]:
        for pattern, is_valid in checks:
            for m in pattern.finditer(text):
                if is_valid(m.group()):
                    yield Span(m.start(), m.end(), "national_id")
        if "gb" in countries:
            for m in _NINO.finditer(text):
                yield Span(m.start(), m.end(), "national_id")

    return find


def births(countries: list[str]) -> Finder:
    def find(text: str) -> Iterator[Span]:
        for m in _BIRTH.finditer(text):
            yield Span(m.start(2), m.end(2), "date_of_birth")

    return find


def pattern_finder(rule: RedactPattern) -> Finder:
    """A custom pattern; one that runs past PATTERN_TIMEOUT_S fails the job (a value it
    would have masked must not slip through)."""
    try:
        compiled = regex.compile(rule.pattern)
    except regex.error as e:  # checked with re at ingest; the regex module may still differ
        message = f"redact: the pattern {rule.pattern!r} is not a regular expression: {e}"
        raise OcrqError(ErrorCode.INVALID_REQUEST, message) from e

    def find(text: str) -> Iterator[Span]:
        try:
            matches = list(compiled.finditer(text, timeout=PATTERN_TIMEOUT_S))
        except TimeoutError as e:
            message = f"redact: the pattern {rule.pattern!r} took over {PATTERN_TIMEOUT_S} s"
            raise OcrqError(ErrorCode.INVALID_REQUEST, message) from e
        for m in matches:
            if m.end() > m.start():
                yield Span(m.start(), m.end(), rule.name)

    return find


# Where two kinds find the same characters, the one with the stricter check names them
# (libphonenumber takes many a ten-digit id for a number; custom patterns come first).
PRIORITY = {
    "iban": 1,
    "credit_card": 2,
    "national_id": 3,
    "email": 4,
    "date_of_birth": 5,
    "phone": 6,
}

FINDERS: dict[str, Callable[[list[str]], Finder]] = {
    "email": emails,
    "phone": phones,
    "iban": ibans,
    "credit_card": cards,
    "national_id": national_ids,
    "date_of_birth": births,
}
