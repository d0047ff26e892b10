"""The extraction protocol against a real OpenAI-compatible server, where one is given.

Set OCRQ_TEST_LLM_URL (and OCRQ_TEST_LLM_MODEL, else the server's first) to a vLLM or other
server with structured outputs: whatever its weights, the reply must validate against the
schema. Skipped without it: no such server runs on the development machines (no GPU).
"""

from __future__ import annotations

import os

import httpx
import pytest

from ocrq.consumer.fields.llm import LlmReader
from ocrq.shared.field_schema import schema_problems
from ocrq.shared.schemas import Page
from ocrq.shared.settings import settings_of

URL = os.environ.get("OCRQ_TEST_LLM_URL", "")
pytestmark = pytest.mark.skipif(
    not URL, reason="OCRQ_TEST_LLM_URL names no real LLM server (none runs without a GPU)"
)
SCHEMA = {
    "type": "object",
    "properties": {"invoice_number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["invoice_number", "total"],
    "additionalProperties": False,
}


async def test_a_real_server_answers_json_that_validates_against_the_schema() -> None:
    settings = settings_of(
        extract_url=URL, extract_model=os.environ.get("OCRQ_TEST_LLM_MODEL", ""), extract_retries=0
    )
    page = Page(number=1, width=100, height=100, markdown="Invoice No: INV-7\nTotal: 12.50")
    async with httpx.AsyncClient(timeout=120) as http:
        values = await LlmReader(settings.extract, http).read(SCHEMA, [page])
    assert schema_problems(SCHEMA, values) == []
