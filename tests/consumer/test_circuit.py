"""The engine circuit: an outage makes requests wait, a bad request still fails in the end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from ocrq.consumer.circuit import EngineCircuit
from ocrq.consumer.engines.base import PageImage
from ocrq.consumer.engines.vllm import VllmEngine
from ocrq.fakevllm.runner import FakeVllm
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.settings import Settings, settings_of


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


def settings_for(fake: FakeVllm, **overrides: float) -> Settings:
    values = {"engine_backoff_s": 0.05, "engine_backoff_max_s": 0.2, "engine_retries": 2}
    return settings_of(vllm_url=fake.url, engine_timeout_s=10.0, **{**values, **overrides})


def page(tmp_path: object, png: bytes) -> PageImage:
    path = f"{tmp_path}/p.png"
    with open(path, "wb") as f:
        f.write(png)
    return PageImage(number=1, path=path, media_type="image/png", width=64, height=48)


@pytest.fixture
def image(tmp_path: object) -> PageImage:
    from support.documents import png

    return page(tmp_path, png(64, 48))


async def test_requests_wait_out_an_engine_warming_up(
    fake: FakeVllm, client: httpx.AsyncClient, image: PageImage
) -> None:
    settings = settings_for(fake)
    engine = VllmEngine(settings, client)
    circuit = EngineCircuit(engine.probe, settings)
    fake.configure(slow_start_s=2.0)  # /health and requests answer 503 for 2 s from now
    started = time.monotonic()
    errors: list[OcrqError] = []
    results = await asyncio.gather(
        *(circuit.call(lambda: engine.recognise([image]), errors.append) for _ in range(3))
    )
    assert [len(r.pages) for r in results] == [1, 1, 1]
    assert time.monotonic() - started >= 1.5  # waited (waiting is not retrying: retries is 2)
    assert all(e.code is ErrorCode.ENGINE_UNAVAILABLE for e in errors)
    assert not circuit.is_open
    await circuit.aclose()


async def test_an_outage_longer_than_the_deadline_fails_with_engine_unavailable(
    fake: FakeVllm, client: httpx.AsyncClient, image: PageImage
) -> None:
    settings = settings_for(fake, engine_outage_s=1.0)
    engine = VllmEngine(settings, client)
    circuit = EngineCircuit(engine.probe, settings)
    fake.configure(slow_start_s=30.0)
    with pytest.raises(OcrqError) as caught:
        await circuit.call(lambda: engine.recognise([image]), lambda e: None)
    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
    assert "unreachable for 1 s" in caught.value.message
    await circuit.aclose()


async def test_a_request_that_keeps_failing_while_the_engine_is_healthy_fails(
    fake: FakeVllm, client: httpx.AsyncClient, image: PageImage
) -> None:
    settings = settings_for(fake)
    engine = VllmEngine(settings, client)
    circuit = EngineCircuit(engine.probe, settings)
    fake.configure(fail_next=100)  # /health says 200, every request 503
    errors: list[OcrqError] = []
    with pytest.raises(OcrqError) as caught:
        await circuit.call(lambda: engine.recognise([image]), errors.append)
    assert caught.value.code is ErrorCode.ENGINE_UNAVAILABLE
    assert len(errors) == settings.ocr.engine_retries + 1
    await circuit.aclose()


async def test_a_permanent_error_is_not_retried(
    fake: FakeVllm, client: httpx.AsyncClient, image: PageImage
) -> None:
    settings = settings_of(vllm_url=fake.url, vllm_model="not-served")  # the fake answers 404
    engine = VllmEngine(settings, client)
    circuit = EngineCircuit(engine.probe, settings)
    errors: list[OcrqError] = []
    with pytest.raises(OcrqError) as caught:
        await circuit.call(lambda: engine.recognise([image]), errors.append)
    assert caught.value.code is ErrorCode.ENGINE_ERROR and len(errors) == 1
    assert not circuit.is_open
