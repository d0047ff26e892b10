"""The ocrq services one at a time: a private Redis, `ocrq producer`, `ocrq worker`, the fake vLLM.

Everything binds 127.0.0.1 on a free port and stops when its block ends; the Redis on 6379 is
never touched. Tests and benchmarks both start their processes here (tests/support/stack.py
builds a whole pipeline for one test from the same pieces).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import msgspec

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.embedded import free_port, start_server
from ocrq.shared.settings import Settings

from .processes import STOP_TIMEOUT_S, ocrq_process, start_ocrq, stop, wait_http


def redis_env(settings: Settings) -> dict[str, str]:
    """The OCRQ_* names (without prefix) that say which Redis to use and how."""
    return {
        "REDIS_URL": settings.store.redis_url,
        "REDIS_MODE": settings.store.redis_mode,
        "PARTITIONS": str(settings.store.partitions),
        "REDIS_SENTINELS": settings.store.redis_sentinels,
        "REDIS_SENTINEL_MASTER": settings.store.redis_sentinel_master,
        "REDIS_WAIT_REPLICAS": str(settings.store.redis_wait_replicas),
    }


def blob_env(settings: Settings) -> dict[str, str]:
    """The object store's OCRQ_* names (without prefix) when the settings have a store.

    Empty without one: the processes keep every byte in Redis. The store's credentials are
    the standard AWS_* variables, which every process start_ocrq() starts inherits.
    """
    if not settings.blobs.enabled:
        return {}
    return {name: str(value) for name, value in msgspec.structs.asdict(settings.blobs).items()}


def services_env(settings: Settings) -> dict[str, str]:
    """What a producer or worker of these settings needs: their Redis and their store."""
    return {**redis_env(settings), **blob_env(settings)}


def start_producer(redis_url: str, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    """`ocrq producer` with extra OCRQ_* settings (names without prefix); process and URL."""
    return producer_process(redis_url, env)


def producer_process(
    redis_url: str, env: Mapping[str, str], log: Path | None = None, health_timeout_s: float = 20.0
) -> tuple[subprocess.Popen[bytes], str]:
    """start_producer(), its stderr to ``log``; stopped again if it is not healthy in time."""
    port = free_port()
    settings = {
        "REDIS_URL": redis_url,
        "HOST": "127.0.0.1",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "warning",
        "PRODUCER_WORKERS": "1",  # one process is enough for a test, and starts faster
        **{k.upper(): v for k, v in env.items()},
    }
    proc = start_ocrq("producer", ["--port", str(port)], settings, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc, health_timeout_s, log)
    except BaseException:
        stop(proc)
        raise
    return proc, url


@contextlib.contextmanager
def producer(redis_url: str, tmp: Path, workers: int = 1, **env: str) -> Iterator[str]:
    """`ocrq producer` (uvicorn, ``workers`` processes) logging to tmp; yields its base URL."""
    settings = {"producer_workers": str(workers), **env}
    proc, url = producer_process(redis_url, settings, tmp / "producer.log", health_timeout_s=30.0)
    try:
        yield url
    finally:
        stop(proc, STOP_TIMEOUT_S)


@contextlib.contextmanager
def worker(
    redis_url: str, vllm_url: str | None, tmp: Path, health_timeout_s: float = 30.0, **env: str
) -> Iterator[None]:
    """One `ocrq worker` on the vLLM engine (the local CPU engine when vllm_url is None)."""
    with worker_process(redis_url, vllm_url, tmp, health_timeout_s, **env):
        yield


@contextlib.contextmanager
def worker_process(
    redis_url: str, vllm_url: str | None, tmp: Path, health_timeout_s: float = 30.0, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """worker(), yielding the process (to read its CPU time); pages go to ``tmp``/shm."""
    port = free_port()
    shm = tmp / "shm"
    shm.mkdir(exist_ok=True)
    engine = {"engine": "local"} if vllm_url is None else {"engine": "vllm", "vllm_url": vllm_url}
    values = {
        "redis_url": redis_url,
        **engine,
        "shm_dir": str(shm),
        "metrics_port": str(port),
        "log_format": "json",
        "log_level": "warning",
        "redis_block_ms": "500",
        "drain_grace_s": "10",
        **env,
    }
    health = f"http://127.0.0.1:{port}/healthz"
    log = tmp / "worker.log"
    with ocrq_process("worker", [], values, health, log, health_timeout_s) as proc:
        yield proc


@contextlib.contextmanager
def fake_vllm(latency_s: float, max_concurrency: int) -> Iterator[FakeVllm]:
    """The fake vLLM with a per-image latency, recording no request bodies (long runs)."""
    with FakeVllm(latency_s=latency_s, max_concurrency=max_concurrency, max_recorded=0) as fake:
        fake.wait_ready()
        yield fake


@contextlib.contextmanager
def private_redis(tmp: Path) -> Iterator[str]:
    """A Redis-compatible server of our own on a free port, no persistence; yields its URL."""
    server = start_server(tmp / "redis", aof=False)
    try:
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A temporary folder for logs, Redis data and rendered pages."""
    with tempfile.TemporaryDirectory(prefix="ocrq-bench-") as name:
        yield Path(name)
