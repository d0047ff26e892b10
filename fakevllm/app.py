"""The fake vLLM's routes, request recording and failure injection."""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import msgspec

from ocrq.fakevllm.completion import (
    CHARS_PER_TOKEN,
    Answer,
    DecodedImage,
    completion_body,
    context_error,
    decode_image,
    make_answer,
    prompt_tokens,
)
from ocrq.fakevllm.config import FakeConfig, updated_config
from ocrq.fakevllm.h11server import DropConnection, HttpRequest, HttpResponse
from ocrq.fakevllm.protocol import ChatRequest, ProtocolError, check_model, parse_chat_request
from ocrq.fakevllm.structured import chat_text, structured_reply, structured_schema

ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


def error_response(status: int, message: str, param: str | None = None) -> HttpResponse:
    """vLLM's error body: {"error": {message, type, param, code}}."""
    return error_from(ProtocolError(message, param, status=status, error_type=ERROR_TYPES[status]))


def error_from(error: ProtocolError) -> HttpResponse:
    """The HTTP response for a refused request."""
    body = {
        "error": {
            "message": error.message,
            "type": error.error_type,
            "param": error.param,
            "code": error.status,
        }
    }
    return HttpResponse(error.status, msgspec.json.encode(body))


def json_response(payload: Any, status: int = 200) -> HttpResponse:
    """A 200 (or ``status``) JSON response."""
    return HttpResponse(status, msgspec.json.encode(payload))


class ConcurrencyGate:
    """At most ``config.max_concurrency`` requests run; the rest queue in arrival order.

    Not an asyncio.Semaphore because the limit may change at run time through /_config.
    """

    def __init__(self, app: FakeVllmApp) -> None:
        self.app = app
        self.running = 0
        self.waiting = 0
        self.peak_running = 0  # most requests ever running at once, since the last reset
        self.changed = asyncio.Condition()

    async def acquire(self, timeout_s: float) -> bool:
        """Take a slot, waiting in line at most ``timeout_s``; False when none came free."""
        async with self.changed:
            self.waiting += 1
            try:
                async with asyncio.timeout(timeout_s):
                    await self.changed.wait_for(
                        lambda: self.running < self.app.config.max_concurrency
                    )
            except TimeoutError:
                return False
            finally:
                self.waiting -= 1
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
            return True

    async def release(self) -> None:
        """Give a slot back and let the next queued request in."""
        self.running -= 1  # first, so a cancellation below cannot leak the slot
        async with self.changed:
            self.changed.notify_all()

    async def wake(self) -> None:
        """Re-check waiters after the limit changed."""
        async with self.changed:
            self.changed.notify_all()


@dataclass
class Traffic:
    """What the chat endpoint received since the last reset (benchmarks compare handoffs)."""

    requests: int = 0
    request_bytes: int = 0  # request bodies as they arrived
    images: int = 0  # images read and decoded, from data URIs and files alike
    structured: int = 0  # structured-output (field extraction) requests answered


