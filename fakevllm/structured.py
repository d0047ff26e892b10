"""Structured outputs, as vLLM answers them: a text-only chat whose reply follows a JSON Schema.

vLLM takes the schema as OpenAI's ``response_format: {"type": "json_schema", ...}``, as its
own ``structured_outputs: {"json": schema}`` or as the older ``guided_json``. The fake "reads"
each property from the prompt deterministically: the first line naming the property (its name
with spaces for underscores, or its title, as whole words) gives the text after the label
(or the next line's), coerced to the property's
type; a property it cannot find gets its type's empty value. The reply always validates, as a
constrained decoder's does, unless ``invalid_json_next`` asks for one that does not.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ocrq.fakevllm.protocol import ProtocolError

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_LABEL_END = re.compile(r"^[\s:=#.|\-]+")


def structured_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema a request constrains its reply to, or None for an OCR request."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, dict) else None
        if not isinstance(schema, dict):
            raise ProtocolError("response_format.json_schema.schema must be an object")
        return schema
    outputs = body.get("structured_outputs")
    if isinstance(outputs, dict) and "json" in outputs:
        return _object(outputs["json"], "structured_outputs.json")
    if "guided_json" in body:
        return _object(body["guided_json"], "guided_json")
    return None


def _object(value: Any, name: str) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = msgspec.json.decode(value)
        except msgspec.DecodeError as e:
            raise ProtocolError(f"{name} is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise ProtocolError(f"{name} must be a JSON Schema object")
    return value


def chat_text(body: dict[str, Any]) -> str:
    """Every text part of every message, joined: a structured request carries no images."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ProtocolError("messages must be a non-empty list", param="messages")
    texts: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(p.get("text", "") for p in content if isinstance(p, dict))
        else:
            raise ProtocolError("each message needs a content", param="messages")
    return "\n".join(texts)


def fill(schema: dict[str, Any], text: str, label: str = "") -> Any:
    """A value for ``schema`` read from ``text`` (see the module docstring)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: fill(sub, text, name) for name, sub in props.items()}
    if kind == "array":
        return []
    if "enum" in schema:
        return schema["enum"][0]
    found = find_labelled(text, [label, str(schema.get("title", ""))])
    return coerce(found, kind)


def find_labelled(text: str, labels: list[str]) -> str:
    """The text after the first label found as whole words (case-insensitive): on its line,
    else the next line with text; "" when no line names it."""
    lines = [line.strip() for line in text.splitlines()]
    for raw in labels:
        label = raw.replace("_", " ").strip().lower()
        if not label:
            continue
        pattern = re.compile(rf"(?<![\w]){re.escape(label)}(?![\w])", re.I)
        for index, line in enumerate(lines):
            match = pattern.search(line)
            if match is None:
                continue
            # A Markdown table's row: "| Invoice No: | INV-1 |" reads as label and value.
            rest = _LABEL_END.sub("", line[match.end() :]).strip().strip("|").strip()
            below = next((ln for ln in lines[index + 1 :] if ln), "")
            if rest or below:
                return rest or below
    return ""


def coerce(found: str, kind: Any) -> Any:
    """``found`` as a value of JSON type ``kind``; its empty value when it is not one."""
    if kind in ("number", "integer"):
        match = _NUMBER.search(found)
        number = float(match.group().replace(",", "")) if match else 0.0
        return int(number) if kind == "integer" else number
    if kind == "boolean":
        return found.lower() in ("yes", "true", "x", "1")
    if kind == "null":
        return None
    return found


def structured_reply(body: dict[str, Any], schema: dict[str, Any], broken: bool) -> str:
    """The reply's content: JSON for the schema (``broken``: JSON that does not validate)."""
    values = fill(schema, chat_text(body))
    if broken:
        return '["not", "an", "object"]'  # fails any schema with an object at the top
    return msgspec.json.encode(values).decode()
