"""Fixtures for the fake vLLM tests: one shared server per module, reset between tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ocrq.fakevllm.runner import FakeVllm


@pytest.fixture
def client(fake: FakeVllm) -> Iterator[httpx.Client]:
    """A client on the fake with a timeout far above any answer time here."""
    with httpx.Client(base_url=fake.url, timeout=20.0) as c:
        yield c
