"""Each role's Redis user runs every transition the role makes, on one server, behind
Sentinel and on a cluster, and is refused what its role never does (role_servers.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from support.role_servers import PARTITIONS, USERS, RoleServer

from ocrq.producer.jobs.views import new_job_id
from ocrq.shared.audit_store import AuditEntry, AuditQuery, AuditTrail
from ocrq.shared.batch_store import BatchStore
from ocrq.shared.errors import ErrorCode, OcrqError
from ocrq.shared.record import Field
from ocrq.shared.schemas import JobOptions
from ocrq.shared.store import JobStore, Outcome, make_redis, now_ms
from ocrq.shared.usage_store import UsageStore

STATUS = (Field.STATUS,)


def refused(call: Any, *args: Any, **kwargs: Any) -> None:
    """The call is refused by the ACL (NOPERM), whatever it would have done."""
    with pytest.raises(redis.exceptions.NoPermissionError):
        call(*args, **kwargs)


def test_the_producer_user_cannot_take_jobs_off_a_lane_nor_run_redis(roles: RoleServer) -> None:
    lane = "ocrq:{p0}:stream:interactive"
    roles.admin.xgroup_create(lane, "workers", id="0", mkstream=True)
    roles.admin.xadd(lane, {"id": "job-1"})
    producer = roles.client("producer")
    try:
        refused(producer.xreadgroup, "workers", "me", {lane: ">"}, count=1)
        refused(producer.xautoclaim, lane, "workers", "me", 0)
        refused(producer.xack, lane, "workers", "0-1")
        refused(producer.config_get, "dir")
        refused(producer.flushall)
        refused(producer.keys, "*")
        refused(producer.acl_list)
        refused(producer.set, "another-app:key", "x")
        assert producer.xlen(lane) == 1  # what it may do: the backlog check
    finally:
        producer.close()


def test_the_worker_user_cannot_run_redis_nor_touch_keys_outside_its_own(
    roles: RoleServer,
) -> None:
    roles.admin.set("another-app:key", "theirs")
    worker = roles.client("worker")
    try:
        refused(worker.flushall)
        refused(worker.flushdb)
        refused(worker.config_set, "dir", "/tmp")
        refused(worker.acl_setuser, "intruder", enabled=True)
        refused(worker.execute_command, "MODULE", "LIST")
        refused(worker.execute_command, "CLIENT", "LIST")
        refused(worker.execute_command, "REPLICAOF", "NO", "ONE")
        refused(worker.execute_command, "SHUTDOWN", "NOSAVE")
        refused(worker.keys, "*")
        refused(worker.delete, "another-app:key")
        refused(worker.get, "another-app:key")
        # The producer's keys: Idempotency-Keys and the tenant's job index.
        refused(worker.set, "ocrq:{p0}:idem:acme:k", "job-x")
        refused(worker.zadd, "ocrq:{p0}:tenant:acme:jobs", {"job-x": 1})
        refused(worker.xadd, "ocrq:audit", {"action": "job.delete"})  # the trail is append-only
        # A script runs with the worker's permissions, for the keys it names and calls alike.
        sha = worker.script_load("return redis.call('HSET', ARGV[1], 'f', 'v')")
        with pytest.raises(redis.exceptions.ResponseError, match="can't access"):
            worker.evalsha(sha, 0, "another-app:hash")
        refused(worker.evalsha, sha, 1, "another-app:hash", "another-app:hash")
        assert roles.admin.exists("another-app:hash") == 0
        assert roles.admin.get("another-app:key") == b"theirs"
        refused(worker.publish, "another-app:channel", "x")
    finally:
        worker.close()


def fields(tenant: str, lane: str) -> dict[str, Any]:
    return {"status": "queued", "tenant": tenant, "payload": b"%PDF-1.7", "lane": lane,
            "created_at": now_ms()}  # fmt: skip


async def take(worker: JobStore, lane: str, me: str) -> tuple[str, str, str]:
    """The next entry of a lane in any partition, claimed: (job id, entry, its stream)."""
    for stream in worker.keys.streams(lane):
        reply: Any = await worker.redis.xreadgroup("workers", me, {stream: ">"}, count=1)
        if reply:
            entry, values = reply[0][1][0]
            job_id = values[b"id"].decode()
            assert await worker.claim(job_id, lane, entry.decode(), me) == "ok"
            return job_id, entry.decode(), stream
    raise AssertionError(f"nothing queued on {lane}")


async def test_every_store_transition_runs_as_the_role_that_makes_it(roles: RoleServer) -> None:
    await every_transition(roles)
    with pytest.raises(OcrqError) as err:  # no replica here: 503 (WAIT ran), not NOPERM
        await enqueue_waiting_for_a_replica(roles)
    assert err.value.code is ErrorCode.UNAVAILABLE
    with pytest.raises(OcrqError) as err:  # the tenant's backlog was counted and checked
        await enqueue_past_the_tenant_backlog(roles)
    assert err.value.code is ErrorCode.QUOTA_EXCEEDED
    assert roles.refusals() == []


@pytest.mark.slow
async def test_behind_sentinel_each_role_logs_in_to_the_primary_as_its_user(
    sentinel_roles: RoleServer,
) -> None:
    await every_transition(sentinel_roles)
    assert await enqueue_waiting_for_a_replica(sentinel_roles)  # the replica acknowledged
    assert sentinel_roles.refusals() == []


@pytest.mark.slow
async def test_on_a_cluster_each_role_reads_the_slot_map_and_runs_as_its_user(
    cluster_roles: RoleServer,
) -> None:
    await every_transition(cluster_roles)
    assert cluster_roles.refusals() == []


async def every_transition(roles: RoleServer) -> None:
    """Each role's store runs every transition of a job and a batch as its own user."""
    producer = JobStore(make_redis(roles.settings("producer")), roles.settings("producer"))
    worker = JobStore(make_redis(roles.settings("worker")), roles.settings("worker"))
    try:
        await jobs_life(producer, worker)
        await batch_life(producer)
        # Logged in as the role users, not as the open default user of this test server.
        assert set(USERS.values()) <= roles.logged_in(), roles.logged_in()
    finally:
        await producer.aclose()
        await worker.aclose()