class FakeVllmApp:
    """Routes requests; holds the config, the recorded bodies and the injection counters."""

    def __init__(self, config: FakeConfig) -> None:
        self.config = config
        self.recorded: deque[Any] = deque(maxlen=config.max_recorded or None)
        self.random = random.Random(config.seed)
        self.loading_since = time.monotonic()
        self.gate = ConcurrencyGate(self)
        self.traffic = Traffic()

    async def handle(self, request: HttpRequest) -> HttpResponse:
        """Dispatch one HTTP request."""
        routes = {
            ("POST", "/v1/chat/completions"): self.chat_completions,
            ("GET", "/v1/models"): self.models,
            ("GET", "/health"): self.health,
            ("GET", "/_requests"): self.list_requests,
            ("DELETE", "/_requests"): self.clear_requests,
            ("GET", "/_config"): self.get_config,
            ("GET", "/_stats"): self.get_stats,
            ("DELETE", "/_stats"): self.reset_stats,
            ("GET", "/_traffic"): self.get_traffic,
            ("DELETE", "/_traffic"): self.reset_traffic,
            ("POST", "/_config"): self.set_config,
        }
        route = routes.get((request.method, request.path))
        if route is not None:
            return await route(request)
        if any(path == request.path for _, path in routes):
            return error_response(405, f"method {request.method} not allowed")
        return error_response(404, f"no route {request.path}")

    def loading(self) -> bool:
        """True while the simulated model load is in progress."""
        return time.monotonic() - self.loading_since < self.config.slow_start_s

    async def health(self, request: HttpRequest) -> HttpResponse:
        """200 when ready, 503 while loading."""
        if self.loading():
            return error_response(503, "model is loading")
        return HttpResponse(200)

    async def models(self, request: HttpRequest) -> HttpResponse:
        """The served model, OpenAI list shape."""
        if self.loading():
            return error_response(503, "model is loading")
        card: dict[str, Any] = {"id": self.config.model, "object": "model", "owned_by": "vllm"}
        card["max_model_len"] = self.config.max_model_len
        return json_response({"object": "list", "data": [card]})

    async def list_requests(self, request: HttpRequest) -> HttpResponse:
        """Every recorded chat-completion body, in arrival order."""
        return json_response(list(self.recorded))

    async def clear_requests(self, request: HttpRequest) -> HttpResponse:
        """Forget the recorded bodies."""
        self.recorded.clear()
        return json_response({"cleared": True})

    async def get_stats(self, request: HttpRequest) -> HttpResponse:
        """Requests running and queued now, and the peak running since the last reset."""
        gate = self.gate
        stats = {"running": gate.running, "queued": gate.waiting, "peak_running": gate.peak_running}
        return json_response(stats)

    async def reset_stats(self, request: HttpRequest) -> HttpResponse:
        """Start counting the peak afresh."""
        self.gate.peak_running = self.gate.running
        return json_response({"reset": True})

    async def get_traffic(self, request: HttpRequest) -> HttpResponse:
        """Chat requests, their body bytes and the images decoded, since the last reset."""
        return json_response(self.traffic)

    async def reset_traffic(self, request: HttpRequest) -> HttpResponse:
        """Start counting traffic afresh."""
        self.traffic = Traffic()
        return json_response({"reset": True})

    async def get_config(self, request: HttpRequest) -> HttpResponse:
        """The current config, counters included."""
        return json_response(self.config)

    async def set_config(self, request: HttpRequest) -> HttpResponse:
        """Apply a JSON object of config fields; setting slow_start_s restarts the load clock."""
        try:
            changes = msgspec.json.decode(request.body)
            if not isinstance(changes, dict):
                raise msgspec.ValidationError("the body must be a JSON object")
            config = updated_config(self.config, changes)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            return error_response(400, f"invalid config: {e}")
        self.apply_config(config, changes)
        await self.gate.wake()
        return json_response(self.config)

    def apply_config(self, config: FakeConfig, changes: dict[str, Any]) -> None:
        """Swap in a new config and reset what depends on the changed fields."""
        self.config = config
        if "slow_start_s" in changes:
            self.loading_since = time.monotonic()
        if "seed" in changes:
            self.random = random.Random(config.seed)
        if "max_recorded" in changes:
            self.recorded = deque(self.recorded, maxlen=config.max_recorded or None)

    async def chat_completions(self, request: HttpRequest) -> HttpResponse:
        """Record the body, inject failures, enforce the protocol, then answer."""
        self.traffic.requests += 1
        self.traffic.request_bytes += len(request.body)
        try:
            body = await asyncio.to_thread(msgspec.json.decode, request.body)
        except msgspec.DecodeError as e:
            return error_response(400, f"the request body is not valid JSON: {e}")
        if self.config.max_recorded:
            self.recorded.append(body)
        if self.loading():
            return error_response(503, "model is loading")
        injected = await self.inject_failure()
        if injected is not None:
            return injected
        try:
            return await self.answer(body)
        except ProtocolError as e:
            return error_from(e)

    def take(self, counter: str, rate: float) -> bool:
        """Consume one from a ``*_next`` counter, else draw against its rate."""
        remaining: int = getattr(self.config, counter)
        if remaining > 0:
            setattr(self.config, counter, remaining - 1)
            return True
        return rate > 0 and self.random.random() < rate

    async def inject_failure(self) -> HttpResponse | None:
        """Drop, hang or fail this request as configured; None lets it through."""
        if self.take("drop_next", self.config.drop_rate):
            raise DropConnection()
        if self.take("hang_next", self.config.hang_rate):
            # The connection watcher cancels this sleep when the client gives up.
            await asyncio.sleep(self.config.hang_s)
            return error_response(503, "request hung and was abandoned by the server")
        if self.take("fail_next", self.config.fail_rate):
            status = self.config.fail_status
            return error_response(status, f"injected failure ({status})")
        return None

    async def answer(self, body: Any) -> HttpResponse:
        """Validate, decode the images off the loop, wait for a slot, 'generate'."""
        config = self.config
        schema = structured_schema(body) if isinstance(body, dict) else None
        if schema is not None:
            return self.answer_structured(body, schema)
        chat, images = await asyncio.to_thread(read_chat_request, body, config)
        self.traffic.images += len(images)
        prompt = prompt_tokens(chat, images, config.profile)
        if prompt + chat.max_tokens > config.max_model_len:
            raise context_error(prompt, chat.max_tokens, config.max_model_len)
        if not await self.gate.acquire(config.queue_timeout_s):
            return error_response(503, "request timed out waiting for a free sequence slot")
        try:
            await asyncio.sleep(config.latency_s * len(images))
        finally:
            await self.gate.release()
        truncate = self.take("truncate_next", 0.0)
        reply = make_answer(chat, images, config.profile, truncate=truncate)
        return json_response(completion_body(reply, config.model))

    def answer_structured(self, body: dict[str, Any], schema: dict[str, Any]) -> HttpResponse:
        """A structured-output request: JSON for its schema, read from its text."""
        check_model(body, self.config)
        self.traffic.structured += 1
        broken = self.take("invalid_json_next", 0.0)
        content = structured_reply(body, schema, broken)
        tokens = max(1, len(content) // CHARS_PER_TOKEN)
        prompt = max(1, len(chat_text(body)) // CHARS_PER_TOKEN)
        answer = Answer(content, "stop", prompt, tokens)
        return json_response(completion_body(answer, self.config.model))


def read_chat_request(body: Any, config: FakeConfig) -> tuple[ChatRequest, list[DecodedImage]]:
    """Check the body, read its image files and decode every image (blocking: use a thread)."""
    chat = parse_chat_request(body, config)
    images = [decode_image(image, index) for index, image in enumerate(chat.images)]
    return chat, images
