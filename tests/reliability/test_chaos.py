"""Chaos: workers SIGKILLed at random, Redis killed under load, a flaky and absent engine.

Short runs in CI; ``OCRQ_RELIABILITY=long`` runs the long ones (1,000 jobs, a 2-minute engine
outage). RELIABILITY.md has the figures of the last long run.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter

import httpx
import pytest
import redis
from support.documents import png
from support.redis_servers import kill, restart
from support.stack import Stack, WorkerProc

from ocrq.shared.embedded import EmbeddedServer

LONG = os.environ.get("OCRQ_RELIABILITY") == "long"
CHAOS_JOBS = 1000 if LONG else 160  # ~40 s of work: room for a kill every 2-4 s plus a restart
OUTAGE_S = 120 if LONG else 15
# Uploads at up to ~30/s around the Redis kill: under load, and few enough (~200) that the
# two workers finish them in seconds rather than a minute.
UPLOAD_PAUSE_S = 0.03
# engine_concurrency: the fake engine below serves 2 requests at once; a worker sized for
# vLLM's 256 would queue its requests in the engine past their 10 s timeout.
FAST_RECLAIM = {
    "visibility_timeout_ms": 2000, "max_deliveries": 100, "raster_workers": 1,
    "engine_concurrency": 4,
}  # fmt: skip


def size_of(i: int) -> tuple[int, int]:
    """A size no other job of the run has: the fake engine writes it into the Markdown."""
    return 100 + i % 500, 60 + i // 500


def submit_all(stack: Stack, count: int) -> dict[str, tuple[int, int]]:
    return {stack.submit(png(*size_of(i))): size_of(i) for i in range(count)}


def done_lines(workers: list[WorkerProc]) -> Counter[str]:
    """How many times each job was written `done`, by every worker that ever ran."""
    return sum((worker.jobs_done() for worker in workers), Counter())


def assert_each_done_once_with_its_content(
    stack: Stack, jobs: dict[str, tuple[int, int]], timeout_s: float
) -> None:
    for job_id, (width, height) in jobs.items():
        view = stack.wait(job_id, timeout_s=timeout_s)
        assert view["status"] == "done", view
        assert f"{width}x{height}" in view["result"]["markdown"], job_id
    assert set(done_lines(stack.workers).values()) == {1}
    assert set(done_lines(stack.workers)) == set(jobs)


@pytest.mark.slow
def test_jobs_survive_workers_sigkilled_at_random(stack: Stack) -> None:
    stack.fake.configure(latency_s=0.5, max_concurrency=2)  # ~4 jobs/s: kills land mid-run
    alive = [stack.start_worker(**FAST_RECLAIM) for _ in range(3)]
    jobs = submit_all(stack, CHAOS_JOBS)
    rng = random.Random(7)
    r = redis.Redis.from_url(stack.settings.store.redis_url)
    kills = 0
    deadline = time.monotonic() + (1800 if LONG else 400)
    while time.monotonic() < deadline:
        finished = sum(1 for j in jobs if r.hget(f"ocrq:{{p0}}:job:{j}", "status") == b"done")
        if finished == len(jobs):
            break
        time.sleep(rng.uniform(2.0, 4.0))
        victim = alive.pop(rng.randrange(len(alive)))
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        kills += 1
        alive.append(stack.start_worker(**FAST_RECLAIM))
    attempts = Counter(int(r.hget(f"ocrq:{{p0}}:job:{j}", "attempts") or 0) for j in jobs)
    r.close()
    assert kills >= 3
    assert_each_done_once_with_its_content(stack, jobs, timeout_s=120)
    stack.assert_clean()
    print(
        f"chaos: {len(jobs)} jobs, {kills} workers SIGKILLed, attempts {sorted(attempts.items())}"
    )


@pytest.mark.slow
def test_every_accepted_job_survives_a_redis_sigkill_under_load(
    faulty_stack: tuple[Stack, EmbeddedServer],
) -> None:
    stack, server = faulty_stack
    stack.fake.configure(latency_s=0.05)
    for _ in range(2):
        stack.start_worker(redis_socket_timeout_s=1, redis_connect_timeout_s=1, **FAST_RECLAIM)
    accepted: list[str] = []
    stop = threading.Event()

    def upload() -> None:
        with httpx.Client(base_url=stack.api, timeout=10) as client:
            i = 0
            while not stop.is_set():
                try:
                    r = client.post("/v1/jobs", content=png(*size_of(i)))
                except httpx.HTTPError:
                    continue
                if r.status_code == 202:  # a 503 while Redis is away is a refusal, not a loss
                    accepted.append(r.json()["id"])
                i += 1
                time.sleep(UPLOAD_PAUSE_S)

    uploader = threading.Thread(target=upload)
    uploader.start()
    time.sleep(2)
    kill(server)  # appendfsync always: every 202 was on disk
    time.sleep(2)
    revived = restart(server)
    try:
        time.sleep(3)
        stop.set()
        uploader.join(30)
        assert len(accepted) > 20
        for job_id in accepted:
            assert stack.wait(job_id, timeout_s=120)["status"] == "done", job_id
        stack.assert_clean()
        print(f"durability: {len(accepted)} accepted around a Redis SIGKILL, all done")
    finally:
        revived.stop()


@pytest.mark.slow
def test_a_flaky_engine_and_an_outage_end_every_job_done(stack: Stack) -> None:
    flaky = {"fail_rate": 0.3, "hang_rate": 0.05, "hang_s": 30.0, "drop_rate": 0.05, "seed": 3}
    stack.fake.configure(latency_s=0.05, **flaky)
    worker = stack.start_worker(
        engine_timeout_s=2, engine_retries=8, engine_backoff_s=0.1, engine_backoff_max_s=2
    )
    first = submit_all(stack, 30)
    for job_id in first:
        assert stack.wait(job_id, timeout_s=300)["status"] == "done", job_id
    stack.fake.configure(slow_start_s=OUTAGE_S, fail_rate=0.0, hang_rate=0.0, drop_rate=0.0)
    second = submit_all(stack, 20)
    for job_id in second:  # they wait out the outage instead of failing
        assert stack.wait(job_id, timeout_s=OUTAGE_S + 120)["status"] == "done", job_id
    assert worker.proc.poll() is None and "Traceback" not in worker.log()
    assert '"engine_circuit_open"' in worker.log() and '"engine_circuit_closed"' in worker.log()
    stack.assert_clean()
