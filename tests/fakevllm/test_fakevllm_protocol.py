"""The fake vLLM rejects every request that breaks the model protocol, in vLLM's error shape."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.fakevllm_requests import SIZE_PATTERN, chat_body, data_uri, image_bytes, image_part

from ocrq.fakevllm.runner import FakeVllm

Body = dict[str, Any]


def content(body: Body) -> list[dict[str, Any]]:
    """The parts of the body's one message."""
    parts: list[dict[str, Any]] = body["messages"][0]["content"]
    return parts


def set_prompt(text: str) -> Callable[[Body], None]:
    """A mutation that replaces the prompt text."""

    def mutate(body: Body) -> None:
        content(body)[0]["text"] = text

    return mutate


def set_field(name: str, value: Any) -> Callable[[Body], None]:
    """A mutation that sets (or, with ..., deletes) a top-level field."""

    def mutate(body: Body) -> None:
        if value is ...:
            del body[name]
        else:
            body[name] = value

    return mutate


def set_xarg(name: str, value: Any) -> Callable[[Body], None]:
    """A mutation of one vllm_xargs entry."""

    def mutate(body: Body) -> None:
        body["vllm_xargs"][name] = value

    return mutate


def set_image_url(url: str) -> Callable[[Body], None]:
    """A mutation that replaces the one image's URL."""

    def mutate(body: Body) -> None:
        content(body)[1]["image_url"]["url"] = url

    return mutate


