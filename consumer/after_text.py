"""After a job's text is read: its fields and its redaction boxes, both from its lines."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import structlog

from ocrq.consumer.engines.base import EngineOutput
from ocrq.consumer.fields.lines import Line
from ocrq.consumer.fields.reader import FieldReader
from ocrq.consumer.redact.redactor import Redactor
from ocrq.shared.errors import ErrorCode
from ocrq.shared.schemas import ErrorBody, Fields, JobOptions, Result

log = structlog.get_logger("ocrq.worker")


async def after_text(
    reader: FieldReader,
    options: JobOptions,
    doc: Path,
    result: Result,
    outputs: list[EngineOutput],
    redactor: Redactor | None,
) -> list[Line]:
    """The extract option's fields and the redact option's boxes, set on the result; the
    pages' lines of words they were read from (the redacted PDF's text layer)."""
    if not options.extract and redactor is None:
        return []
    words = {n: w for out in outputs for n, w in out.words.items()}
    lines = await reader.page_lines(result, words, doc)
    if options.extract:
        result.fields = await read_fields(reader, options.extract, result, lines)
    if redactor is not None:
        redactor.place(result, lines)
    return lines


async def read_fields(
    reader: FieldReader, schema: dict[str, Any], result: Result, lines: list[Line]
) -> Fields:
    """The fields; a failure there never fails the OCR result, it is the fields' error."""
    started = time.monotonic()
    try:
        fields = await reader.read(schema, result, lines)
    except Exception as e:  # a bug in reading fields must not cost the user the text
        log.exception("fields_crashed", error=repr(e))
        message = f"fields could not be read: {type(e).__name__}"
        fields = Fields(error=ErrorBody(code=ErrorCode.EXTRACT_ERROR.value, message=message))
    found = sum(1 for s in fields.sources if s.grounded)
    seconds = round(time.monotonic() - started, 3)
    log.info(
        "fields", method=fields.method, grounded=found, error=bool(fields.error), seconds=seconds
    )
    return fields
