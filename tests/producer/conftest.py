"""Producer fixtures: the real app under Litestar's test client, and a submitted-job helper."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from litestar.testing import TestClient

from ocrq.producer.app import create_app
from ocrq.shared.settings import Settings, replace_settings


@pytest.fixture
def make_client(settings: Settings) -> Iterator[Any]:
    """Factory: a TestClient over create_app(settings with overrides); closed at teardown."""
    clients: list[TestClient[Any]] = []

    def make(**overrides: Any) -> TestClient[Any]:
        app = create_app(replace_settings(settings, **overrides))
        # A name the producer serves by default (the app checks the Host header).
        client = TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def api(make_client: Any) -> TestClient[Any]:
    """An open API (no keys) on the test Redis."""
    client: TestClient[Any] = make_client()
    return client


@pytest.fixture
def sync_redis(clean_redis: str) -> Iterator[redis.Redis]:
    """A plain client for reading what the API wrote."""
    client = redis.Redis.from_url(clean_redis)
    yield client
    client.close()
