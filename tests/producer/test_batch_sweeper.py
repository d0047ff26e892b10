"""The producer process itself seals the batches whose producer died before sealing them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ocrq.producer.jobs.views import new_job_id
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.keys import tag_of
from ocrq.shared.record import new_job_fields
from ocrq.shared.schemas import JobOptions
from ocrq.shared.settings import replace_settings
from ocrq.shared.store import JobStore, now_ms

OPTIONS = JobOptions(lane="batch")


def store_with(store: JobStore, **overrides: Any) -> JobStore:
    """The store with other settings (the dead producer's), on the same Redis client."""
    return JobStore(store.redis, replace_settings(store.settings, **overrides))


async def test_a_running_producer_seals_a_batch_another_producer_left_open(
    make_client: Any, store: JobStore
) -> None:
    # A 0.2 s body timeout gives batches a 3 s open deadline, and sweeps every second or so.
    api = make_client(body_timeout_s=0.2)
    dead = BatchStore(store_with(store, body_timeout_s=0.2))
    _, batch_id = await dead.open(new_job_id(), "public", OPTIONS, None)
    job_id = new_job_id(tag_of(batch_id))
    fields = new_job_fields(
        job_id=job_id, tenant="public", filename="a.pdf", media_type="application/pdf",
        data=b"%PDF-1.4\n", options=OPTIONS, created_ms=now_ms(), batch=batch_id,
    )  # fmt: skip
    await store.enqueue(job_id, "batch", fields, None, batch=batch_id)
    assert api.get(f"/v1/batches/{batch_id}").json()["status"] == "open"
    deadline = time.monotonic() + 30  # generous: the sweep is due 3 to 5 s after the open
    while (view := api.get(f"/v1/batches/{batch_id}").json())["status"] == "open":
        assert time.monotonic() < deadline, view
        await asyncio.sleep(0.2)
    assert view["status"] == "running" and [j["id"] for j in view["jobs"]] == [job_id]
    assert [f["code"] for f in view["rejected"]] == ["unavailable"]
    assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "queued"
