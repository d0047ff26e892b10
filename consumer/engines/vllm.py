"""The vLLM engine: one OpenAI-compatible chat completion per page group (one request).

Every model difference (prompt, n-gram settings, coordinate scale, token budget) comes from the
profile (shared.profiles); this module has one code path. It never retries: it turns
each failure into an OcrqError whose code tells the worker whether a retry may help.

Pages reach vLLM as base64 data URIs (``OCRQ_PAGE_HANDOFF=data``: any host), or as
``file://`` URLs of the rendered files (``file``: a vLLM that shares this worker's /dev/shm,
started with ``--allowed-local-media-path``), which spares the read, the base64 and a body a
third bigger than the image. The worker deletes a page only after the engine's answer.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Literal

import httpx
import msgspec
import structlog
from PIL import Image

from ocrq.consumer.circuit import EngineCircuit
from ocrq.consumer.engines.base import EngineOutput, PageImage
from ocrq.consumer.grounding import parse_page
from ocrq.consumer.workspace import claim_worker_folder, stack_root
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.profiles import Profile, get_profile
from ocrq.shared.schemas import Page, Segment, Usage
from ocrq.shared.settings import Settings
from ocrq.shared.tracing import trace_headers

CHAT_PATH = "/v1/chat/completions"
CONNECT_TIMEOUT_S = 10.0
MAX_ERROR_CHARS = 500  # of a server's error text quoted in our message
PROBE_SIDE_PX = 64  # the start-up probe page: a blank square, answered in one token

Handoff = Literal["data", "file"]
log = structlog.get_logger("ocrq.engine")


class PageHandoffError(OcrqError, ValueError):
    """OCRQ_PAGE_HANDOFF=file cannot work with this engine: the worker must not start.

    Also a ValueError, the bad-setting error `ocrq worker` reports in one line (exit 2).
    """


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


def file_uri(page: PageImage) -> str:
    """The page file as a file:// URL (it must exist: the engine is told to read it)."""
    path = Path(page.path).absolute()
    path.stat()  # raises FileNotFoundError for a page that was never written
    return path.as_uri()


def encode_body(
    profile: Profile,
    model: str,
    pages: list[PageImage],
    max_tokens: int,
    handoff: Handoff = "data",
) -> bytes:
    """The JSON request body for these pages (file reads, base64 and JSON: off the loop)."""
    to_uri = file_uri if handoff == "file" else data_uri
    try:
        uris = [to_uri(page) for page in pages]
    except OSError as e:
        raise OcrqError(ErrorCode.INTERNAL, f"cannot read a rendered page: {e}") from e
    return msgspec.json.encode(build_request(profile, model, uris, max_tokens))


def blank_png(side: int) -> bytes:
    """A white ``side`` x ``side`` RGB PNG."""
    buffer = io.BytesIO()
    Image.new("RGB", (side, side), "white").save(buffer, "PNG")
    return buffer.getvalue()


def write_probe_page(settings: Settings) -> PageImage:
    """A blank page in a probe folder of this stack's shm root (blocking I/O).

    The folder is claimed like a worker's, so a worker killed mid-probe leaves nothing the
    next start's sweep does not remove.
    """
    root = stack_root(settings.worker.shm_dir, settings.store.redis_url, settings.store.prefix)
    folder = claim_worker_folder(root, f"probe-{os.getpid()}-{secrets.token_hex(2)}")
    path = folder / "probe.png"
    path.write_bytes(blank_png(PROBE_SIDE_PX))
    return PageImage(
        number=1, path=str(path), media_type="image/png", width=PROBE_SIDE_PX, height=PROBE_SIDE_PX
    )


def shared_folder(probe: PageImage) -> Path:
    """``<shm_dir>/ocrq``, above the stack and probe folders: what vLLM must allow."""
    return Path(probe.path).absolute().parents[2]


