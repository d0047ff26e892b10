"""Failure injection: deterministic outages, drops, hangs, slow starts, truncation, queueing."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from support.fakevllm_requests import chat_body

from ocrq.fakevllm.runner import FakeVllm

CHAT = "/v1/chat/completions"


def test_fail_next_answers_503_that_many_times_then_recovers(
    fake: FakeVllm, client: httpx.Client
) -> None:
    fake.configure(fail_next=2)
    statuses = [client.post(CHAT, json=chat_body()).status_code for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert client.post(CHAT, json=chat_body()).status_code == 200
    assert fake.config()["fail_next"] == 0
    assert len(fake.requests()) == 4  # failed requests are recorded too


def test_injected_failure_uses_the_vllm_error_shape(fake: FakeVllm, client: httpx.Client) -> None:
    fake.configure(fail_rate=1.0, fail_status=500)
    response = client.post(CHAT, json=chat_body())
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "InternalServerError"
    assert error["code"] == 500
    assert isinstance(error["message"], str)


def test_fail_rate_is_repeatable_for_a_seed(fake: FakeVllm, client: httpx.Client) -> None:
    def outcomes() -> list[int]:
        fake.configure(seed=7, fail_rate=0.5)
        return [client.post(CHAT, json=chat_body()).status_code for _ in range(16)]

    first = outcomes()
    assert set(first) == {200, 503}
    assert outcomes() == first


def test_drop_next_closes_the_connection_without_a_response(
    fake: FakeVllm, client: httpx.Client
) -> None:
    fake.configure(drop_next=1)
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(CHAT, json=chat_body())
    assert client.post(CHAT, json=chat_body()).status_code == 200


def test_hang_next_outlasts_the_client_timeout_then_server_recovers(
    fake: FakeVllm, client: httpx.Client
) -> None:
    fake.configure(hang_next=1, max_concurrency=1)
    with pytest.raises(httpx.ReadTimeout):
        client.post(CHAT, json=chat_body(), timeout=0.5)
    # The abandoned request holds no sequence slot: the next one is answered at once.
    assert client.post(CHAT, json=chat_body(), timeout=10.0).status_code == 200


def test_truncate_next_ends_in_a_repetition_loop_with_length(
    fake: FakeVllm, client: httpx.Client
) -> None:
    fake.configure(truncate_next=1)
    reply = client.post(CHAT, json=chat_body(max_tokens=500)).json()
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 500
    assert choice["message"]["content"].count("the same line again and again") > 10
    after = client.post(CHAT, json=chat_body(max_tokens=500)).json()
    assert after["choices"][0]["finish_reason"] == "stop"


def test_slow_start_answers_503_until_loaded() -> None:
    with FakeVllm(slow_start_s=600) as fake, httpx.Client(base_url=fake.url, timeout=10) as c:
        assert c.get("/health").status_code == 503
        loading = c.post(CHAT, json=chat_body())
        assert loading.status_code == 503
        assert "loading" in loading.json()["error"]["message"]
        fake.configure(slow_start_s=0.3)  # loading restarts now and ends soon
        assert c.get("/health").status_code == 503
        fake.wait_ready(timeout_s=10)
        assert c.post(CHAT, json=chat_body()).status_code == 200


async def post_three(url: str) -> float:
    """Send three requests at once; return the seconds until all three are answered."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        started = time.monotonic()
        responses = await asyncio.gather(*(client.post(CHAT, json=chat_body()) for _ in range(3)))
        elapsed = time.monotonic() - started
    assert [r.status_code for r in responses] == [200, 200, 200]
    return elapsed


async def test_requests_beyond_max_concurrency_queue() -> None:
    async with FakeVllm(latency_s=0.5, max_concurrency=1) as fake:
        serial = await post_three(fake.url)
        assert serial >= 1.4  # 3 x 0.5 s one after another
        assert fake.stats() == {"running": 0, "queued": 0, "peak_running": 1}
        await asyncio.to_thread(fake.configure, max_concurrency=3)
        fake.reset_stats()
        await post_three(fake.url)
        assert fake.stats()["peak_running"] == 3  # all three slept at once


async def test_request_queued_past_queue_timeout_gets_503() -> None:
    async with FakeVllm(latency_s=1.0, max_concurrency=1, queue_timeout_s=0.2) as fake:
        async with httpx.AsyncClient(base_url=fake.url, timeout=30) as client:
            first, second = await asyncio.gather(
                client.post(CHAT, json=chat_body()), client.post(CHAT, json=chat_body())
            )
    assert sorted([first.status_code, second.status_code]) == [200, 503]


async def queue_stats_within(fake: FakeVllm, want: dict[str, int], timeout_s: float) -> bool:
    """Poll /_stats until running and queued match ``want``; False if they never do in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = await asyncio.to_thread(fake.stats)
        if all(stats[key] == value for key, value in want.items()):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_queued_request_leaves_the_queue_when_its_client_gives_up(fake: FakeVllm) -> None:
    # The running request takes 5 s, so the queue can only empty early by cancellation.
    await asyncio.to_thread(fake.configure, max_concurrency=1, latency_s=5.0)
    async with httpx.AsyncClient(base_url=fake.url, timeout=30) as client:
        running = asyncio.create_task(client.post(CHAT, json=chat_body()))
        assert await queue_stats_within(fake, {"running": 1}, timeout_s=3.0)
        with pytest.raises(httpx.ReadTimeout):
            await client.post(CHAT, json=chat_body(), timeout=0.3)
        assert await queue_stats_within(fake, {"running": 1, "queued": 0}, timeout_s=3.0)
        running.cancel()
