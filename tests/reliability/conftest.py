"""Fixtures for fault injection: Redis servers of the test's own, to fill, pause or kill,
and a stack on the session's SeaweedFS (which the chaos run kills too)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from support.stack import Stack, running_stack

from ocrq.shared.embedded import EmbeddedServer, start_server
from ocrq.shared.settings import Settings, load_settings, replace_settings
from ocrq.shared.store import JobStore, make_redis


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A Redis of this test alone (it may be filled, paused or killed)."""
    server = start_server(tmp_path / "redis", aof=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_settings(own_redis: EmbeddedServer, tmp_path: Path) -> Settings:
    """Settings on the test's own Redis, with a private shm folder."""
    (tmp_path / "shm").mkdir(exist_ok=True)
    return load_settings(
        {},
        redis_url=own_redis.url,
        shm_dir=str(tmp_path / "shm"),
        log_format="json",
        metrics_port=0,
    )


@pytest.fixture
async def own_store(own_settings: Settings) -> AsyncIterator[JobStore]:
    """A JobStore on the test's own Redis, groups created."""
    client: aioredis.Redis = make_redis(own_settings)
    store = JobStore(client, own_settings)
    await store.ensure_groups()
    yield store
    await client.aclose()


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A Redis of this test's own with AOF and appendfsync always: nothing acknowledged is lost."""
    server = start_server(tmp_path / "redis", aof=True, fsync="always")
    yield server
    server.stop()


@pytest.fixture
def faulty_stack(
    durable_redis: EmbeddedServer, tmp_path: Path
) -> Iterator[tuple[Stack, EmbeddedServer]]:
    """Producer, fake vLLM and the test's own durable Redis; the test starts the workers."""
    settings = load_settings({}, redis_url=durable_redis.url, log_format="json", metrics_port=0)
    with running_stack(settings, tmp_path, redis_socket_timeout_s="2") as stack:
        yield stack, durable_redis


@pytest.fixture
def store_chaos_stack(blob_settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    """Producer and fake vLLM on the store, where every document goes, however small."""
    settings = replace_settings(blob_settings, inline_max_bytes=16)
    with running_stack(settings, tmp_path) as stack:
        yield stack
