"""The redact option: the kinds of personal data, their masks, and the checks at ingest."""

from __future__ import annotations

import re

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.schemas import JobOptions, RedactPattern

# Countries with a national id the worker checks (consumer/redact/detect.py), by ISO code;
# any other country in redact_countries has its national phone numbers found, no id.
NATIONAL_IDS: dict[str, str] = {
    "us": "Social Security number",
    "gb": "NHS number (check digit) and National Insurance number (format)",
    "de": "Steuer-Identifikationsnummer (check digit)",
    "fr": "NIR, numéro de sécurité sociale (check key)",
    "nl": "BSN, burgerservicenummer (11-check)",
    "es": "DNI (check letter)",
    "it": "codice fiscale (check character)",
}
MAX_PATTERNS = 20


def mask(kind: str) -> str:
    """What a masked value reads as: [EMAIL], [CREDIT_CARD], a custom pattern's [NAME]."""
    return f"[{kind.upper()}]"


def kind_names(options: JobOptions) -> list[str]:
    """The kinds a job masks, custom patterns by their names."""
    return [k.name if isinstance(k, RedactPattern) else k for k in options.redact or []]


def check_redact(options: JobOptions, default_countries: str) -> None:
    """Refuse (400, naming it) a redact option the worker could not apply."""
    if options.redact is None:
        if options.redact_countries is not None:
            raise _bad("redact_countries: only with redact")
        return
    if not options.redact:
        raise _bad("redact: name at least one kind (email, phone, iban, …)")
    patterns = [k for k in options.redact if isinstance(k, RedactPattern)]
    if len(patterns) > MAX_PATTERNS:
        raise _bad(f"redact: at most {MAX_PATTERNS} patterns")
    for number, rule in enumerate(patterns, 1):
        try:
            compiled = re.compile(rule.pattern)
        except re.error as e:
            raise _bad(f"redact: pattern {number} is not a regular expression: {e}") from e
        if compiled.match(""):
            raise _bad(f"redact: pattern {number} matches the empty string")
    unknown = set(countries_of(options, default_countries)) - known_countries()
    if unknown:
        raise _bad(f"redact_countries: {', '.join(sorted(unknown))} unknown (ISO 3166 codes)")


def known_countries() -> set[str]:
    """Every country libphonenumber knows: its phone numbers are found in national form;
    the NATIONAL_IDS ones have their ids checked too."""
    import phonenumbers  # the producer's and the worker's extra, not the client's

    return {region.lower() for region in phonenumbers.SUPPORTED_REGIONS}


def countries_of(options: JobOptions, default_countries: str) -> list[str]:
    """The job's countries, else the worker's default (OCRQ_REDACT_COUNTRIES)."""
    raw = options.redact_countries or default_countries
    return [c.strip() for c in raw.split(",") if c.strip()]


def _bad(problem: str) -> OcrqError:
    return OcrqError(ErrorCode.INVALID_REQUEST, problem)
