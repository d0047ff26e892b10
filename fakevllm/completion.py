"""What the fake model "reads" from each image: grounding-tagged text, usage and the reply body."""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pymupdf

from ocrq.fakevllm.config import Profile
from ocrq.fakevllm.protocol import ChatRequest, EncodedImage, ProtocolError

# DeepSeek-OCR's vision encoder: a 1024 px global view is 16x16 tokens plus one newline token
# per row and a separator; each 640 px crop tile is 10x10 plus 10 newlines. Crop mode tiles
# images larger than one tile into 2..9 tiles.
BASE_IMAGE_TOKENS = 16 * 16 + 16 + 1
TILE_SIZE = 640
TILE_TOKENS = 10 * 10 + 10
MIN_TILES, MAX_TILES = 2, 9
CHARS_PER_TOKEN = 4
MAX_LOOP_CHARS = 200_000  # a repetition loop long enough to look real, short enough to send

# Block layout as fractions of the page, in reading order: (label, x1, y1, x2, y2). The
# labels are DeepSeek-OCR's own (title, sub_title, text, table with its HTML, image and its
# caption, header, page_number), so the engine's label mapping is exercised end to end. The
# figure block reaches the page's far corner so a client's coordinate scale (1000 vs 999)
# shows in its pixel boxes.
LAYOUT: tuple[tuple[str, float, float, float, float], ...] = (
    ("header", 0.06, 0.01, 0.60, 0.03),
    ("page_number", 0.90, 0.01, 0.94, 0.03),
    ("title", 0.06, 0.04, 0.94, 0.09),
    ("sub_title", 0.06, 0.095, 0.94, 0.115),
    ("text", 0.06, 0.12, 0.94, 0.30),
    ("table", 0.06, 0.32, 0.94, 0.50),
    ("image", 0.0, 0.60, 1.0, 1.0),
    ("image_caption", 0.06, 0.55, 0.94, 0.58),
)


@dataclass(frozen=True)
class DecodedImage:
    """An image's pixel size and a short digest of its decoded pixels."""

    width: int
    height: int
    digest: str


@dataclass(frozen=True)
class Answer:
    """The model's text for one request and how it ended."""

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


def decode_image(image: EncodedImage, index: int) -> DecodedImage:
    """Decode a PNG or JPEG fully (CPU-bound: call it off the event loop)."""
    if not looks_complete(image):
        raise ProtocolError(f"image {index + 1} is truncated or corrupt", param="messages")
    try:
        pixmap = pymupdf.Pixmap(image.data)  # type: ignore[no-untyped-call]
    except Exception as e:  # MuPDF raises its own error classes for every decoding failure
        raise ProtocolError(f"image {index + 1} cannot be decoded: {e}", param="messages") from e
    digest = hashlib.sha256(pixmap.samples).hexdigest()[:8]
    return DecodedImage(width=pixmap.width, height=pixmap.height, digest=digest)


def looks_complete(image: EncodedImage) -> bool:
    """MuPDF decodes truncated images with a warning; vLLM's PIL refuses them, so check the end."""
    if image.media_type == "image/png":
        return image.data.rstrip(b"\x00").endswith(b"IEND\xaeB`\x82")
    return b"\xff\xd9" in image.data[-64:]


def image_tokens(image: DecodedImage, crop_mode: bool) -> int:
    """Vision tokens one image costs: a global view, plus crop tiles for a large image."""
    if not crop_mode or max(image.width, image.height) <= TILE_SIZE:
        return BASE_IMAGE_TOKENS
    tiles = math.ceil(image.width / TILE_SIZE) * math.ceil(image.height / TILE_SIZE)
    return BASE_IMAGE_TOKENS + TILE_TOKENS * min(MAX_TILES, max(MIN_TILES, tiles))


def prompt_tokens(request: ChatRequest, images: list[DecodedImage], profile: Profile) -> int:
    """Approximate prompt length: text tokens plus each image's vision tokens."""
    crop_mode = len(images) == 1 or not profile.crop_single_only
    text_tokens = max(1, math.ceil(len(request.prompt) / CHARS_PER_TOKEN))
    return text_tokens + sum(image_tokens(image, crop_mode) for image in images)


