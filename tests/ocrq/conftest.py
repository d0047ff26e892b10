"""Client fixtures: producers with custom settings, and the full stack for finished jobs."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.processes import stop
from support.services import start_producer
from support.stack import Stack

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.settings import Settings


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
        proc, url = start_producer(settings.store.redis_url, **env)
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
