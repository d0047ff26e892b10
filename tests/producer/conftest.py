"""Producer fixtures: the real app under Litestar's test client, and a submitted-job helper."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
import redis
from litestar.testing import TestClient

from producer.app import create_app
from shared.embedded import free_port
from shared.settings import Settings


@pytest.fixture
def make_client(settings: Settings) -> Iterator[Any]:
    """Factory: a TestClient over create_app(settings with overrides); closed at teardown."""
    clients: list[TestClient[Any]] = []

    def make(**overrides: Any) -> TestClient[Any]:
        app = create_app(msgspec.structs.replace(settings, **overrides))
        client = TestClient(app, raise_server_exceptions=False)
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


@pytest.fixture
def live_producer(settings: Settings) -> Iterator[str]:
    """`ocrq producer` as a real uvicorn process on a free port; yields its base URL."""
    port = free_port()
    env = {**os.environ, "OCRQ_REDIS_URL": settings.redis_url, "OCRQ_LOG_FORMAT": "json",
           "OCRQ_LOG_LEVEL": "warning"}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrq.cli", "producer", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    """Poll url until it answers 200, or fail if the process died or time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer")
