"""The ``extract`` option: a JSON Schema checked at ingest, and replies checked against it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ocrq.shared.errors import ErrorCode, OcrqError

MAX_PROPERTIES = 200  # leaf values a schema may ask for, nested ones included
MAX_DEPTH = 6  # objects and arrays inside each other
# The schema's JSON itself, checked before anything walks it (the validators recurse).
MAX_JSON_DEPTH = 32


def check_extract_schema(schema: dict[str, Any], max_bytes: int) -> None:
    """Refuse (400, naming the problem) a schema the worker could not extract against."""
    size = len(msgspec.json.encode(schema))
    if size > max_bytes:
        raise _bad(f"{size} bytes; at most {max_bytes} (OCRQ_MAX_EXTRACT_SCHEMA_BYTES)")
    if json_depth(schema) > MAX_JSON_DEPTH:
        raise _bad(f"its JSON is nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        where = "/".join(str(p) for p in e.path) or "the top"
        raise _bad(f"not a valid JSON Schema at {where}: {e.message}") from e
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise _bad('the top must be {"type": "object", "properties": {...}}')
    if not schema["properties"]:
        raise _bad("properties is empty: name at least one field to extract")
    leaves = list(leaf_paths(schema))
    if len(leaves) > MAX_PROPERTIES:
        raise _bad(f"{len(leaves)} fields; at most {MAX_PROPERTIES}")
    if any(path.count("/") >= MAX_DEPTH for path, _ in leaves):
        raise _bad(f"nested more than {MAX_DEPTH} levels deep")


def json_depth(value: Any) -> int:
    """How deep objects and arrays nest in a JSON value (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_JSON_DEPTH:
                    return depth + 1  # deep enough to refuse: no need to walk further
                stack.append((child, depth + 1))
        deepest = max(deepest, depth)
    return deepest


def _bad(problem: str) -> OcrqError:
    return OcrqError(ErrorCode.INVALID_REQUEST, f"extract: {problem}")


def leaf_paths(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, schema) of every scalar a schema asks for; an array's items as ``name/*``."""
    kind = schema.get("type")
    if kind == "object" or isinstance(schema.get("properties"), dict):
        for name, sub in (schema.get("properties") or {}).items():
            if isinstance(sub, dict):
                yield from leaf_paths(sub, f"{prefix}/{name}" if prefix else name)
    elif kind == "array" and isinstance(schema.get("items"), dict):
        yield from leaf_paths(schema["items"], f"{prefix}/*")
    elif prefix:
        yield prefix, schema


def schema_problems(schema: dict[str, Any], values: Any) -> list[str]:
    """What keeps ``values`` from validating against ``schema`` (empty: it validates)."""
    validator = Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(values), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.path) or "the top"
        problems.append(f"{where}: {error.message}")
    return problems


def top_level_names(schema: dict[str, Any]) -> list[str]:
    """The schema's top-level property names, in its order (a batch CSV's columns)."""
    return list((schema.get("properties") or {}).keys())
