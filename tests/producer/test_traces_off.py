"""With tracing off (no OTEL_* endpoint), a job carries no trace context."""

from __future__ import annotations

from typing import Any

from litestar.testing import TestClient
from support.payloads import b64, small_pdf

from ocrq.shared.record import Field
from ocrq.shared.store import JobStore


async def test_off_a_job_record_carries_no_trace(api: TestClient[Any], store: JobStore) -> None:
    r = api.post("/v1/jobs", json={"document": b64(small_pdf())})
    assert r.status_code == 202
    assert await store.redis.hexists(store.keys.job(r.json()["id"]), Field.TRACE) == 0
