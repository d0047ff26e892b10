"""A finished job's fields: through the LLM when OCRQ_EXTRACT_URL is set, else key-value.

Either way each value is grounded in the page's lines (consumer/fields/lines.py): the page
and the word boxes it was read from, or ``grounded: false``. The fields never fail the job:
what cannot be read is reported in ``Fields.error`` beside the OCR result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ocrq.consumer.engines.base import Word
from ocrq.consumer.fields.grounding import locate
from ocrq.consumer.fields.keyvalue import Found, read_fields
from ocrq.consumer.fields.lines import Line, block_lines, engine_lines, pdf_words
from ocrq.consumer.fields.llm import LlmReader
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.field_schema import schema_problems
from ocrq.shared.schemas import ErrorBody, Fields, FieldSource, Result
from ocrq.shared.settings import ExtractSettings


class FieldReader:
    """Reads the ``extract`` option's fields of a job; one per worker process."""

    def __init__(self, settings: ExtractSettings, http: httpx.AsyncClient | None) -> None:
        self.llm = LlmReader(settings, http) if settings.extract_url and http else None
        self._pdf = asyncio.Lock()  # PyMuPDF is not thread-safe: one text layer at a time

    async def read(self, schema: dict[str, Any], result: Result, lines: list[Line]) -> Fields:
        """The job's fields (see the module docstring), read from its pages' lines."""
        if self.llm is None:
            found = await asyncio.to_thread(read_fields, schema, lines)
            return key_value_fields(schema, found)
        try:
            values = await self.llm.read(schema, result.pages)
        except OcrqError as e:
            error = ErrorBody(code=e.code.value, message=e.message)
            return Fields(method="llm", model=self.llm.model, error=error)
        sources = await asyncio.to_thread(ground_values, values, lines)
        return Fields(values=values, sources=sources, method="llm", model=self.llm.model)

    async def page_lines(
        self, result: Result, words: dict[int, list[Word]], doc: Path
    ) -> list[Line]:
        """Every page's lines in page order: engine words, the PDF's words, or its blocks."""
        text_layer = [p.number for p in result.pages if p.source == "text_layer"]
        from_pdf: dict[int, list[Line]] = {}
        if text_layer and result.media_type == "application/pdf":
            async with self._pdf:
                from_pdf = await asyncio.to_thread(pdf_words, str(doc), text_layer)
        lines: list[Line] = []
        for page in result.pages:
            if page.number in words:
                lines += engine_lines(page, words[page.number])
            elif page.number in from_pdf:
                lines += from_pdf[page.number]
            else:
                lines += block_lines(page)
        return lines


def key_value_fields(schema: dict[str, Any], found: dict[str, Found | None]) -> Fields:
    """Fields from what the key-value reading found; what the schema needs and the page
    lacks is named in the error."""
    values: dict[str, Any] = {}
    sources = []
    for path, hit in found.items():
        if hit is None:
            sources.append(FieldSource(path=path, value=None))
            continue
        put(values, path, hit.value)
        sources.append(source_of(path, hit))
    problems = schema_problems(schema, values)
    error = None
    if problems:
        message = "not found on the page or not valid: " + "; ".join(problems[:5])
        error = ErrorBody(code=ErrorCode.EXTRACT_ERROR.value, message=message)
    return Fields(values=values, sources=sources, method="key_value", error=error)


def source_of(path: str, hit: Found) -> FieldSource:
    """A grounded value's FieldSource."""
    boxes = [[round(c, 4) for c in box] for box in hit.boxes]
    return FieldSource(
        path=path,
        value=hit.value,
        text=hit.text,
        page=hit.page,
        boxes=boxes,
        confidence=hit.confidence,
        grounded=True,
    )


def put(values: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a/b/c`` in nested dicts."""
    *parents, last = path.split("/")
    for name in parents:
        values = values.setdefault(name, {})
    values[last] = value


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, scalar) of every scalar in a JSON value; list items as ``name/0``."""
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from leaves(sub, f"{path}/{key}" if path else str(key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from leaves(sub, f"{path}/{index}")
    elif path:
        yield path, value


def ground_values(values: dict[str, Any], lines: list[Line]) -> list[FieldSource]:
    """Each scalar of an LLM's reply with the place it was read from, or ungrounded."""
    sources = []
    for path, value in leaves(values):
        hit = locate(value, lines)
        sources.append(source_of(path, hit) if hit else FieldSource(path=path, value=value))
    return sources
