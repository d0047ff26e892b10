"""The model protocol: which chat-completion bodies the fake accepts, and why it rejects others.

Images come as base64 data URIs, or as ``file://`` URLs under the folder vLLM was started
with (``--allowed-local-media-path``); vLLM refuses every other local file, and all of them
when no folder was given. The messages of that rule are vLLM's own (MediaConnector in
vllm/multimodal/utils.py). A file that cannot be read is answered 400 here; a real vLLM may
answer 500 (an OSError in its image loader): the worker's start-up probe refuses both.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from ocrq.fakevllm.config import FakeConfig, Profile

IMAGE_MARKER = "<image>"
DATA_URI = re.compile(r"^data:(image/(?:png|jpeg));base64,(.*)$", re.DOTALL)
FILE_SCHEME = "file:"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"
MAGIC_TYPES = ((PNG_MAGIC, "image/png"), (JPEG_MAGIC, "image/jpeg"))


class ProtocolError(Exception):
    """A request the server refuses, with vLLM's status, error type and offending parameter."""

    def __init__(
        self,
        message: str,
        param: str | None = None,
        *,
        status: int = 400,
        error_type: str = "BadRequestError",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.error_type = error_type


@dataclass(frozen=True)
class EncodedImage:
    """One image of a request, still encoded, with the media type its data URI declared."""

    media_type: str
    data: bytes


@dataclass(frozen=True)
class ChatRequest:
    """A chat-completion request that follows the protocol (images not yet decoded)."""

    prompt: str
    images: list[EncodedImage]
    max_tokens: int


def is_int(value: object) -> bool:
    """True for a JSON integer (bool is not one, though Python says so)."""
    return isinstance(value, int) and not isinstance(value, bool)


def parse_chat_request(body: Any, config: FakeConfig) -> ChatRequest:
    """Check ``body`` against the protocol; raise ProtocolError naming the first broken rule."""
    if not isinstance(body, dict):
        raise ProtocolError("the request body must be a JSON object")
    check_model(body, config)
    if body.get("stream"):
        raise ProtocolError("stream=true is not supported by this server", param="stream")
    prompt, images = parse_messages(body.get("messages"), config.allowed_local_media_path)
    check_sampling(body)
    check_xargs(body.get("vllm_xargs"), config.profile, len(images))
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ProtocolError(
            f"max_tokens must be an integer >= 1, got {max_tokens!r}", param="max_tokens"
        )
    return ChatRequest(prompt=prompt, images=images, max_tokens=max_tokens)


def check_model(body: dict[str, Any], config: FakeConfig) -> None:
    """The model must be the served one; vLLM answers 404 otherwise."""
    model = body.get("model")
    if model != config.model:
        raise ProtocolError(
            f"The model `{model}` does not exist.",
            param="model",
            status=404,
            error_type="NotFoundError",
        )


def parse_messages(messages: Any, allowed: str = "") -> tuple[str, list[EncodedImage]]:
    """One user message: exactly one text part (the prompt) and at least one image part.

    ``allowed`` is the folder local image files may come from ("" refuses them all).
    """
    if not isinstance(messages, list) or len(messages) != 1:
        raise ProtocolError("messages must be a list holding exactly one message", "messages")
    message = messages[0]
    if not isinstance(message, dict) or message.get("role") != "user":
        raise ProtocolError("the message must be an object with role 'user'", "messages")
    content = message.get("content")
    if not isinstance(content, list) or not content:
        raise ProtocolError("the message content must be a non-empty list of parts", "messages")
    texts: list[str] = []
    images: list[EncodedImage] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url":
            images.append(parse_image_part(part, index, allowed))
        else:
            raise ProtocolError(
                f"content part {index} must be a text or image_url part", param="messages"
            )
    if len(texts) != 1:
        raise ProtocolError(f"expected exactly one text part, got {len(texts)}", "messages")
    if not images:
        raise ProtocolError("at least one image_url part is required", param="messages")
    check_prompt(texts[0], len(images))
    return texts[0], images


def parse_image_part(part: dict[str, Any], index: int, allowed: str = "") -> EncodedImage:
    """A file URL under ``allowed`` (read here: blocking I/O), or a PNG or JPEG data URI."""
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else None
    if not isinstance(url, str):
        raise ProtocolError(f"content part {index}: image_url.url must be a string", "messages")
    if url.startswith(FILE_SCHEME):
        return load_local_image(url, allowed)
    match = DATA_URI.match(url)
    if match is None:
        raise ProtocolError(
            f"content part {index}: image_url must be a data:image/png or data:image/jpeg "
            "base64 URI, or a file:// URL",
            param="messages",
        )
    media_type, encoded = match.group(1), match.group(2)
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ProtocolError(
            f"content part {index}: invalid base64 image data", param="messages"
        ) from e
    magic = PNG_MAGIC if media_type == "image/png" else JPEG_MAGIC
    if not data.startswith(magic):
        raise ProtocolError(
            f"content part {index}: image data is not a {media_type} image", param="messages"
        )
    return EncodedImage(media_type=media_type, data=data)


def load_local_image(url: str, allowed: str) -> EncodedImage:
    """The image a file URL names, identified by its content as vLLM does (not by its name)."""
    path = allowed_local_path(url, allowed)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ProtocolError(str(e), param="messages") from e
    for magic, media_type in MAGIC_TYPES:
        if data.startswith(magic):
            return EncodedImage(media_type=media_type, data=data)
    raise ProtocolError(
        f"Failed to identify image: cannot identify image file '{path}'", param="messages"
    )


def allowed_local_path(url: str, allowed: str) -> Path:
    """The file a URL names when it lies strictly under ``allowed`` (symlinks resolved)."""
    if not allowed:
        raise ProtocolError(
            "Cannot load local files without `--allowed-local-media-path`.", param="messages"
        )
    root = Path(allowed).resolve()
    if not root.is_dir():
        problem = "does not exist" if not root.exists() else "must be a directory"
        raise ProtocolError(
            f"Invalid `--allowed-local-media-path`: The path {root} {problem}.", param="messages"
        )
    path = Path(url2pathname(urlparse(url).path))
    if root not in path.resolve().parents:
        raise ProtocolError(
            f"The file path {path} must be a subpath of `--allowed-local-media-path` {root}.",
            param="messages",
        )
    return path


def check_prompt(prompt: str, image_count: int) -> None:
    """The prompt starts with the image marker and has no more markers than images."""
    if not prompt.startswith(IMAGE_MARKER):
        raise ProtocolError(
            f"the prompt must start with the literal {IMAGE_MARKER} marker", param="messages"
        )
    markers = prompt.count(IMAGE_MARKER)
    if markers > image_count:
        raise ProtocolError(
            f"the prompt has {markers} {IMAGE_MARKER} markers but only {image_count} image(s)",
            param="messages",
        )


def check_sampling(body: dict[str, Any]) -> None:
    """Grounding tags are special tokens, and OCR decodes greedily."""
    if body.get("skip_special_tokens", True) is not False:
        raise ProtocolError(
            "skip_special_tokens must be present and false (grounding tags are special tokens)",
            param="skip_special_tokens",
        )
    if "temperature" in body:
        temperature = body["temperature"]
        if isinstance(temperature, bool) or temperature not in (0, 0.0):
            raise ProtocolError(f"temperature must be 0, got {temperature!r}", param="temperature")


def check_xargs(xargs: Any, profile: Profile, image_count: int) -> None:
    """vllm_xargs carries the no-repeat-ngram settings the profile expects for this many images."""
    if not isinstance(xargs, dict):
        raise ProtocolError("vllm_xargs must be an object", param="vllm_xargs")
    window = profile.window_size_single if image_count == 1 else profile.window_size_multi
    expected = {"ngram_size": profile.ngram_size, "window_size": window}
    for name, value in expected.items():
        given = xargs.get(name)
        if not is_int(given):
            raise ProtocolError(
                f"vllm_xargs.{name} must be an integer, got {given!r}", param="vllm_xargs"
            )
        if given != value:
            raise ProtocolError(
                f"vllm_xargs.{name} must be {value} for {image_count} image(s), got {given}",
                param="vllm_xargs",
            )
