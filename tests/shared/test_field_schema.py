"""The extract option's schema: what the worker can extract against, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from ocrq.shared.errors import OcrqError
from ocrq.shared.field_schema import (
    check_extract_schema,
    leaf_paths,
    schema_problems,
    top_level_names,
)

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "number": {"type": "string"},
        "seller": {"type": "object", "properties": {"name": {"type": "string"}}},
        "lines": {"type": "array", "items": {"type": "object", "properties": {"price": {}}}},
    },
}


def test_a_nested_schema_is_accepted_and_its_scalars_are_named_by_path() -> None:
    check_extract_schema(INVOICE, 16_384)
    assert [path for path, _ in leaf_paths(INVOICE)] == ["number", "seller/name", "lines/*/price"]
    assert top_level_names(INVOICE) == ["number", "seller", "lines"]


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "string"}, "the top must be"),
        ({"type": "object", "properties": {"a": {"type": 7}}}, "not a valid JSON Schema at"),
        (deep(8), "nested more than"),
        (
            {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(201)}},
            "201 fields; at most 200",
        ),
    ],
)
def test_a_schema_the_worker_cannot_use_is_refused_by_name(
    schema: dict[str, Any], problem: str
) -> None:
    with pytest.raises(OcrqError) as refused:
        check_extract_schema(schema, 1_000_000)
    assert refused.value.code == "invalid_request" and problem in refused.value.message


def test_a_schema_nested_deep_enough_to_exhaust_the_validator_is_a_400_not_a_crash() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(400):  # 8 KB: under the size limit, past Python's recursion limit
        schema = {"properties": {"a": schema}}
    with pytest.raises(OcrqError, match="nested more than 32 levels"):
        check_extract_schema({"type": "object", "properties": {"x": schema}}, 16_384)


def test_a_schema_over_the_size_limit_is_refused_before_it_is_read() -> None:
    with pytest.raises(OcrqError, match=r"at most 100 \(OCRQ_MAX_EXTRACT_SCHEMA_BYTES"):
        check_extract_schema(INVOICE, 100)


def test_problems_name_where_a_reply_breaks_the_schema() -> None:
    assert schema_problems(INVOICE, {"number": "A-1"}) == []
    assert schema_problems(INVOICE, {"number": 7}) == ["number: 7 is not of type 'string'"]
