"""KEDA's Redis user can read what the redis-streams scaler reads, and nothing else.

Runs against the real test server: the ACL rules committed in k8s/base/keda and the ACL
file the Redis StatefulSet writes at start-up are loaded into it and exercised.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support.deploy_tree import K8S, base_objects, find, redis_startup_users

from ocrq.deploy import keda
from ocrq.shared.keys import Keys
from ocrq.shared.settings import GROUP, LANES, load_settings

KEYS = Keys(load_settings({}).store.prefix)
STREAM = KEYS.stream(LANES[0])


def committed_rules() -> str:
    return str(find(base_objects(), "ConfigMap", keda.KEDA_ACL_CONFIGMAP)["data"]["rules"])


def acl(admin: redis.Redis, *args: str) -> None:
    """Run an ACL subcommand (redis-py leaves execute_command untyped)."""
    admin.execute_command("ACL", *args)  # type: ignore[no-untyped-call]


def setuser(admin: redis.Redis, name: str, password: str, rules: str) -> None:
    acl(admin, "SETUSER", name, "reset", "on", f">{password}", *rules.split())


@pytest.fixture
def admin(clean_redis: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(clean_redis, socket_timeout=5)
    yield client
    for name in ("keda-test", "default-test"):
        acl(client, "DELUSER", name)
    client.close()


def login(url: str, user: str, password: str) -> redis.Redis:
    return redis.Redis.from_url(url, username=user, password=password, socket_timeout=5)


def test_keda_user_reads_lag_pending_and_length(admin: redis.Redis, clean_redis: str) -> None:
    setuser(admin, "keda-test", "pw", committed_rules())
    admin.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    admin.xadd(STREAM, {"id": "job-1"})
    keda = login(clean_redis, "keda-test", "pw")
    try:
        assert int(str(keda.info()["redis_version"]).split(".")[0]) >= 7
        (group,) = keda.xinfo_groups(STREAM)
        # A group created at id 0 sees the queued job as lag: what wakes a worker from zero.
        assert group["lag"] == 1
        assert keda.xpending(STREAM, GROUP)["pending"] == 0
        assert keda.xlen(STREAM) == 1
        admin.xreadgroup(GROUP, "worker-1", {STREAM: ">"}, count=1)
        assert keda.xinfo_groups(STREAM)[0]["lag"] == 0
        assert keda.xpending(STREAM, GROUP)["pending"] == 1
    finally:
        keda.close()


def test_keda_user_cannot_write_or_read_jobs(admin: redis.Redis, clean_redis: str) -> None:
    setuser(admin, "keda-test", "pw", committed_rules())
    admin.hset(KEYS.job("job-1"), "status", "queued")
    keda = login(clean_redis, "keda-test", "pw")
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            keda.xadd(STREAM, {"id": "forged"})
        with pytest.raises(redis.exceptions.NoPermissionError):
            keda.hget(KEYS.job("job-1"), "status")
        with pytest.raises(redis.exceptions.NoPermissionError):
            keda.xlen("someone-else:stream")
        with pytest.raises(redis.exceptions.NoPermissionError):
            keda.publish(KEYS.events, "x")
    finally:
        keda.close()


def test_redis_startup_script_writes_a_loadable_acl_file(
    admin: redis.Redis, clean_redis: str, tmp_path: Path
) -> None:
    env = {
        "REDIS_PASSWORD": "main-pw",
        "KEDA_USERNAME": "keda-test",
        "KEDA_PASSWORD": "keda-pw",
        "KEDA_ACL_RULES": committed_rules(),
        # The role users (tests/deploy/test_redis_role_acl.py loads and exercises them).
        "PRODUCER_USERNAME": "producer-test", "PRODUCER_PASSWORD": "p-pw",
        "PRODUCER_ACL_RULES": "-@all", "WORKER_USERNAME": "worker-test",
        "WORKER_PASSWORD": "w-pw", "WORKER_ACL_RULES": "-@all",
    }  # fmt: skip
    users = redis_startup_users(tmp_path, env)
    assert set(users) == {"default", "keda-test", "producer-test", "worker-test"}
    # Load both lines, the default user under a test name so the session stays usable.
    for name, rules in (("default-test", users["default"]), ("keda-test", users["keda-test"])):
        acl(admin, "SETUSER", name, "reset", *rules)
    main = login(clean_redis, "default-test", "main-pw")
    keda = login(clean_redis, "keda-test", "keda-pw")
    try:
        main.xadd(STREAM, {"id": "job-1"})
        main.publish(KEYS.events, "{}")  # the events channel needs &* on Redis 7
        assert keda.xlen(STREAM) == 1
    finally:
        main.close()
        keda.close()


def test_redis_reads_acl_rules_from_the_generated_configmap() -> None:
    statefulset = find(base_objects(), "StatefulSet", "redis")
    env = statefulset["spec"]["template"]["spec"]["containers"][0]["env"]
    rules = next(e for e in env if e["name"] == "KEDA_ACL_RULES")["valueFrom"]["configMapKeyRef"]
    assert rules == {"name": keda.KEDA_ACL_CONFIGMAP, "key": "rules"}
    assert (K8S / "base" / "keda" / "consumer.yaml").read_text().count(keda.KEDA_ACL_CONFIGMAP) == 1
