"""Fields from an LLM: the job's text sent to an OpenAI-compatible server, the reply checked.

The request asks for structured outputs (``response_format: json_schema``, which vLLM turns
into constrained decoding), at temperature 0. The reply is validated against the schema again
here: a reply that does not validate, or a request that fails, is asked again up to
OCRQ_EXTRACT_RETRIES times, then the fields report ``extract_error`` (the OCR result stays).
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import structlog

from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.field_schema import schema_problems
from ocrq.shared.schemas import Page
from ocrq.shared.settings import ExtractSettings

log = structlog.get_logger("ocrq.fields")

SYSTEM_PROMPT = (
    "You read documents and return the fields the JSON Schema asks for, as JSON only. "
    "Copy each value as it is printed in the document; use null or leave out a field "
    "the document does not hold. Never invent a value."
)


def document_text(pages: list[Page], max_chars: int) -> str:
    """The pages' text with a marker before each page, cut at ``max_chars``."""
    parts = [f"<page {p.number}>\n{p.markdown or ''}" for p in pages]
    text = "\n\n".join(parts)
    return text[:max_chars]


class LlmReader:
    """Asks one OpenAI-compatible server for a schema's fields (one pooled client)."""

    def __init__(self, settings: ExtractSettings, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self.http = http
        self.url = settings.extract_url.rstrip("/")
        self.model = settings.extract_model

    async def read(self, schema: dict[str, Any], pages: list[Page]) -> dict[str, Any]:
        """Values that validate against ``schema``; OcrqError(extract_error) when none came."""
        text = document_text(pages, self.settings.extract_max_chars)
        problem = ""
        for attempt in range(1 + max(0, self.settings.extract_retries)):
            try:
                values = await self._ask(schema, text)
            except OcrqError as e:
                problem = e.message
                log.warning("extract_attempt_failed", attempt=attempt + 1, error=problem)
                continue
            problems = schema_problems(schema, values)
            if not problems:
                return values  # type: ignore[no-any-return]
            problem = "the reply does not follow the schema: " + "; ".join(problems[:3])
            log.warning("extract_attempt_failed", attempt=attempt + 1, error=problem)
        raise OcrqError(ErrorCode.EXTRACT_ERROR, problem)

    async def _ask(self, schema: dict[str, Any], text: str) -> Any:
        body = {
            "model": self.model or await self._served_model(),
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": text},
            ],
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "fields", "schema": schema},
            },
        }
        reply = await self._post("/v1/chat/completions", body)
        try:
            content = reply["choices"][0]["message"]["content"]
            return msgspec.json.decode(content)
        except (KeyError, IndexError, TypeError, msgspec.DecodeError) as e:
            raise OcrqError(ErrorCode.EXTRACT_ERROR, f"the reply is not JSON: {e}") from e

    async def _served_model(self) -> str:
        """The server's first model (GET /v1/models), asked once."""
        listing = await self._get("/v1/models")
        try:
            self.model = str(listing["data"][0]["id"])
        except (KeyError, IndexError, TypeError) as e:
            raise OcrqError(ErrorCode.EXTRACT_ERROR, "the server lists no model") from e
        return self.model

    def _headers(self) -> dict[str, str]:
        key = self.settings.extract_api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        return await self._call("POST", path, msgspec.json.encode(body))

    async def _get(self, path: str) -> Any:
        return await self._call("GET", path, None)

    async def _call(self, method: str, path: str, content: bytes | None) -> Any:
        headers = {**self._headers(), "Content-Type": "application/json"}
        try:
            response = await self.http.request(
                method,
                self.url + path,
                content=content,
                headers=headers,
                timeout=self.settings.extract_timeout_s,
            )
        except httpx.HTTPError as e:
            message = f"{self.url} did not answer: {type(e).__name__}"
            raise OcrqError(ErrorCode.EXTRACT_ERROR, message) from e
        if response.status_code != 200:
            message = f"{self.url} answered {response.status_code}: {response.text[:200]}"
            raise OcrqError(ErrorCode.EXTRACT_ERROR, message)
        try:
            return msgspec.json.decode(response.content)
        except msgspec.DecodeError as e:
            raise OcrqError(ErrorCode.EXTRACT_ERROR, f"{self.url} answered non-JSON") from e
