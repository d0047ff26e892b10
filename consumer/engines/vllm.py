"""The vLLM engine: one OpenAI-compatible chat completion per micro-batch of pages.

Every model difference (prompt, n-gram settings, coordinate scale, token budget) comes from the
profile (shared.profiles); this module has one code path. It never retries: it turns
each failure into an OcrqError whose code tells the worker whether a retry may help.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import httpx
import msgspec

from ocrq.consumer.engines.base import EngineOutput, PageImage
from ocrq.consumer.grounding import parse_page
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.profiles import Profile, get_profile
from ocrq.shared.schemas import Page, Segment, Usage
from ocrq.shared.settings import Settings

CHAT_PATH = "/v1/chat/completions"
CONNECT_TIMEOUT_S = 10.0
MAX_ERROR_CHARS = 500  # of a server's error text quoted in our message


class _Message(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    message: _Message
    finish_reason: str | None = None


class _TokenUsage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Completion(msgspec.Struct):
    """The part of a chat-completion reply the engine reads."""

    choices: list[_Choice]
    usage: _TokenUsage | None = None


def chat_completions_url(vllm_url: str) -> str:
    """The chat endpoint under a server root; a root given with a trailing /v1 works too."""
    root = vllm_url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    try:
        url = httpx.URL(root)
    except httpx.InvalidURL as e:
        raise ValueError(f"OCRQ_VLLM_URL {vllm_url!r} is not a URL: {e}") from e
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"OCRQ_VLLM_URL {vllm_url!r} must be an http(s)://host[:port] URL")
    return root + CHAT_PATH


def build_request(
    profile: Profile, model: str, image_uris: list[str], max_tokens_override: int
) -> dict[str, Any]:
    """The chat-completion body for these images; ``max_tokens_override`` 0 keeps the profile's."""
    count = len(image_uris)
    xargs: dict[str, Any] = {
        "ngram_size": profile.ngram_size,
        "window_size": profile.window_size(count),
    }
    if profile.whitelist_token_ids:
        xargs["whitelist_token_ids"] = list(profile.whitelist_token_ids)
    content: list[dict[str, Any]] = [{"type": "text", "text": profile.prompt(count)}]
    content += [{"type": "image_url", "image_url": {"url": uri}} for uri in image_uris]
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "temperature": profile.temperature,
        "max_tokens": max_tokens_override or profile.max_tokens(count),
        "skip_special_tokens": False,
        "vllm_xargs": xargs,
    }


def data_uri(page: PageImage) -> str:
    """The page image as a base64 data URI (reads the file: call it off the event loop)."""
    data = Path(page.path).read_bytes()
    return f"data:{page.media_type};base64,{base64.b64encode(data).decode('ascii')}"


def encode_body(profile: Profile, model: str, pages: list[PageImage], max_tokens: int) -> bytes:
    """The JSON request body for these pages (file reads, base64 and JSON: off the loop)."""
    try:
        uris = [data_uri(page) for page in pages]
    except OSError as e:
        raise OcrqError(ErrorCode.INTERNAL, f"cannot read a rendered page: {e}") from e
    return msgspec.json.encode(build_request(profile, model, uris, max_tokens))


PROBE_TIMEOUT_S = 5.0


class VllmEngine:
    """OCR through a vLLM server's /v1/chat/completions, one request per micro-batch."""

    name = "vllm"
    reads_scripts: frozenset[str] | None = None  # the model reads many scripts

    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        if not settings.vllm_url:
            raise ValueError("the vllm engine needs OCRQ_VLLM_URL")
        get_profile(settings.profile)  # an unknown default profile fails at startup
        self.model = settings.vllm_model
        self.profile = settings.profile
        self._client = client
        self._url = chat_completions_url(settings.vllm_url)
        self._health_url = self._url.removesuffix(CHAT_PATH) + "/health"
        self._max_tokens = settings.max_tokens
        # The read timeout bounds the whole generation (vLLM sends nothing until it is done);
        # a dead host should fail faster than that.
        self._timeout = httpx.Timeout(
            settings.engine_timeout_s, connect=min(settings.engine_timeout_s, CONNECT_TIMEOUT_S)
        )
        self._headers = {"Content-Type": "application/json"}
        if settings.vllm_api_key:
            self._headers["Authorization"] = f"Bearer {settings.vllm_api_key}"

    async def warm_up(self) -> None:
        """Nothing to start: the model runs in the vLLM server."""

    async def recognise(
        self, pages: list[PageImage], *, profile: str | None = None, languages: str | None = None
    ) -> EngineOutput:
        """OCR the pages in one request; raise OcrqError with a transient or permanent code.

        ``languages`` is unused: the model reads what it sees.
        """
        if not pages:
            return EngineOutput(pages=[])
        chosen = get_profile(profile or self.profile)
        body = await asyncio.to_thread(encode_body, chosen, self.model, pages, self._max_tokens)
        reply = await self._post(body)
        # A looping answer runs to hundreds of kB: decode and parse it off the loop too.
        return await asyncio.to_thread(read_reply, reply, pages, chosen)

    async def probe(self) -> bool:
        """True when vLLM answers /health with 200 (up, model loaded)."""
        try:
            response = await self._client.get(
                self._health_url, headers=self._headers, timeout=PROBE_TIMEOUT_S
            )
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def aclose(self) -> None:
        """Nothing to release: the HTTP client is shared and owned (and closed) by the worker."""

    async def _post(self, body: bytes) -> bytes:
        """Send one request and return the successful reply's body, classifying every failure."""
        try:
            response = await self._client.post(
                self._url, content=body, headers=self._headers, timeout=self._timeout
            )
        except httpx.TimeoutException as e:
            raise OcrqError(ErrorCode.TIMEOUT, f"vLLM request timed out: {_describe(e)}") from e
        except httpx.RequestError as e:  # connect, read, write, dropped connection, ...
            raise OcrqError(
                ErrorCode.ENGINE_UNAVAILABLE, f"vLLM unreachable: {_describe(e)}"
            ) from e
        if not response.is_success:
            raise status_error(response)
        return response.content


