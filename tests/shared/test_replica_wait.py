"""OCRQ_REDIS_WAIT_REPLICAS: an upload is accepted only once enough replicas hold it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis

from ocrq.shared.embedded import EmbeddedServer, start_server
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import load_settings
from ocrq.shared.store import JobStore, make_redis

FAST_SYNC = ["--repl-diskless-sync-delay", "0"]
FIELDS = {"status": "queued", "tenant": "t", "payload": b"%PDF-1.7 raw", "lane": "interactive"}


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[EmbeddedServer]:
    # No 5 s wait for more replicas before the first full sync (Redis 7.0's default).
    server = start_server(tmp_path / "primary", aof=False, extra=FAST_SYNC)
    yield server
    server.stop()


@pytest.fixture
def replica(primary: EmbeddedServer, tmp_path: Path) -> Iterator[EmbeddedServer]:
    extra = ["--replicaof", "127.0.0.1", str(primary.port)]
    server = start_server(tmp_path / "replica", aof=False, extra=extra)
    # Acknowledging writes, as WAIT sees it: the replica's link reports "up", and the
    # primary calls it "online", up to a second before its first acknowledgement.
    with redis.Redis(port=primary.port) as r:
        deadline = time.monotonic() + 20
        while r.set("synced", 1) and r.execute_command("WAIT", 1, 50) < 1:
            assert time.monotonic() < deadline, "the replica never acknowledged a write"
    yield server
    server.stop()


async def store_on(server: EmbeddedServer, tmp_path: Path) -> AsyncIterator[JobStore]:
    settings = load_settings(
        {}, redis_url=server.url, redis_wait_replicas=1, redis_wait_timeout_ms=200,
        shm_dir=str(tmp_path),
    )  # fmt: skip
    store = JobStore(make_redis(settings), settings)
    yield store
    await store.aclose()


async def test_an_upload_is_accepted_once_a_replica_holds_it(
    primary: EmbeddedServer, replica: EmbeddedServer, tmp_path: Path
) -> None:
    async for store in store_on(primary, tmp_path):
        created, job_id = await store.enqueue("job1", "interactive", FIELDS, None)
        assert created
        with redis.Redis(port=replica.port) as r:
            assert r.hget(store.keys.job(job_id), "status") == b"queued"


async def test_without_a_replica_the_upload_is_refused_as_unavailable(
    primary: EmbeddedServer, tmp_path: Path
) -> None:
    async for store in store_on(primary, tmp_path):
        with pytest.raises(OcrqError) as err:
            await store.enqueue("job1", "interactive", FIELDS, "key-1")
        assert err.value.code is ErrorCode.UNAVAILABLE and "Idempotency-Key" in err.value.message
        # The retry the message asks for makes no second job: the key names the first.
        created, job_id = await store.enqueue("job2", "interactive", FIELDS, "key-1")
        assert (created, job_id) == (False, "job1")