async def jobs_life(producer: JobStore, worker: JobStore) -> None:
    """Jobs enqueued, taken, released, reclaimed, poisoned, finished, cancelled, deleted."""
    await producer.ensure_groups()
    await worker.ensure_groups()
    ids = [new_job_id(producer.keys.tags[i % PARTITIONS]) for i in range(4)]
    for job_id in ids:
        assert (await producer.enqueue(job_id, "interactive", fields("acme", "x"), job_id))[0]
    replay = new_job_id(producer.keys.tags[0])  # an Idempotency-Key's own partition
    replayed = await producer.enqueue(replay, "interactive", fields("acme", "x"), ids[0])
    assert replayed == (False, ids[0])
    me = "worker-1"
    # Taken, advanced, held, handed back on a drain, reclaimed, then poisoned.
    job, entry, stream = await take(worker, "interactive", me)
    assert await worker.progress(job, me, 1, 2) and await worker.touch(
        job, "interactive", entry, me
    )
    assert await worker.status(job) == "processing"
    assert (await worker.lanes.own_pending(stream, me, 10))[0][0] == entry
    assert (await worker.lanes.entry(stream, entry, 1)).job_id == job
    assert await worker.release(job, "interactive", entry, me)
    _, reclaimed, *_ = await worker.redis.xautoclaim(stream, "workers", me, 0)
    assert reclaimed[0][0].decode() == entry
    assert await worker.poison(job, "interactive", entry, me, deliveries=5)
    # Another finishes; the consumers that own nothing are pruned.
    job2, entry2, stream2 = await take(worker, "interactive", me)
    assert await worker.finish(job2, "interactive", entry2, me, Outcome.done(b"{}", 1))
    await worker.prune_consumers(stream2, "someone-else", 0)
    # The producer cancels one, deletes another, lists, reads its metrics.
    rest = [i for i in ids if i not in (job, job2)]
    assert await producer.cancel(rest[0], "acme") == "cancelled"
    assert await producer.cancel(rest[1], "acme", delete=True) == "deleted"
    assert {i for i, _ in await producer.recent_jobs("acme", 10, 0, STATUS)} >= {job, job2}
    assert await producer.groups_exist() and await producer.lane_stats("interactive")
    assert (await producer.memory())[0] > 0
    await audit_and_usage(producer)


async def audit_and_usage(producer: JobStore) -> None:
    """The producer appends to the audit trail and reads it and the usage, as its routes do."""
    trail = AuditTrail(producer, retention_days=90)
    await trail.append(AuditEntry(tenant="acme", action="job.submit", status=202))
    assert [e.action for e in (await trail.read(AuditQuery(tenant="acme"))).entries] == [
        "job.submit"
    ]
    report = await UsageStore(producer).report("acme", [datetime.now(UTC).date()])
    assert report.totals.jobs >= 3  # poisoned, finished, cancelled: counted by the worker's scripts


async def batch_life(producer: JobStore) -> None:
    """A batch opened, given a job, sealed, read, swept and deleted: all as the producer."""
    batches = BatchStore(producer)
    batch_id = new_job_id(producer.keys.tags[1])  # batch ids are made the same way
    assert (await batches.open(batch_id, "acme", JobOptions(), "bk"))[0]
    job_id = new_job_id(producer.keys.tags[1])
    await producer.enqueue(job_id, "batch", fields("acme", "batch"), None, batch=batch_id)
    await batches.seal(batch_id, [])
    assert (await batches.read(batch_id)) is not None
    assert await batches.job_ids(batch_id) == [job_id]
    assert len(await batches.job_rows([job_id], STATUS)) == 1
    await batches.sweep()
    await producer.cancel(job_id, "acme", delete=True)
    await batches.delete(batch_id)


async def enqueue_waiting_for_a_replica(roles: RoleServer) -> bool:
    """An upload with OCRQ_REDIS_WAIT_REPLICAS=1: the producer may WAIT."""
    settings = roles.settings("producer", redis_wait_replicas=1, redis_wait_timeout_ms=500)
    store = JobStore(make_redis(settings), settings)
    try:
        created, _ = await store.enqueue(new_job_id(), "interactive", fields("acme", "x"), None)
        return created
    finally:
        await store.aclose()


async def enqueue_past_the_tenant_backlog(roles: RoleServer) -> None:
    """A tenant's second job with OCRQ_MAX_TENANT_BACKLOG=1: the producer counts and checks."""
    settings = roles.settings("producer", max_tenant_backlog=1)
    store = JobStore(make_redis(settings), settings)
    try:
        for _ in range(2):
            await store.enqueue(new_job_id(), "interactive", fields("solo", "x"), None)
    finally:
        await store.aclose()
