"""Fields against a schema end to end: key-value on the laptop, an LLM through the fake vLLM."""

from __future__ import annotations

import base64
import csv
import io
import json
from typing import Any

import httpx
import pytest
from support.invoices import EXPECTED, INVOICE_SCHEMA, invoice_pdf, invoice_scan, value_box
from support.stack import Stack

pytestmark = pytest.mark.slow

# What an LLM reads by the labels as printed (the fake finds a property by name or title).
# Its jobs take the PDF's text layer (text_layer=auto): the fake vLLM's OCR reads no invoice.
LLM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "title": "Invoice No"},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
    },
    "required": ["invoice_number", "total"],
}


def fields_of(stack: Stack, job_id: str) -> dict[str, Any]:
    """The job's fields as ?format=fields gives them."""
    r = httpx.get(f"{stack.api}/v1/jobs/{job_id}/result?format=fields", timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    fields: dict[str, Any] = r.json()
    return fields


def source(fields: dict[str, Any], path: str) -> dict[str, Any]:
    """The grounding of one value."""
    [found] = [s for s in fields["sources"] if s["path"] == path]
    return found


def test_an_invoice_with_a_schema_comes_back_with_its_fields_and_where_each_was_printed(
    stack: Stack,
) -> None:
    stack.start_worker(engine="local", vllm_url="")
    pdf = invoice_pdf()
    view = stack.wait(stack.submit(pdf, extract=INVOICE_SCHEMA), timeout_s=120)
    assert view["status"] == "done", view
    fields = view["result"]["fields"]
    assert fields["method"] == "key_value" and fields["error"] is None
    assert fields["values"] == EXPECTED
    total = source(fields, "total")
    assert total["grounded"] and total["page"] == 1 and total["text"] == "120.00"
    assert total["boxes"] == [pytest.approx(list(value_box(pdf, "120.00")), abs=0.01)]
    assert fields_of(stack, view["id"]) == fields
    assert "NORTHWIND" in view["result"]["markdown"]  # the text is there as ever


def test_a_scanned_invoice_is_read_by_the_engine_and_grounded_on_its_words(
    stack: Stack,
) -> None:
    stack.start_worker(engine="local", vllm_url="")
    pdf = invoice_scan()
    view = stack.wait(stack.submit(pdf, extract=INVOICE_SCHEMA, languages="eng"), timeout_s=180)
    assert view["status"] == "done", view
    fields = view["result"]["fields"]
    assert view["result"]["pages"][0]["source"] == "engine"
    for path in ("invoice_number", "invoice_date", "total", "iban"):
        assert fields["values"][path] == EXPECTED[path], fields
    box = source(fields, "invoice_number")["boxes"][0]
    assert box == pytest.approx(list(value_box(invoice_pdf(), "INV-2024-0042")), abs=0.02)


def test_a_job_without_a_schema_has_no_fields_to_give(stack: Stack) -> None:
    stack.start_worker(engine="local", vllm_url="")
    view = stack.wait(stack.submit(invoice_pdf()), timeout_s=120)
    assert view["result"]["fields"] is None
    r = httpx.get(f"{stack.api}/v1/jobs/{view['id']}/result?format=fields", timeout=30)
    assert r.status_code == 406 and r.json()["code"] == "not_acceptable"
    assert "options.extract" in r.json()["message"]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "array", "items": {"type": "string"}}, "the top must be"),
        ({"type": "object", "properties": {}}, "properties is empty"),
        ({"type": "object", "properties": {"total": {"type": "money"}}}, "not a valid JSON"),
        (
            {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(900)}},
            "bytes; at most",
        ),
    ],
)
def test_a_schema_the_worker_could_not_use_is_refused_with_400_naming_the_problem(
    stack: Stack, schema: dict[str, Any], problem: str
) -> None:
    body = {"document": base64.b64encode(invoice_pdf()).decode(), "options": {"extract": schema}}
    r = httpx.post(f"{stack.api}/v1/jobs", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_request" and problem in r.json()["message"]
    assert r.json()["message"].startswith("extract: ")


def test_a_multipart_upload_takes_the_schema_as_json_text(stack: Stack) -> None:
    stack.start_worker(engine="local", vllm_url="")
    files = {"file": ("invoice.pdf", invoice_pdf(), "application/pdf")}
    data = {"extract": json.dumps(INVOICE_SCHEMA)}
    r = httpx.post(f"{stack.api}/v1/jobs", files=files, data=data, timeout=30)
    assert r.status_code == 202, r.text
    assert stack.wait(r.json()["id"], timeout_s=120)["result"]["fields"]["values"] == EXPECTED
    bad = httpx.post(f"{stack.api}/v1/jobs", files=files, data={"extract": "{nope"}, timeout=30)
    assert bad.status_code == 400 and "extract: not JSON" in bad.json()["message"]


def test_with_an_llm_configured_the_reply_validates_and_each_value_is_grounded(
    stack: Stack,
) -> None:
    stack.start_worker(extract_url=stack.fake.url)
    stack.fake.clear()
    view = stack.wait(
        stack.submit(invoice_pdf(), extract=LLM_SCHEMA, text_layer="auto"), timeout_s=60
    )
    fields = view["result"]["fields"]
    assert (fields["method"], fields["model"], fields["error"]) == (
        "llm",
        "baidu/Unlimited-OCR",
        None,
    )
    assert fields["values"] == {"invoice_number": "INV-2024-0042", "total": 120.0, "paid": False}
    number = source(fields, "invoice_number")
    assert number["grounded"] and number["page"] == 1
    assert number["boxes"][0] == pytest.approx(
        list(value_box(invoice_pdf(), "INV-2024-0042")), abs=0.01
    )
    assert source(fields, "paid")["grounded"] is False  # nothing printed says so: no box
    [asked] = [b for b in stack.fake.requests() if "response_format" in b]
    assert asked["response_format"]["json_schema"]["schema"] == LLM_SCHEMA
    assert "<page 1>" in asked["messages"][1]["content"]


def test_a_reply_that_does_not_validate_is_asked_again(stack: Stack) -> None:
    stack.start_worker(extract_url=stack.fake.url)
    stack.fake.clear()
    stack.fake.configure(invalid_json_next=1)
    view = stack.wait(
        stack.submit(invoice_pdf(), extract=LLM_SCHEMA, text_layer="auto"), timeout_s=60
    )
    assert view["result"]["fields"]["error"] is None
    assert view["result"]["fields"]["values"]["total"] == 120.0
    assert len([b for b in stack.fake.requests() if "response_format" in b]) == 2


def test_when_no_valid_reply_comes_the_job_is_done_with_an_extract_error(stack: Stack) -> None:
    stack.start_worker(extract_url=stack.fake.url, extract_retries=1)
    stack.fake.configure(invalid_json_next=2)
    view = stack.wait(
        stack.submit(invoice_pdf(), extract=LLM_SCHEMA, text_layer="auto"), timeout_s=60
    )
    assert view["status"] == "done" and "INV-2024-0042" in view["result"]["markdown"]
    fields = view["result"]["fields"]
    assert fields["error"]["code"] == "extract_error" and fields["values"] == {}
    assert "does not follow the schema" in fields["error"]["message"]


def test_an_llm_that_is_down_costs_the_fields_not_the_text(stack: Stack) -> None:
    stack.start_worker(extract_url="http://127.0.0.1:9", extract_retries=0)
    view = stack.wait(
        stack.submit(invoice_pdf(), extract=LLM_SCHEMA, text_layer="auto"), timeout_s=60
    )
    assert view["status"] == "done" and view["result"]["markdown"]
    assert view["result"]["fields"]["error"]["code"] == "extract_error"


def test_a_batch_gives_its_fields_as_csv_one_row_per_document(stack: Stack) -> None:
    stack.start_worker(engine="local", vllm_url="")
    files = [
        ("file", ("a.pdf", invoice_pdf(), "application/pdf")),
        ("file", ("b.pdf", invoice_pdf(), "application/pdf")),
    ]
    query = {"extract": json.dumps(INVOICE_SCHEMA)}  # a batch's options are its query's
    r = httpx.post(f"{stack.api}/v1/batches", files=files, params=query, timeout=60)
    assert r.status_code == 202, r.text
    stack.wait_for_batch(r.json()["id"], timeout_s=180)
    got = httpx.get(f"{stack.api}/v1/batches/{r.json()['id']}/results?format=csv", timeout=60)
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert [row["filename"] for row in rows] == ["a.pdf", "b.pdf"]
    assert list(rows[0])[:4] == ["filename", "id", "status", "error"]
    assert list(rows[0])[4:] == list(INVOICE_SCHEMA["properties"])
    assert all(row["total"] == "120.0" and row["invoice_date"] == "2024-03-14" for row in rows)
