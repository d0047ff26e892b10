"""Engine slots: a local engine brings its own (its processes), vLLM takes the setting."""

from __future__ import annotations

import httpx

from ocrq.consumer.engines.tesseract import TesseractEngine
from ocrq.consumer.main import engine_slots, make_engine, page_flow
from ocrq.shared.settings import settings_of


async def test_a_local_engine_has_one_slot_per_process() -> None:
    settings = settings_of(engine="local", local_workers=3)
    engine = TesseractEngine(settings)
    try:
        assert engine_slots(settings, engine) == 3  # not the 256 a vLLM would get
        fewer = settings_of(engine="local", local_workers=3, engine_concurrency=2)
        assert engine_slots(fewer, engine) == 2
    finally:
        await engine.aclose()


async def test_vllm_gets_the_engine_concurrency_setting() -> None:
    settings = settings_of(engine="vllm", vllm_url="http://127.0.0.1:9", engine_concurrency=48)
    async with httpx.AsyncClient() as http:
        engine = make_engine(settings, http)
        try:
            assert engine_slots(settings, engine) == 48
            flow = page_flow(settings, engine)
            assert flow.engine.size == 48 and flow.render.size == settings.worker.raster_workers
        finally:
            await engine.aclose()