PNG = image_bytes(64, 48)
REJECTIONS: dict[str, tuple[Callable[[Body], object], str, str]] = {
    "no_messages": (set_field("messages", ...), "messages must be a list", "messages"),
    "two_messages": (
        lambda b: b["messages"].append(b["messages"][0]),
        "exactly one message",
        "messages",
    ),
    "system_role": (lambda b: b["messages"][0].update(role="system"), "role 'user'", "messages"),
    "content_is_string": (
        lambda b: b["messages"][0].update(content="<image>hi"),
        "list of parts",
        "messages",
    ),
    "no_image": (lambda b: content(b).pop(), "at least one image_url", "messages"),
    "two_text_parts": (
        lambda b: content(b).append({"type": "text", "text": "<image>more"}),
        "exactly one text part",
        "messages",
    ),
    "unknown_part": (
        lambda b: content(b).append({"type": "audio_url"}),
        "text or image_url",
        "messages",
    ),
    "prompt_without_marker": (set_prompt("document parsing."), "start with", "messages"),
    "marker_not_first": (set_prompt("\n<image>document parsing."), "start with", "messages"),
    "more_markers_than_images": (
        set_prompt("<image><image>document parsing."),
        "2 <image> markers but only 1",
        "messages",
    ),
    "http_image_url": (set_image_url("https://example.com/a.png"), "data:image/png", "messages"),
    "gif_data_uri": (set_image_url(data_uri(PNG, "image/gif")), "data:image/png", "messages"),
    "bad_base64": (set_image_url("data:image/png;base64,@@not-base64@@"), "base64", "messages"),
    "png_declared_jpeg_sent": (
        set_image_url(data_uri(image_bytes(64, 48, fmt="jpeg"), "image/png")),
        "not a image/png image",
        "messages",
    ),
    "truncated_png": (set_image_url(data_uri(PNG[: len(PNG) // 2])), "truncated", "messages"),
    "undecodable_png": (
        set_image_url(data_uri(PNG[:16] + b"\x00" * 64 + PNG[-12:])),
        "cannot be decoded",
        "messages",
    ),
    "skip_special_tokens_missing": (
        set_field("skip_special_tokens", ...),
        "skip_special_tokens",
        "skip_special_tokens",
    ),
    "skip_special_tokens_true": (
        set_field("skip_special_tokens", True),
        "skip_special_tokens",
        "skip_special_tokens",
    ),
    "xargs_missing": (set_field("vllm_xargs", ...), "vllm_xargs must be an object", "vllm_xargs"),
    "ngram_size_float": (
        set_xarg("ngram_size", 35.0),
        "ngram_size must be an integer",
        "vllm_xargs",
    ),
    "ngram_size_string": (
        set_xarg("ngram_size", "35"),
        "ngram_size must be an integer",
        "vllm_xargs",
    ),
    "window_size_bool": (
        set_xarg("window_size", True),
        "window_size must be an integer",
        "vllm_xargs",
    ),
    "ngram_size_wrong": (set_xarg("ngram_size", 30), "ngram_size must be 35", "vllm_xargs"),
    "window_size_multi_for_one_image": (
        set_xarg("window_size", 1024),
        "window_size must be 128 for 1 image",
        "vllm_xargs",
    ),
    "temperature_nonzero": (set_field("temperature", 0.7), "temperature must be 0", "temperature"),
    "max_tokens_missing": (set_field("max_tokens", ...), "max_tokens", "max_tokens"),
    "max_tokens_zero": (set_field("max_tokens", 0), "max_tokens", "max_tokens"),
    "max_tokens_float": (set_field("max_tokens", 100.0), "max_tokens", "max_tokens"),
    "max_tokens_past_context": (
        set_field("max_tokens", 32768),
        "maximum context length is 32768",
        "max_tokens",
    ),
    "stream": (set_field("stream", True), "stream", "stream"),
}


@pytest.mark.parametrize("case", sorted(REJECTIONS))
def test_request_breaking_a_rule_is_rejected_with_400_naming_it(
    client: httpx.Client, case: str
) -> None:
    mutate, fragment, param = REJECTIONS[case]
    body = chat_body([image_part(PNG)])
    mutate(body)
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "BadRequestError"
    assert error["code"] == 400
    assert fragment in error["message"]
    assert error["param"] == param


def test_unknown_model_is_404_in_vllm_error_shape(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", json=chat_body(model="other/model"))
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "message": "The model `other/model` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
    }


def test_body_that_is_not_json_is_rejected_with_400(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", content=b"{not json")
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


def test_window_size_for_one_image_is_rejected_with_several_images(client: httpx.Client) -> None:
    images = [image_part(PNG), image_part(PNG)]
    response = client.post("/v1/chat/completions", json=chat_body(images, window_size=128))
    assert response.status_code == 400
    assert "window_size must be 1024 for 2 image(s)" in response.json()["error"]["message"]


def test_single_image_answer_names_its_size_in_grounding_text(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", json=chat_body([image_part(PNG)]))
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["object"] == "chat.completion"
    assert reply["model"] == "baidu/Unlimited-OCR"
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "stop"
    text = choice["message"]["content"]
    assert "<|ref|>title<|/ref|><|det|>[[60, 40, 940, 90]]<|/det|>\n# Page 64\u00d748\n" in text
    assert "image 1 of 1: 64x48 px, digest " in text
    assert "<|ref|>image<|/ref|><|det|>[[0, 600, 1000, 1000]]<|/det|>" in text
    usage = reply["usage"]
    assert usage["prompt_tokens"] > 256
    assert usage["completion_tokens"] >= len(text) // 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_multi_image_answer_covers_every_image_in_order(client: httpx.Client) -> None:
    images = [
        image_part(image_bytes(300, 200)),
        image_part(image_bytes(120, 90, fmt="jpeg"), "image/jpeg"),
        image_part(image_bytes(300, 200, fill=20)),
    ]
    response = client.post("/v1/chat/completions", json=chat_body(images))
    assert response.status_code == 200, response.text
    text = response.json()["choices"][0]["message"]["content"]
    found = re.findall(SIZE_PATTERN, text)
    assert [(i, n, w, h) for i, n, w, h, _ in found] == [
        ("1", "3", "300", "200"),
        ("2", "3", "120", "90"),
        ("3", "3", "300", "200"),
    ]
    digests = [digest for *_, digest in found]
    assert digests[0] != digests[2]  # same size, different pixels: pages stay distinguishable


def test_multi_image_request_costs_base_mode_tokens_per_image(client: httpx.Client) -> None:
    big = image_part(image_bytes(1240, 1754))
    one = client.post("/v1/chat/completions", json=chat_body([big])).json()["usage"]
    two = client.post("/v1/chat/completions", json=chat_body([big, big])).json()["usage"]
    # One large image keeps crop mode (global view + tiles); two fall back to base mode.
    assert one["prompt_tokens"] > two["prompt_tokens"] / 2 + 100


def test_answer_past_max_tokens_stops_with_length(client: httpx.Client) -> None:
    response = client.post("/v1/chat/completions", json=chat_body(max_tokens=10))
    reply = response.json()
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 10
    assert len(reply["choices"][0]["message"]["content"]) <= 40


def test_requests_are_recorded_in_arrival_order_including_rejected_ones(
    fake: FakeVllm, client: httpx.Client
) -> None:
    bodies = [chat_body(max_tokens=100 + i) for i in range(3)]
    bodies[1]["temperature"] = 1.0
    statuses = [client.post("/v1/chat/completions", json=b).status_code for b in bodies]
    assert statuses == [200, 400, 200]
    assert fake.requests() == bodies
    fake.clear()
    assert fake.requests() == []


def test_models_lists_the_served_model(client: httpx.Client) -> None:
    models = client.get("/v1/models").json()
    assert [card["id"] for card in models["data"]] == ["baidu/Unlimited-OCR"]
    assert client.get("/health").status_code == 200


def test_config_update_rejects_unknown_fields_and_bad_values(
    fake: FakeVllm, client: httpx.Client
) -> None:
    for change in ({"no_such_field": 1}, {"fail_rate": 2.0}, {"fail_next": "3"}, [1]):
        response = client.post("/_config", json=change)
        assert response.status_code == 400, change
        assert "invalid config" in response.json()["error"]["message"]
    assert fake.config()["fail_next"] == 0


def test_deepseek_profile_expects_its_own_xargs_and_coordinates() -> None:
    two = [image_part(PNG), image_part(PNG)]
    with FakeVllm(protocol="deepseek-ocr", model="deepseek-ai/DeepSeek-OCR") as fake:
        url = f"{fake.url}/v1/chat/completions"
        model = "deepseek-ai/DeepSeek-OCR"
        good = httpx.post(url, json=chat_body(two, ngram_size=30, window_size=90, model=model))
        assert good.status_code == 200, good.text
        text = good.json()["choices"][0]["message"]["content"]
        assert "[[0, 599, 999, 999]]" in text  # 0-999 coordinates
        assert "1000" not in text
        unlimited = httpx.post(url, json=chat_body(two, model=model))
        assert unlimited.status_code == 400
        assert "ngram_size must be 30" in unlimited.json()["error"]["message"]


def test_unknown_route_is_404_and_wrong_method_is_405(client: httpx.Client) -> None:
    assert client.get("/v1/completions/nothing").status_code == 404
    wrong = client.get("/v1/chat/completions")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == 405


def test_malformed_http_is_answered_400_and_closed(fake: FakeVllm) -> None:
    port = int(fake.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"NOT AN HTTP REQUEST\r\n\r\n")
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    assert received.startswith(b"HTTP/1.1 400 ")
    assert b"malformed HTTP request" in received