def handoff_error(error: OcrqError, probe: PageImage, vllm_url: str) -> PageHandoffError:
    """Why file handoff failed, and what makes it work, in one line."""
    shared = shared_folder(probe)
    detail = " ".join(error.message.split())  # one line: a server message may hold newlines
    return PageHandoffError(
        error.code,
        f"OCRQ_PAGE_HANDOFF=file, but vLLM at {vllm_url} cannot read the probe page "
        f"{Path(probe.path).absolute().as_uri()}: {detail}. vLLM must share this worker's "
        f"{shared} (same host, or same pod) and be started with --allowed-local-media-path "
        f"{shared}; or set OCRQ_PAGE_HANDOFF=data.",
    )


PROBE_TIMEOUT_S = 5.0


class VllmEngine:
    """OCR through a vLLM server's /v1/chat/completions, one request per page group."""

    name = "vllm"
    reads_scripts: frozenset[str] | None = None  # the model reads many scripts

    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        if not settings.ocr.vllm_url:
            raise ValueError("the vllm engine needs OCRQ_VLLM_URL")
        get_profile(settings.ocr.profile)  # an unknown default profile fails at startup
        self.model = settings.ocr.vllm_model
        self.profile = settings.ocr.profile
        self._settings = settings
        self._handoff: Handoff = settings.ocr.page_handoff
        self._client = client
        self._url = chat_completions_url(settings.ocr.vllm_url)
        self._health_url = self._url.removesuffix(CHAT_PATH) + "/health"
        self._max_tokens = settings.ocr.max_tokens
        # The read timeout bounds the whole generation (vLLM sends nothing until it is done);
        # a dead host should fail faster than that.
        self._timeout = httpx.Timeout(
            settings.ocr.engine_timeout_s,
            connect=min(settings.ocr.engine_timeout_s, CONNECT_TIMEOUT_S),
        )
        self._headers = {"Content-Type": "application/json"}
        if settings.ocr.vllm_api_key:
            self._headers["Authorization"] = f"Bearer {settings.ocr.vllm_api_key}"

    async def warm_up(self) -> None:
        """With file handoff, prove vLLM reads this worker's pages; nothing to start otherwise.

        vLLM may still be loading (a pod's containers start together): the probe waits for it
        as a job would, up to OCRQ_ENGINE_OUTAGE_S. A refusal raises PageHandoffError.
        """
        if self._handoff == "file":
            await self._probe_file_handoff()

    async def _probe_file_handoff(self) -> None:
        """Send one blank page as a file:// URL through the circuit; remove it on every path."""
        page = await asyncio.to_thread(write_probe_page, self._settings)
        circuit = EngineCircuit(self.probe, self._settings)
        try:
            body = await asyncio.to_thread(
                encode_body, get_profile(self.profile), self.model, [page], 1, "file"
            )
            await circuit.call(lambda: self._post(body), on_error=self._log_probe_failure)
        except OcrqError as e:
            raise handoff_error(e, page, self._url.removesuffix(CHAT_PATH)) from e
        finally:
            await circuit.aclose()
            await asyncio.to_thread(shutil.rmtree, Path(page.path).parent, True)
        log.info("file_handoff_ready", folder=str(shared_folder(page)))

    def _log_probe_failure(self, error: OcrqError) -> None:
        log.warning("file_handoff_probe_failed", code=error.code.value, error=error.message)

    async def recognise(
        self,
        pages: list[PageImage],
        *,
        profile: str | None = None,
        languages: str | None = None,
        layout: bool = True,
    ) -> EngineOutput:
        """OCR the pages in one request; raise OcrqError with a transient or permanent code.

        ``languages`` and ``layout`` are unused: the model reads what it sees, and its own
        grounding labels give the layout.
        """
        if not pages:
            return EngineOutput(pages=[])
        chosen = get_profile(profile or self.profile)
        body = await asyncio.to_thread(
            encode_body, chosen, self.model, pages, self._max_tokens, self._handoff
        )
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
                self._url,
                content=body,
                headers={**self._headers, **trace_headers()},  # vLLM joins the trace
                timeout=self._timeout,
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