def status_error(response: httpx.Response) -> OcrqError:
    """The error for a non-2xx answer: 429 and 5xx are transient, other statuses are not."""
    detail = f"vLLM answered {response.status_code}: {server_message(response)}"
    if response.status_code == 429 or response.status_code >= 500:
        return OcrqError(ErrorCode.ENGINE_UNAVAILABLE, detail)
    return OcrqError(ErrorCode.ENGINE_ERROR, detail)


def server_message(response: httpx.Response) -> str:
    """vLLM's error message: ``{"error": {"message"}}``, the older ``{"message"}``, or the text."""
    try:
        body = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        body = None
    message: object = None
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        message = message or body.get("message") or body.get("detail")
    if not isinstance(message, str) or not message:
        message = response.text.strip() or response.reason_phrase
    return message[:MAX_ERROR_CHARS]


def _describe(error: httpx.HTTPError) -> str:
    """An httpx error as 'ClassName: message' (many have an empty message)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def read_reply(reply: bytes, pages: list[PageImage], profile: Profile) -> EngineOutput:
    """Decode a chat-completion reply into the engine's output for these pages."""
    try:
        completion = msgspec.json.decode(reply, type=_Completion)
    except msgspec.DecodeError as e:
        raise OcrqError(ErrorCode.ENGINE_ERROR, f"vLLM sent an unreadable reply: {e}") from e
    return engine_output(completion, pages, profile)


def engine_output(
    completion: _Completion, pages: list[PageImage], profile: Profile
) -> EngineOutput:
    """One page: Markdown and blocks on the page. Several: one Segment over the page range."""
    if not completion.choices:
        raise OcrqError(ErrorCode.ENGINE_ERROR, "vLLM reply has no choices")
    choice = completion.choices[0]
    text = choice.message.content or ""
    truncated = choice.finish_reason == "length"
    tokens = completion.usage or _TokenUsage()
    usage = Usage(
        requests=1,
        prompt_tokens=tokens.prompt_tokens,
        completion_tokens=tokens.completion_tokens,
    )
    if len(pages) == 1:
        return EngineOutput(pages=[single_page(text, pages[0], profile, truncated)], usage=usage)
    return EngineOutput(
        pages=[Page(number=p.number, width=p.width, height=p.height) for p in pages],
        segments=[segment(text, pages, profile, truncated)],
        usage=usage,
    )


def single_page(text: str, page: PageImage, profile: Profile, truncated: bool) -> Page:
    """A one-page answer: boxes scaled to the page's pixel size."""
    parsed = parse_page(
        text,
        coord_scale=profile.coord_scale,
        width=page.width,
        height=page.height,
        image_prefix=f"page-{page.number}",
    )
    return Page(
        number=page.number,
        width=page.width,
        height=page.height,
        markdown=parsed.markdown,
        blocks=parsed.blocks,
        truncated=truncated,
    )


def segment(text: str, pages: list[PageImage], profile: Profile, truncated: bool) -> Segment:
    """A multi-page answer: one text for the whole range, with no page boundaries to trust.

    Boxes are dropped: the model gives no page for them, so they cannot be placed.
    """
    first = min(p.number for p in pages)
    last = max(p.number for p in pages)
    parsed = parse_page(
        text,
        coord_scale=profile.coord_scale,
        width=pages[0].width,
        height=pages[0].height,
        image_prefix=f"pages-{first}-{last}",
    )
    return Segment(first_page=first, last_page=last, markdown=parsed.markdown, truncated=truncated)
