"""Client fixtures: producers with custom settings, and the full stack for finished jobs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from stack import Stack, wait_http

from fakevllm.runner import FakeVllm
from shared.embedded import free_port
from shared.settings import Settings


def start_producer(redis_url: str, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    """`ocrq producer` with extra OCRQ_* settings (names without prefix); process and URL."""
    port = free_port()
    settings = {"REDIS_URL": redis_url, "LOG_FORMAT": "json", "LOG_LEVEL": "warning"}
    settings.update({k.upper(): v for k, v in env.items()})
    full_env = {**os.environ, **{f"OCRQ_{k}": v for k, v in settings.items()}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocrq.cli", "producer", "--port", str(port)],
        env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
    except BaseException:
        proc.kill()
        raise
    return proc, url


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a process we started, killing it if it lingers."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def api_url(redis_url: str) -> Iterator[str]:
    """One open producer for a module's tests (a start costs ~1 s). Tests here make their
    own jobs and never need an empty database; those that do flush through `settings`."""
    proc, url = start_producer(redis_url)
    yield url
    stop(proc)


@pytest.fixture
def make_producer(settings: Settings) -> Iterator[Callable[..., str]]:
    """Factory: a producer with extra settings on a flushed database; its URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def make(**env: str) -> str:
        proc, url = start_producer(settings.redis_url, **env)
        procs.append(proc)
        return url

    yield make
    for proc in procs:
        stop(proc)


@pytest.fixture
def stack(settings: Settings, api_url: str, tmp_path: Path) -> Iterator[Stack]:
    """Producer + fake vLLM + one `ocrq worker` on a flushed database: jobs really finish."""
    with FakeVllm() as fake:
        s = Stack(settings, api_url, fake, tmp_path / "shm", tmp_path)
        try:
            s.start_worker()
            yield s
        finally:
            s.stop()
