"""The laptop's key-value reading: labels on the page matched to the schema, values checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.invoices import EXPECTED, INVOICE_LINES, INVOICE_SCHEMA, invoice_pdf, value_box

from ocrq.consumer.fields.keyvalue import read_fields
from ocrq.consumer.fields.lines import Line, pdf_words
from ocrq.consumer.fields.reader import key_value_fields


def lines_of(pdf: bytes, tmp_path: Path) -> list[Line]:
    """The text layer's lines of page 1, as the worker reads them."""
    path = tmp_path / "doc.pdf"
    path.write_bytes(pdf)
    return pdf_words(str(path), [1])[1]


def test_every_labelled_value_of_an_invoice_is_read_and_normalised(tmp_path: Path) -> None:
    found = read_fields(INVOICE_SCHEMA, lines_of(invoice_pdf(), tmp_path))
    assert {path: hit.value if hit else None for path, hit in found.items()} == EXPECTED


def test_each_value_is_boxed_where_it_is_printed(tmp_path: Path) -> None:
    pdf = invoice_pdf()
    found = read_fields(INVOICE_SCHEMA, lines_of(pdf, tmp_path))
    for path, printed in (("invoice_number", "INV-2024-0042"), ("total", "120.00")):
        hit = found[path]
        assert hit is not None and hit.page == 1 and hit.text == printed
        [box] = hit.boxes
        assert box == pytest.approx(value_box(pdf, printed), abs=0.01)


def test_a_name_s_last_word_labels_a_typed_value(tmp_path: Path) -> None:
    found = read_fields(INVOICE_SCHEMA, lines_of(invoice_pdf(), tmp_path))
    date = found["invoice_date"]  # printed as "Date: 14 March 2024"
    assert date is not None and date.text == "14 March 2024" and date.confidence == 0.9


def test_the_total_is_not_the_subtotal_nor_the_tax(tmp_path: Path) -> None:
    found = read_fields(INVOICE_SCHEMA, lines_of(invoice_pdf(), tmp_path))
    assert found["total"] is not None and found["total"].value == 120.0


def test_a_value_printed_below_its_label_is_found(tmp_path: Path) -> None:
    pdf = form_pdf([("Customer reference", 100), ("CR-778-XQ", 125)])
    schema = {"type": "object", "properties": {"customer_reference": {"type": "string"}}}
    found = read_fields(schema, lines_of(pdf, tmp_path))
    hit = found["customer_reference"]
    assert hit is not None and hit.value == "CR-778-XQ" and hit.confidence < 0.9


def test_an_iban_with_wrong_check_digits_is_not_taken(tmp_path: Path) -> None:
    lines = tuple(
        (k, "GB83 WEST 1234 5698 7654 32" if k == "IBAN:" else v) for k, v in INVOICE_LINES
    )
    found = read_fields(INVOICE_SCHEMA, lines_of(invoice_pdf(lines), tmp_path))
    assert found["iban"] is None


def test_a_required_field_missing_from_the_page_is_ungrounded_and_named(tmp_path: Path) -> None:
    lines = tuple(row for row in INVOICE_LINES if row[0] != "Invoice No:")
    found = read_fields(INVOICE_SCHEMA, lines_of(invoice_pdf(lines), tmp_path))
    fields = key_value_fields(INVOICE_SCHEMA, found)
    [missing] = [s for s in fields.sources if s.path == "invoice_number"]
    assert (missing.grounded, missing.page, missing.boxes, missing.value) == (False, None, [], None)
    assert "invoice_number" not in fields.values and fields.values["total"] == 120.0
    assert fields.error is not None and fields.error.code == "extract_error"
    assert "invoice_number" in fields.error.message


def test_a_label_with_no_valid_value_beside_it_gives_nothing(tmp_path: Path) -> None:
    pdf = form_pdf([("Date: to be confirmed", 100)])
    schema = {"type": "object", "properties": {"date": {"type": "string", "format": "date"}}}
    assert read_fields(schema, lines_of(pdf, tmp_path)) == {"date": None}


def form_pdf(rows: list[tuple[str, float]]) -> bytes:
    """A page with each text at the left margin, at its height (points)."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for text, y in rows:
        page.insert_text((72, y), text, fontsize=13, fontname="helv")  # type: ignore[no-untyped-call]
    return bytes(doc.tobytes())  # type: ignore[no-untyped-call]
