"""On a Redis Cluster: jobs spread over every master, and a master's failover loses none.

The suite's end-to-end tests also run on a 3-master cluster (OCRQ_TEST_TOPOLOGY=cluster in
CI); these tests check what only a cluster has.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.documents import png
from support.processes import wait_until
from support.redis_servers import Cluster, client, kill, start_cluster
from support.stack import Stack, running_stack
from support.upload_load import UploadLoad

from ocrq.shared.keys import Keys, tag_of
from ocrq.shared.settings import load_settings

pytestmark = pytest.mark.slow
PARTITIONS = 3
FAST_FAILOVER = {"redis_socket_timeout_s": "2", "redis_connect_timeout_s": "1"}


@contextlib.contextmanager
def stack_on(cluster: Cluster, tmp_path: Path, **more: Any) -> Iterator[Stack]:
    """Producer and fake vLLM on this cluster, one partition per master; tests add workers."""
    settings = load_settings(
        {}, redis_url=cluster.url, redis_mode="cluster", partitions=PARTITIONS,
        shm_dir=str(tmp_path / "shm"), log_format="json", metrics_port=0, **more,
    )  # fmt: skip
    with running_stack(settings, tmp_path, **FAST_FAILOVER) as stack:
        yield stack


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three masters, no replicas."""
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"), masters=3)
    yield cluster
    cluster.stop()


def jobs_per_master(cluster: Cluster) -> list[int]:
    """How many job hashes each master holds (not their pages and files keys)."""
    counts = []
    for port in cluster.master_ports():
        with client(port) as c:
            keys = c.scan_iter(match="ocrq:{p*}:job:*", count=1000)
            counts.append(sum(1 for key in keys if key.count(b":") == 3))
    return counts


def test_jobs_land_on_every_master_and_all_finish(cluster3: Cluster, tmp_path: Path) -> None:
    cluster3.flush()
    with stack_on(cluster3, tmp_path) as stack:
        stack.start_worker()
        jobs = [stack.submit(png(60 + i, 40)) for i in range(45)]
        views = [stack.wait(job_id) for job_id in jobs]
        assert [v["status"] for v in views] == ["done"] * len(jobs)
        assert {tag_of(job_id) for job_id in jobs} == set(Keys("ocrq:", PARTITIONS).tags)
        per_master = jobs_per_master(cluster3)
        assert len(per_master) == 3 and all(per_master) and sum(per_master) == 45, per_master
        stack.assert_clean()


def test_a_master_killed_under_load_fails_over_and_loses_no_accepted_job(
    tmp_path: Path,
) -> None:
    cluster = start_cluster(tmp_path / "cluster", masters=3, replicas=1, aof=True, fsync="always")
    try:
        with stack_on(cluster, tmp_path, redis_wait_replicas=1) as stack:
            stack.start_worker(redis_block_ms=300, **FAST_FAILOVER)
            load = UploadLoad(stack.api).start()
            wait_until(lambda: len(load.accepted()) >= 20, 30, "no uploads were accepted")
            victim = next(p for p in cluster.master_ports() if p != cluster.nodes[0].port)
            kill(cluster.node(victim))
            killed_at = time.monotonic()
            wait_until(lambda: victim not in cluster.master_ports(), 30, "no failover")
            cluster.restart(victim)  # it rejoins as the new master's replica
            cluster.wait_healthy()
            tags = set(Keys("ocrq:", PARTITIONS).tags)
            recovered = lambda: {tag_of(j) for j in load.accepted_ids_after(killed_at)} == tags  # noqa: E731
            try:
                wait_until(recovered, 60, "uploads to every partition never recovered")
            except TimeoutError as e:
                raise AssertionError(f"{e}: {load.summary_after(killed_at)}") from e
            load.stop()
            assert load.statuses() <= {202, 503}, load.statuses()
            views = [stack.wait(job_id, timeout_s=120) for job_id in load.accepted()]
            not_done = [v for v in views if v["status"] != "done"]
            assert not not_done, (len(not_done), len(views), not_done[:3])
            stack.assert_clean()
    finally:
        cluster.stop()
