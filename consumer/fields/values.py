"""Typed values read from a piece of page text, normalised and checked.

A property's kind comes from its schema (type, format, enum) and, for strings, from its name
(``invoice_date``, ``total``, ``email``, ``iban``…). Each reader returns the value and the part
of the text it came from, or None when the text holds no such value: a date that does not
parse, an IBAN whose check digits fail, a card number that fails Luhn.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import dateparser
import phonenumbers
from price_parser import Price
from stdnum import iban, luhn
from stdnum.eu import vat
from stdnum.exceptions import ValidationError

Found = tuple[Any, str]  # (the value, the text it was read from)

_DATE = re.compile(
    r"\b(\d{4}[./-]\d{1,2}[./-]\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}"
    r"|\d{1,2}[ -]?[A-Za-z]{3,9}\.?[ -,]*\d{2,4}|[A-Za-z]{3,9}\.? \d{1,2},? \d{4})\b"
)
# "64. 15": OCR often reads a space after the decimal mark of a printed amount.
_AMOUNT = re.compile(r"(?<![\d.,])-?\d{1,3}(?:[ ,.]\d{3})*(?:[.,] ?\d{2}|[.,]\d)?(?![\d])")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"\b\d(?:[ -]?\d){12,18}\b")
_VAT = re.compile(r"\b[A-Z]{2}[ -]?[0-9A-Z]{8,12}\b")
_PHONE = re.compile(r"(?<![\w-])\+?\(?\d[\d ()./-]{6,}\d(?![\w-])")

AMOUNT_WORDS = frozenset(
    "total amount price sum subtotal tax due balance paid fee cost net gross charge".split()
)
_TRUE = frozenset({"yes", "true", "x", "1", "y", "\u2713", "\u2714", "checked"})
_FALSE = frozenset({"no", "false", "0", "n", "unchecked"})


def name_words(name: str) -> list[str]:
    """A property name's words: ``invoiceDate`` and ``invoice_date`` are invoice, date."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " ")
    return [w.lower() for w in spaced.split() if w]


def kind_of(name: str, schema: dict[str, Any]) -> str:
    """What to read for a property: date, amount, number, email, phone, iban, card, vat,
    boolean, enum or text."""
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    words = set(name_words(name))
    fmt = str(schema.get("format", ""))
    if "enum" in schema:
        return "enum"
    if kind == "boolean":
        return "boolean"
    if kind in ("number", "integer"):
        return "amount" if words & AMOUNT_WORDS else "number"
    if fmt in ("date", "date-time") or words & {"date", "dob", "birthday"}:
        return "date"
    if fmt == "email" or words & {"email", "mail"}:
        return "email"
    for kind_name, hints in _NAME_KINDS:
        if words & hints:
            return kind_name
    return "text"


_NAME_KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("phone", frozenset({"phone", "tel", "telephone", "mobile", "fax"})),
    ("iban", frozenset({"iban"})),
    ("card", frozenset({"card", "pan"})),
    ("vat", frozenset({"vat", "vatin"})),
    ("amount", AMOUNT_WORDS),
)


def read_value(text: str, name: str, schema: dict[str, Any]) -> Found | None:
    """The property's value in ``text``, checked for its kind; None when there is none."""
    kind = kind_of(name, schema)
    found = READERS[kind](text, schema)
    if found is None:
        return None
    value, source = found
    if schema.get("type") == "integer" and isinstance(value, float):
        value = round(value)
    return value, source


def read_date(text: str, schema: dict[str, Any]) -> Found | None:
    """A date: ISO (YYYY-MM-DD) for a ``format: date`` property, else as printed."""
    for match in _DATE.finditer(text):
        parsed = dateparser.parse(
            match.group(), settings={"DATE_ORDER": "DMY", "PREFER_DAY_OF_MONTH": "first"}
        )
        if parsed is None or not 1900 <= parsed.year <= 2100:
            continue
        if schema.get("format") == "date":
            return parsed.date().isoformat(), match.group()
        if schema.get("format") == "date-time":
            return parsed.isoformat(), match.group()
        return match.group(), match.group()
    return None


