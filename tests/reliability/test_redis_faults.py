"""Redis going away never becomes a job's outcome, and its worker resumes its jobs at once."""

from __future__ import annotations

import time

import redis
from support.documents import sized_pdf
from support.processes import wait_until
from support.redis_servers import kill, restart
from support.stack import Stack

from ocrq.shared.embedded import EmbeddedServer

TWO_PAGES = [(300, 400), (310, 400)]
FAST_FAILOVER = {
    "redis_socket_timeout_s": 1, "redis_connect_timeout_s": 1, "redis_block_ms": 300,
}  # fmt: skip


def wait_processing(stack: Stack, jobs: list[str], timeout_s: float = 30) -> None:
    """Until a worker holds any of the jobs."""

    def started() -> bool:
        return any(stack.status(j) == "processing" for j in jobs)

    wait_until(started, timeout_s, "no job started")


def test_a_redis_pause_mid_job_fails_no_job(faulty_stack: tuple[Stack, EmbeddedServer]) -> None:
    stack, server = faulty_stack
    stack.fake.configure(latency_s=1.0)
    stack.start_worker(**FAST_FAILOVER)
    jobs = [stack.submit(sized_pdf(TWO_PAGES), dpi=72) for _ in range(4)]
    wait_processing(stack, jobs)
    r = redis.Redis.from_url(server.url)
    r.execute_command("CLIENT", "PAUSE", "4000", "ALL")  # longer than the socket timeout
    r.close()
    views = [stack.wait(j, timeout_s=90) for j in jobs]
    assert [v["status"] for v in views] == ["done"] * 4, [v.get("error") for v in views]
    assert all(v["result"]["page_count"] == 2 for v in views)
    stack.assert_clean()


def test_jobs_in_flight_when_redis_restarts_finish_long_before_the_visibility_timeout(
    faulty_stack: tuple[Stack, EmbeddedServer],
) -> None:
    stack, server = faulty_stack
    stack.fake.configure(latency_s=1.0)
    stack.start_worker(visibility_timeout_ms=120_000, **FAST_FAILOVER)
    jobs = [stack.submit(sized_pdf(TWO_PAGES), dpi=72) for _ in range(4)]
    wait_processing(stack, jobs)
    kill(server)
    time.sleep(3)  # the outage
    started = time.monotonic()
    revived = restart(server)
    try:
        views = [stack.wait(j, timeout_s=60) for j in jobs]
        assert [v["status"] for v in views] == ["done"] * 4
        # Resumed by the worker that held them, not left for a reclaim 120 s later.
        assert time.monotonic() - started < 60
        stack.assert_clean()
    finally:
        revived.stop()
