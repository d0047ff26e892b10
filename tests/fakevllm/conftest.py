"""Fixtures for the fake vLLM tests: one shared server per module, reset between tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fakevllm.runner import FakeVllm

# Everything a test may change at run time, back at its default.
RESET = {
    "fail_next": 0,
    "fail_rate": 0.0,
    "fail_status": 503,
    "hang_next": 0,
    "hang_rate": 0.0,
    "drop_next": 0,
    "drop_rate": 0.0,
    "truncate_next": 0,
    "max_concurrency": 256,
    "latency_s": 0.0,
}


@pytest.fixture(scope="module")
def shared_fake() -> Iterator[FakeVllm]:
    """A default fake vLLM (unlimited-ocr) for the whole module."""
    with FakeVllm() as fake:
        yield fake


@pytest.fixture
def fake(shared_fake: FakeVllm) -> Iterator[FakeVllm]:
    """The module's fake with no recorded requests and no failure injection."""
    shared_fake.configure(**RESET)
    shared_fake.clear()
    yield shared_fake
    shared_fake.configure(**RESET)


@pytest.fixture
def client(fake: FakeVllm) -> Iterator[httpx.Client]:
    """A client on the fake with a timeout far above any answer time here."""
    with httpx.Client(base_url=fake.url, timeout=20.0) as c:
        yield c