def read_amount(text: str, schema: dict[str, Any]) -> Found | None:
    """An amount: the number (a float for number properties, "12.50" for strings)."""
    matches = list(_AMOUNT.finditer(text))
    if not matches:
        return None
    # The last amount on a line is the value ("Total (2 items) 12.50"), decimals preferred.
    with_cents = [m for m in matches if re.search(r"[.,] ?\d{2}$", m.group())]
    match = (with_cents or matches)[-1]
    printed = re.sub(r"([.,]) (\d{2})$", r"\1\2", match.group())
    price = Price.fromstring(printed, decimal_separator=_separator(printed))
    if price.amount is None:
        return None
    amount: Decimal = price.amount
    if schema.get("type") in ("number", "integer"):
        return float(amount), match.group()
    return f"{amount:.2f}" if with_cents else str(amount), match.group()


def _separator(text: str) -> str | None:
    """The decimal separator of an amount: the last of . or , when two digits follow it."""
    tail = re.search(r"([.,])\d{1,2}$", text)
    return tail.group(1) if tail else None


def read_number(text: str, schema: dict[str, Any]) -> Found | None:
    """The first number."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    return float(match.group().replace(",", ".")), match.group()


def read_email(text: str, schema: dict[str, Any]) -> Found | None:
    """An e-mail address."""
    match = EMAIL.search(text)
    return (match.group().lower(), match.group()) if match else None


def read_phone(text: str, schema: dict[str, Any]) -> Found | None:
    """A phone number: E.164 when it carries its country code, else as printed."""
    for match in _PHONE.finditer(text):
        printed = match.group().strip()
        digits = re.sub(r"\D", "", printed)
        if not 7 <= len(digits) <= 15:
            continue
        if printed.startswith("+"):
            try:
                number = phonenumbers.parse(printed, None)
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_possible_number(number):
                e164 = phonenumbers.PhoneNumberFormat.E164
                return phonenumbers.format_number(number, e164), printed
            continue
        return printed, printed
    return None


def _checked(pattern: re.Pattern[str], check: Callable[[str], str]) -> Callable[..., Found | None]:
    def reader(text: str, schema: dict[str, Any]) -> Found | None:
        for match in pattern.finditer(text.upper() if pattern is not _CARD else text):
            try:
                return check(match.group()), match.group()
            except ValidationError:
                continue
        return None

    return reader


def read_boolean(text: str, schema: dict[str, Any]) -> Found | None:
    """Yes/no, true/false, a tick."""
    first = text.strip().split()[0].lower() if text.strip() else ""
    if first in _TRUE:
        return True, first
    if first in _FALSE:
        return False, first
    return None


def read_enum(text: str, schema: dict[str, Any]) -> Found | None:
    """One of the enum's values named in the text (case-insensitive)."""
    lowered = text.lower()
    for option in schema["enum"]:
        if isinstance(option, str) and re.search(rf"\b{re.escape(option.lower())}\b", lowered):
            return option, option
    return None


def read_text(text: str, schema: dict[str, Any]) -> Found | None:
    """The text itself, without the punctuation a label leaves before it."""
    cleaned = re.sub(r"^[\s:=#.\-\u2013]+", "", text).strip()
    max_length = schema.get("maxLength")
    if isinstance(max_length, int):
        cleaned = cleaned[:max_length]
    return (cleaned, cleaned) if cleaned else None


READERS: dict[str, Callable[[str, dict[str, Any]], Found | None]] = {
    "date": read_date,
    "amount": read_amount,
    "number": read_number,
    "email": read_email,
    "phone": read_phone,
    "iban": _checked(_IBAN, lambda s: iban.format(iban.validate(s))),
    "card": _checked(_CARD, lambda s: luhn.validate(re.sub(r"\D", "", s))),
    "vat": _checked(_VAT, lambda s: vat.compact(vat.validate(s))),
    "boolean": read_boolean,
    "enum": read_enum,
    "text": read_text,
}
