"""End-to-end fixtures: real Redis, `ocrq producer`, `ocrq worker` processes, the fake vLLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from stack import Stack

from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.settings import Settings


@pytest.fixture
def stack(settings: Settings, live_producer: str, tmp_path: Path) -> Iterator[Stack]:
    """Producer + fake vLLM; tests start the workers they need."""
    with FakeVllm() as fake:
        s = Stack(settings, live_producer, fake, tmp_path / "shm", tmp_path)
        try:
            yield s
        finally:
            s.stop()
