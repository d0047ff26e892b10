"""Personal data found by its shape and kept only where its check digits hold."""

from __future__ import annotations

import pytest

from ocrq.consumer.redact.detect import Detector
from ocrq.shared.errors import OcrqError
from ocrq.shared.schemas import JobOptions, RedactKind, RedactPattern

COUNTRIES = "us,gb,de,fr,nl,es,it"


def found(
    text: str, *kinds: RedactKind | RedactPattern, countries: str = COUNTRIES
) -> list[tuple[str, str]]:
    detector = Detector(JobOptions(redact=list(kinds)), countries)
    return [(s.kind, text[s.start : s.end]) for s in detector.find(text)]


def test_an_email_is_found_where_it_stands() -> None:
    assert found("write to Jane.Roe@example.org today", "email") == [
        ("email", "Jane.Roe@example.org")
    ]


def test_phone_numbers_are_found_in_international_and_national_form() -> None:
    text = "Tel +44 117 496 0123, office (212) 555-0148, ref 2024-0042"
    assert found(text, "phone") == [("phone", "+44 117 496 0123"), ("phone", "(212) 555-0148")]


def test_an_iban_needs_its_check_digits_and_stops_where_they_hold() -> None:
    text = "IBAN GB82 WEST 1234 5698 7654 32 BIC NWBKGB2L; old GB83 WEST 1234 5698 7654 32"
    assert found(text, "iban") == [("iban", "GB82 WEST 1234 5698 7654 32")]


def test_a_card_number_must_pass_luhn() -> None:
    text = "card 4111 1111 1111 1111, not 4111 1111 1111 1112"
    assert found(text, "credit_card") == [("credit_card", "4111 1111 1111 1111")]


@pytest.mark.parametrize(
    ("country", "valid", "invalid"),
    [
        ("us", "123-45-6789", "000-45-6789"),
        ("de", "86 095 742 719", "86 095 742 718"),
        ("gb", "943 476 5919", "943 476 5918"),
        ("fr", "2 95 10 99 126 111 93", "2 95 10 99 126 111 94"),
        ("nl", "1112.22.333", "1112.22.334"),
        ("es", "54362315K", "54362315Z"),
        ("it", "RCCMNL83S18D969H", "RCCMNL83S18D969A"),
    ],
)
def test_a_national_id_is_found_only_with_its_check_for_its_country(
    country: str, valid: str, invalid: str
) -> None:
    assert found(f"id {valid} and {invalid}", "national_id", countries=country) == [
        ("national_id", valid)
    ]


def test_a_date_is_a_date_of_birth_only_after_a_birth_label() -> None:
    text = "Date of birth: 14/07/1985\nInvoice date: 01/02/2024\nDOB\n3 March 1990"
    assert found(text, "date_of_birth") == [
        ("date_of_birth", "14/07/1985"),
        ("date_of_birth", "3 March 1990"),
    ]


def test_a_custom_pattern_masks_under_its_own_name() -> None:
    rule = RedactPattern(pattern=r"EMP-\d{5}", name="employee")
    assert found("staff EMP-40411 and EMP-4041", rule) == [("employee", "EMP-40411")]


def test_a_custom_pattern_that_runs_too_long_fails_rather_than_lets_a_value_through() -> None:
    rule = RedactPattern(pattern=r"(a|aa)+$")  # exponential backtracking
    with pytest.raises(OcrqError, match="took over"):
        found("a" * 40 + "b", rule)


def test_where_two_kinds_find_the_same_number_the_checked_one_names_it() -> None:
    assert found("NHS 943 476 5919", "phone", "national_id", countries="gb,us") == [
        ("national_id", "943 476 5919")
    ]
