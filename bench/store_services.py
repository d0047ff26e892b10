"""The object store the store benchmarks run on: SeaweedFS started as the tests start it.

A private `weed mini` (tests/support/seaweed.py) under the scratch folder, its credentials
put in this process's environment (every process the benchmark starts inherits them), and
settings on it under a prefix of their own (tests/support/services.blob_env() turns them
into a producer's or worker's variables).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from ocrq.shared.blobs import open_blob_store
from ocrq.shared.settings import Settings, load_settings
from tests.support.seaweed import Seaweed


@contextlib.contextmanager
def seaweed_store(tmp: Path) -> Iterator[Seaweed]:
    """A running SeaweedFS with one bucket; its AWS_* variables set here until the block ends."""
    store = Seaweed(tmp / "seaweed")
    saved = dict(os.environ)
    try:
        with store:
            os.environ.update({k: v for k, v in store.env("").items() if k.startswith("AWS_")})
            yield store
    finally:
        os.environ.clear()
        os.environ.update(saved)


def store_settings(store: Seaweed, redis_url: str, prefix: str) -> Settings:
    """Settings on redis_url with the store under ``prefix`` (inline limit at its default)."""
    return load_settings(
        {}, redis_url=redis_url, blob_url=store.blob_url(prefix), s3_endpoint=store.endpoint
    )


def flush_redis(client: redis.Redis) -> None:
    """FLUSHALL SYNC, then wait for used_memory to settle (see settled_memory())."""
    client.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
    settled_memory(client)


def settled_memory(client: redis.Redis, timeout_s: float = 20.0) -> dict[str, int]:
    """INFO memory once used_memory has held still for 2 s.

    After 10 MB writes a connection's query buffer stays allocated (counted in used_memory)
    until Redis's client cron shrinks it a few seconds later; lazily freed objects too.
    """
    deadline = time.monotonic() + timeout_s
    last = client.info("memory")
    while time.monotonic() < deadline:
        time.sleep(2.0)
        now = client.info("memory")
        steady = abs(int(now["used_memory"]) - int(last["used_memory"])) < 64 * 1024
        if steady and not int(now.get("lazyfree_pending_objects", 0)):
            return {k: int(v) for k, v in now.items() if isinstance(v, int)}
        last = now
    return {k: int(v) for k, v in last.items() if isinstance(v, int)}


def store_bytes(settings: Settings, prefix: str = "") -> tuple[int, int]:
    """(objects, bytes) under ``prefix`` of the settings' store."""

    async def listing() -> tuple[int, int]:
        store = open_blob_store(settings)
        assert store is not None
        count = size = 0
        try:
            async for info in store.list(prefix):
                count += 1
                size += info.size
        finally:
            await store.aclose()
        return count, size

    return asyncio.run(listing())


def machine_load() -> str:
    """The load average and cores, for the header of a table."""
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} cores, load {one:.2f} {five:.2f} {fifteen:.2f}"
