"""Typed values: read from page text, normalised, and refused when their check digits fail."""

from __future__ import annotations

from typing import Any

import pytest

from ocrq.consumer.fields.values import kind_of, read_value

STRING: dict[str, Any] = {"type": "string"}


@pytest.mark.parametrize(
    ("text", "schema", "value"),
    [
        ("14 March 2024", {"type": "string", "format": "date"}, "2024-03-14"),
        ("25/12/2018 10:42", {"type": "string", "format": "date"}, "2018-12-25"),
        ("25/12/2018 10:42", STRING, "25/12/2018"),  # no format: as printed
        ("March 3, 2021", {"type": "string", "format": "date"}, "2021-03-03"),
    ],
)
def test_dates_are_read_day_first_and_given_in_iso_when_the_schema_says_date(
    text: str, schema: dict[str, Any], value: str
) -> None:
    found = read_value(text, "date", schema)
    assert found is not None and found[0] == value


@pytest.mark.parametrize(
    ("text", "schema", "value"),
    [
        ("RM 33,92", {"type": "number"}, 33.92),
        ("EUR 1.234,50", {"type": "number"}, 1234.5),
        ("$1,234.50", {"type": "number"}, 1234.5),
        ("(2 items) 12.50", STRING, "12.50"),
        ("9", {"type": "integer"}, 9),
    ],
)
def test_amounts_take_the_last_amount_on_the_line_with_either_decimal_mark(
    text: str, schema: dict[str, Any], value: Any
) -> None:
    found = read_value(text, "total", schema)
    assert found is not None and found[0] == value


def test_an_iban_is_taken_only_with_valid_check_digits() -> None:
    assert read_value("GB82 WEST 1234 5698 7654 32", "iban", STRING) == (
        "GB82 WEST 1234 5698 7654 32",
        "GB82 WEST 1234 5698 7654 32",
    )
    assert read_value("GB83 WEST 1234 5698 7654 32", "iban", STRING) is None


def test_a_card_number_must_pass_luhn() -> None:
    found = read_value("4111 1111 1111 1111", "card_number", STRING)
    assert found is not None and found[0] == "4111111111111111"
    assert read_value("4111 1111 1111 1112", "card_number", STRING) is None


def test_a_vat_number_is_checked_for_its_country() -> None:
    found = read_value("VAT: DE 136695976", "vat", STRING)
    assert found is not None and found[0] == "DE136695976"
    assert read_value("VAT: DE 136695977", "vat", STRING) is None


def test_phone_numbers_with_a_country_code_come_back_in_e164() -> None:
    found = read_value("Tel +44 (0)117 496 0123", "phone", STRING)
    assert found is not None and found[0] == "+441174960123"
    assert read_value("ref INV-2024-0042", "phone", STRING) is None


def test_emails_are_lowercased_and_a_word_with_an_at_sign_is_not_one() -> None:
    assert read_value("Mail: Billing@Example.COM", "email", STRING) == (
        "billing@example.com",
        "Billing@Example.COM",
    )
    assert read_value("meet @ noon", "email", STRING) is None


def test_the_kind_comes_from_the_schema_first_and_the_name_second() -> None:
    assert kind_of("total", {"type": "number"}) == "amount"
    assert kind_of("pages", {"type": "integer"}) == "number"
    assert kind_of("issued", {"type": "string", "format": "date"}) == "date"
    assert kind_of("invoiceDate", STRING) == "date"
    assert kind_of("status", {"enum": ["paid", "open"]}) == "enum"
    assert kind_of("notes", STRING) == "text"