def box(fractions: tuple[float, float, float, float], coord_max: int) -> str:
    """A grounding box in the profile's normalised integer coordinates."""
    x1, y1, x2, y2 = (round(f * coord_max) for f in fractions)
    return f"[[{x1}, {y1}, {x2}, {y2}]]"


def page_text(image: DecodedImage, index: int, count: int, coord_max: int) -> str:
    """The grounding blocks the fake "reads" on one page; they name its size and digest."""
    bodies = {
        "header": "fake vLLM\n",
        "page_number": f"{index + 1}\n",
        "title": f"# Page {image.width}\u00d7{image.height}\n",
        "sub_title": "## What the fake read\n",
        "text": (
            f"image {index + 1} of {count}: {image.width}x{image.height} px, "
            f"digest {image.digest}\n"
        ),
        # HTML, as the models write tables; the spanning first row tests colspan handling.
        "table": (
            '<table><tr><td colspan="2">pixels</td></tr>'
            f"<tr><td>width</td><td>{image.width}</td></tr>"
            f"<tr><td>height</td><td>{image.height}</td></tr></table>\n"
        ),
        "image": "",
        "image_caption": f"<center>Figure {index + 1}: the page as an image</center>\n",
    }
    blocks = [
        f"<|ref|>{label}<|/ref|><|det|>{box((x1, y1, x2, y2), coord_max)}<|/det|>\n{bodies[label]}"
        for label, x1, y1, x2, y2 in LAYOUT
    ]
    return "\n".join(blocks)


def full_text(images: list[DecodedImage], coord_max: int) -> str:
    """One text covering every image, in order."""
    return "\n".join(page_text(image, i, len(images), coord_max) for i, image in enumerate(images))


def looping_text(images: list[DecodedImage], coord_max: int, max_tokens: int) -> str:
    """A degenerate answer: a good start, then one line repeated until the token budget ends."""
    start = page_text(images[0], 0, len(images), coord_max)
    loop_line = f"<|ref|>text<|/ref|><|det|>{box((0.06, 0.32, 0.94, 0.36), coord_max)}<|/det|>\n"
    loop_line += "the same line again and again\n"
    budget = min(MAX_LOOP_CHARS, max_tokens * CHARS_PER_TOKEN)
    repeats = max(1, (budget - len(start)) // len(loop_line) + 1)
    return (start + loop_line * repeats)[: max(budget, 1)]


def make_answer(
    request: ChatRequest, images: list[DecodedImage], profile: Profile, *, truncate: bool
) -> Answer:
    """The model's answer; it stops at max_tokens with finish_reason "length" like vLLM."""
    prompt = prompt_tokens(request, images, profile)
    if truncate:
        text = looping_text(images, profile.coord_max, request.max_tokens)
        return Answer(text, "length", prompt, request.max_tokens)
    text = full_text(images, profile.coord_max)
    completion = max(1, math.ceil(len(text) / CHARS_PER_TOKEN))
    if completion > request.max_tokens:
        cut = text[: request.max_tokens * CHARS_PER_TOKEN]
        return Answer(cut, "length", prompt, request.max_tokens)
    return Answer(text, "stop", prompt, completion)


def completion_body(answer: Answer, model: str) -> dict[str, Any]:
    """The OpenAI chat.completion object vLLM returns."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.text, "tool_calls": []},
                "logprobs": None,
                "finish_reason": answer.finish_reason,
                "stop_reason": None,
            }
        ],
        "usage": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        },
    }


def context_error(prompt: int, max_tokens: int, max_model_len: int) -> ProtocolError:
    """vLLM's 400 for a prompt plus max_tokens beyond the model's context length."""
    return ProtocolError(
        f"This model's maximum context length is {max_model_len} tokens. However, you "
        f"requested {prompt + max_tokens} tokens ({prompt} in the messages, {max_tokens} in "
        "the completion). Please reduce the length of the messages or completion.",
        param="max_tokens",
    )
