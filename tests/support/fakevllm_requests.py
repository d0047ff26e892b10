"""Builders of real images (PyMuPDF) and protocol-following chat bodies for the fake vLLM tests."""

from __future__ import annotations

import base64
from typing import Any

import pymupdf

MODEL = "baidu/Unlimited-OCR"
PROMPT = "<image>document parsing."
SIZE_PATTERN = r"image (\d+) of (\d+): (\d+)x(\d+) px, digest ([0-9a-f]{8})"


def image_bytes(width: int, height: int, fill: int = 200, fmt: str = "png") -> bytes:
    """A solid grey RGB image of this size, encoded as PNG or JPEG."""
    rect = pymupdf.IRect(0, 0, width, height)  # type: ignore[no-untyped-call]
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, rect, False)  # type: ignore[no-untyped-call]
    pixmap.clear_with(fill)  # type: ignore[no-untyped-call]
    return bytes(pixmap.tobytes(fmt))  # type: ignore[no-untyped-call]


def data_uri(data: bytes, media_type: str = "image/png") -> str:
    """A base64 data URI."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    """An image_url content part."""
    return {"type": "image_url", "image_url": {"url": data_uri(data, media_type)}}


def chat_body(
    images: list[dict[str, Any]] | None = None,
    *,
    prompt: str = PROMPT,
    ngram_size: int = 35,
    window_size: int | None = None,
    max_tokens: int = 8192,
    model: str = MODEL,
) -> dict[str, Any]:
    """A body that follows the unlimited-ocr protocol (one 300x200 PNG unless told)."""
    parts = images if images is not None else [image_part(image_bytes(300, 200))]
    if window_size is None:
        window_size = 128 if len(parts) == 1 else 1024
    return {
        "model": model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}, *parts]}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "skip_special_tokens": False,
        "vllm_xargs": {"ngram_size": ngram_size, "window_size": window_size},
    }
