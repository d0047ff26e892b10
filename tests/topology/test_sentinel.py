"""Behind Sentinel: the primary dies under load, and no upload that got a 202 is lost.

A real primary and replica (AOF on, appendfsync always) and three sentinels. The producer
answers 503 ``unavailable`` (never 500) while the sentinels switch, and recovers by itself;
the worker resumes. With OCRQ_REDIS_WAIT_REPLICAS=1 a 202 means the replica held the job
before the primary died, so the promoted replica has every one of them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import wait_until
from support.redis_servers import SentinelSet, kill, start_sentinel_set
from support.stack import Stack, running_stack
from support.upload_load import UploadLoad

from ocrq.shared.settings import load_settings

pytestmark = pytest.mark.slow
FAST_FAILOVER = {"redis_socket_timeout_s": "2", "redis_connect_timeout_s": "1"}


@pytest.fixture
def sentinel_stack(tmp_path: Path) -> Iterator[tuple[Stack, SentinelSet]]:
    """Producer (replica-acknowledged uploads), fake vLLM, and the test's own Sentinel set."""
    found = start_sentinel_set(tmp_path / "redis")
    try:
        settings = load_settings(
            {}, redis_url=f"redis://127.0.0.1:{found.primary_port()}/0",
            redis_sentinels=found.addresses, redis_sentinel_master=found.master,
            redis_wait_replicas=1, log_format="json", metrics_port=0,
        )  # fmt: skip
        with running_stack(settings, tmp_path, **FAST_FAILOVER) as stack:
            yield stack, found
    finally:
        found.stop()


def test_a_primary_killed_under_load_loses_no_accepted_job(
    sentinel_stack: tuple[Stack, SentinelSet],
) -> None:
    stack, found = sentinel_stack
    stack.start_worker(redis_block_ms=300, **FAST_FAILOVER)
    load = UploadLoad(stack.api).start()
    wait_until(lambda: len(load.accepted()) >= 20, 30, "no uploads were accepted")
    old = found.primary()
    kill(old)
    killed_at = time.monotonic()
    wait_until(lambda: found.primary_port() != old.port, 30, "the sentinels never failed over")
    found.restart(old)  # as a restarted pod would: it comes back as the new primary's replica
    wait_until(lambda: load.accepted_after(killed_at) >= 20, 60, "uploads never recovered")
    load.stop()
    assert load.statuses() <= {202, 503}, load.statuses()  # never a 500, never no answer
    views = [stack.wait(job_id, timeout_s=120) for job_id in load.accepted()]
    assert [v["status"] for v in views] == ["done"] * len(views)
    stack.assert_clean()
