"""Many tenants on one fleet, end to end: fair share between them, usage counted once."""

from __future__ import annotations

import base64
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.documents import garbage_pdf, text_png
from support.processes import wait_until
from support.stack import Stack, running_stack
from support.topology import sync_client

from ocrq.shared.keys import Keys
from ocrq.shared.quota_store import utc_day
from ocrq.shared.settings import Settings

KEYS = {"a": "key-a", "b": "key-b"}
API_KEYS = ",".join(f"{tenant}:{key}" for tenant, key in KEYS.items())


@pytest.fixture
def tenants_stack(settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    """A producer with two tenants' keys, and the fake vLLM; tests start the workers."""
    with running_stack(settings, tmp_path, API_KEYS=API_KEYS) as stack:
        yield stack


@pytest.fixture
def fifo_stack(settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    """The same with fair share off: first come, first served."""
    with running_stack(settings, tmp_path, API_KEYS=API_KEYS, FAIR_SHARE="false") as stack:
        yield stack


def submit(stack: Stack, tenant: str, data: bytes) -> str:
    body = {"document": base64.b64encode(data).decode()}
    headers = {"x-api-key": KEYS[tenant]}
    r = httpx.post(f"{stack.api}/v1/jobs", json=body, headers=headers, timeout=30)
    assert r.status_code == 202, r.text
    job_id: str = r.json()["id"]
    return job_id


def view(stack: Stack, tenant: str, job_id: str, wait: int = 0) -> dict[str, Any]:
    headers = {"x-api-key": KEYS[tenant]}
    url = f"{stack.api}/v1/jobs/{job_id}?wait={wait}"
    body: dict[str, Any] = httpx.get(url, headers=headers, timeout=30).json()
    return body


def wait_done(stack: Stack, tenant: str, job_id: str) -> None:
    deadline = time.monotonic() + 120
    while (seen := view(stack, tenant, job_id, wait=5))["status"] != "done":
        assert time.monotonic() < deadline, seen


def usage_today(settings: Settings, tenant: str) -> dict[str, int]:
    """The tenant's usage hashes of today, summed over the partitions."""
    keys = Keys(settings.store.prefix, settings.store.partitions)
    r = sync_client(settings)
    total: dict[str, int] = {}
    for tag in keys.tags:
        for name, value in r.hgetall(
            keys.usage(tenant, utc_day(int(time.time() * 1000)), tag)
        ).items():
            total[name.decode()] = total.get(name.decode(), 0) + int(value)
    r.close()
    return total


def jobs_ahead_of_a_lone_job(stack: Stack) -> int:
    """Tenant a queues 40 jobs, then b one; how many of a's a worker claimed before b's
    (by the claims' own times, so a slow poll on a loaded machine does not count)."""
    stack.fake.configure(latency_s=0.05)
    backlog = [submit(stack, "a", text_png([f"a{n}"])) for n in range(40)]
    lone = submit(stack, "b", text_png(["b"]))
    stack.start_worker(max_jobs=2)
    for job in [lone, *backlog]:
        wait_done(stack, "b" if job == lone else "a", job)
    stack.assert_clean()
    started = claimed_at(stack, [lone, *backlog])
    return sum(started[job] < started[lone] for job in backlog)


def claimed_at(stack: Stack, job_ids: list[str]) -> dict[str, int]:
    """Each job's claim time (epoch ms), from its hash."""
    r = sync_client(stack.settings)
    try:
        return {job: int(r.hget(stack.keys.job(job), "started_at") or 0) for job in job_ids}
    finally:
        r.close()


@pytest.mark.topology
def test_one_job_of_a_second_tenant_is_served_ahead_of_a_long_backlog(
    tenants_stack: Stack,
) -> None:
    # Fair share orders the tenants of one partition; the partitions' streams are read in
    # turn, so the other partitions' tickets of a may each come first: a couple per partition.
    partitions = len(tenants_stack.keys.tags)
    assert jobs_ahead_of_a_lone_job(tenants_stack) <= 2 + 2 * partitions


def test_without_fair_share_the_lone_job_waits_behind_the_backlog(fifo_stack: Stack) -> None:
    assert jobs_ahead_of_a_lone_job(fifo_stack) >= 36


@pytest.mark.topology
def test_usage_counts_each_job_once_though_a_killed_worker_handed_it_over(
    tenants_stack: Stack,
) -> None:
    stack = tenants_stack
    stack.fake.configure(latency_s=2.0)
    image = text_png(["usage"])
    doomed = stack.start_worker()
    job_id = submit(stack, "a", image)
    deadline = time.monotonic() + 20
    while view(stack, "a", job_id)["status"] != "processing":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    rescuer = stack.start_worker(quotas="a:weight=1")  # a named tenant: its own label
    wait_done(stack, "a", job_id)
    bad = submit(stack, "a", garbage_pdf())
    deadline = time.monotonic() + 60
    while view(stack, "a", bad, wait=5)["status"] != "failed":
        assert time.monotonic() < deadline
    used = usage_today(stack.settings, "a")
    assert used["jobs"] == 2 and used["failed"] == 1 and used["pages"] == 1
    assert used["pages:vllm"] == 1 and used["engine_ms"] >= 2000 * 0.9
    assert used["bytes_in"] == len(image) + len(garbage_pdf()) and used["bytes_out"] > 0
    assert usage_today(stack.settings, "b") == {}
    metrics = httpx.get(rescuer.metrics_url, timeout=10).text
    assert 'ocrq_tenant_jobs_total{status="done",tenant="a"} 1.0' in metrics
    assert 'ocrq_tenant_jobs_total{status="failed",tenant="a"} 1.0' in metrics
    submit(stack, "b", image)
    wait_until(
        lambda: 'tenant="other"} 1.0' in httpx.get(rescuer.metrics_url, timeout=10).text,
        30,
        "tenant b's job never counted as other",
    )
    stack.assert_clean()
