"""Structured outputs: a text-only request with a JSON Schema gets JSON that validates."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest

from ocrq.fakevllm.runner import FakeVllm

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "title": "Invoice No"},
        "total": {"type": "number"},
        "items": {"type": "array", "items": {"type": "string"}},
        "currency": {"enum": ["EUR", "GBP"]},
        "paid": {"type": "boolean"},
    },
    "required": ["invoice_number", "total"],
}
TEXT = "<page 1>\nInvoice No: INV-7\nSubtotal 10.00\n| Total | 12.00 |\n"


def ask(client: httpx.Client, **format_: Any) -> httpx.Response:
    body = {
        "model": "baidu/Unlimited-OCR",
        "messages": [{"role": "system", "content": "fields"}, {"role": "user", "content": TEXT}],
        "temperature": 0,
        **format_,
    }
    return client.post("/v1/chat/completions", json=body)


def reply(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return json.loads(response.json()["choices"][0]["message"]["content"])


@pytest.mark.parametrize(
    "format_",
    [
        {"response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMA}}},
        {"structured_outputs": {"json": SCHEMA}},
        {"guided_json": SCHEMA},
    ],
)
def test_each_way_of_asking_gets_a_reply_that_validates_and_reads_the_labels(
    client: httpx.Client, format_: dict[str, Any]
) -> None:
    values = reply(ask(client, **format_))
    jsonschema.validate(values, SCHEMA)
    assert values == {
        "invoice_number": "INV-7",
        "total": 12.0,  # the Total, not the Subtotal: labels match as whole words
        "items": [],
        "currency": "EUR",
        "paid": False,
    }


def test_invalid_json_next_makes_the_next_reply_fail_the_schema(
    client: httpx.Client, fake: FakeVllm
) -> None:
    fake.configure(invalid_json_next=1)
    fmt = {"structured_outputs": {"json": SCHEMA}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply(ask(client, **fmt)), SCHEMA)
    jsonschema.validate(reply(ask(client, **fmt)), SCHEMA)  # only the one


def test_a_structured_request_for_another_model_is_404(client: httpx.Client) -> None:
    body = {"model": "other", "messages": [{"role": "user", "content": "x"}], "guided_json": SCHEMA}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 404


def test_a_schema_that_is_not_an_object_is_400(client: httpx.Client) -> None:
    response = ask(client, guided_json="[1, 2]")
    assert response.status_code == 400 and "JSON Schema object" in response.text
