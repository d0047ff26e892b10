"""The producer's and the workers' Redis users: generated from the key layout, shipped as
generated (k8s and docker-compose), and what the Redis StatefulSet writes at start-up loads.

The pipeline running as these users against a real Redis is tests/deploy/test_redis_roles_live.py.
"""

from __future__ import annotations

import inspect
import os
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from support.deploy_tree import K8S, REPO_ROOT, base_objects, find, load_docs, redis_startup_users
from support.processes import wait_until

from ocrq.deploy import command as k8s
from ocrq.deploy import keda, redis_acl
from ocrq.shared.embedded import EmbeddedServer, find_server_binary, free_port
from ocrq.shared.keys import SCRIPT_NAMES, Keys, with_tag
from ocrq.shared.settings import load_settings

CONFIG = K8S / "base" / "config.yaml"
COMPOSE = REPO_ROOT / "docker-compose.yml"
ROLE_SECRET_KEYS = {"producer": "producer", "worker": "worker"}
DEPLOYMENTS = {"producer": "ocrq-producer", "worker": "ocrq-consumer"}


@pytest.fixture(autouse=True)
def _no_ocrq_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generation reads OCRQ_* from the environment: start each test from none."""
    for name in list(os.environ):
        if name.startswith("OCRQ_"):
            monkeypatch.delenv(name)


def committed_role_rules() -> dict[str, str]:
    data = find(base_objects(), "ConfigMap", keda.ROLE_ACL_CONFIGMAP)["data"]
    return {str(k): str(v) for k, v in data.items()}


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def test_committed_role_rules_equal_what_the_key_layout_generates() -> None:
    settings = k8s.settings_for(CONFIG)
    expected = {role: redis_acl.role_rules(settings, role) for role in redis_acl.ROLES}
    assert committed_role_rules() == expected, (
        "k8s/base/keda/redis-acl.yaml drifted from the code's key layout: regenerate with "
        "`ocrq k8s keda --env-from k8s/base/config.yaml --out k8s/base/keda`"
    )


def test_every_kind_of_key_has_its_roles_and_every_script_its_caller() -> None:
    # A new Keys method or script fails here until someone decides who may touch it.
    assert set(redis_acl.key_kinds()) == set(redis_acl.KEY_ROLES)
    assert set(redis_acl.SCRIPT_ROLES) == set(SCRIPT_NAMES)
    for name, roles in redis_acl.SCRIPT_ROLES.items():
        caller = redis_acl.script_caller(name)
        for role in redis_acl.ROLES:
            assert (role in caller) == (role in roles), (name, caller)


def test_rules_follow_the_prefix() -> None:
    rules = redis_acl.role_rules(load_settings({}, prefix="tenant7:"), "worker")
    assert "~tenant7:{p*}:job:*" in rules.split() and "&tenant7:events" in rules.split()
    assert not any(word.startswith("~ocrq:") for word in rules.split())


def sample_keys(keys: Keys, kind: str, tag: str) -> list[str]:
    """Real keys of one kind in one partition (ids as the producer makes them)."""
    method = getattr(keys, kind)
    args = []
    for name in inspect.signature(method).parameters:
        if name == "tag":
            args.append(tag)
        elif name.endswith("_id"):
            args.append(with_tag("AbCdEfGhIjKlMnOpQrStUv", tag))
        else:
            args.append({"tenant": "acme", "lane": "batch"}.get(name, "key-1"))
    made = method(*args)
    return [made] if isinstance(made, str) else list(made)


@pytest.mark.parametrize("role", redis_acl.ROLES)
def test_a_role_reaches_its_kinds_of_key_in_every_partition_and_no_other(role: str) -> None:
    keys = Keys("ocrq:", 256)  # tags p0…, and p<i>-<n> where p<i> hashes elsewhere
    patterns = redis_acl.key_patterns(keys, role)  # type: ignore[arg-type]
    for kind, roles in redis_acl.KEY_ROLES.items():
        for tag in keys.tags:
            for key in sample_keys(keys, kind, tag):
                reached = any(fnmatchcase(key, pattern) for pattern in patterns)
                assert reached == (role in roles), (role, kind, key)
    assert not any(fnmatchcase("another-app:job:x", p) for p in patterns)


def test_a_prefix_with_glob_characters_is_escaped() -> None:
    rules = redis_acl.role_rules(load_settings({}, prefix="a*b:"), "producer").split()
    assert "~a\\*b:{p*}:job:*" in rules and "&a\\*b:events" in rules


def test_a_worker_may_run_its_scripts_calls_and_the_producer_may_not_read_lanes() -> None:
    settings = load_settings({})
    worker = set(redis_acl.role_commands(settings, "worker"))
    producer = set(redis_acl.role_commands(settings, "producer"))
    assert redis_acl.script_commands("prune") <= worker  # XINFO CONSUMERS, XGROUP DELCONSUMER
    assert {"xinfo|consumers", "xgroup|delconsumer"} <= worker
    assert not {"xreadgroup", "xautoclaim", "xack", "xclaim"} & producer
    # DEL: finish.lua drops the pages and files hashes of a result kept in the object store
    # (a worker could already end any hash with EXPIRE); SET, ZADD and the rest stay out.
    assert redis_acl.script_commands("finish") >= {"del"}
    assert not {"set", "zadd", "subscribe", "info"} & worker
    dangerous = {"config", "flushall", "flushdb", "keys", "debug", "acl", "module", "shutdown"}
    assert not dangerous & (worker | producer)


def test_a_cluster_adds_the_slot_map_and_a_database_adds_select() -> None:
    url = "redis://redis-cluster-0.redis-cluster.ocrq.svc:6379"
    cluster = load_settings({}, redis_url=url, redis_mode="cluster", partitions=3)
    assert {"cluster|slots", "command"} <= set(redis_acl.role_commands(cluster, "worker"))
    single = load_settings({})
    assert "cluster|slots" not in redis_acl.role_commands(single, "worker")
    assert "select" not in redis_acl.role_commands(single, "worker")
    db2 = load_settings({}, redis_url="redis://127.0.0.1:6379/2")
    assert "select" in redis_acl.role_commands(db2, "producer")


@pytest.mark.parametrize("role", redis_acl.ROLES)
def test_each_deployment_logs_in_as_its_own_role(role: str) -> None:
    deployment = find(base_objects(), "Deployment", DEPLOYMENTS[role])
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = env_of(container)
    assert env["OCRQ_REDIS_URL"]["value"].startswith("redis://$(REDIS_USERNAME):$(REDIS_PASSWORD)@")
    user = env["REDIS_USERNAME"]["valueFrom"]["secretKeyRef"]
    password = env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert user == {"name": keda.REDIS_SECRET, "key": f"{role}-username"}
    assert password == {"name": keda.REDIS_SECRET, "key": f"{role}-password"}
    secret = find(base_objects(), "Secret", keda.REDIS_SECRET)["stringData"]
    assert {user["key"], password["key"]} <= set(secret)


def test_only_the_redis_pod_holds_the_admin_password() -> None:
    holders = []
    for obj in base_objects():
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {}).get("secretKeyRef", {})
                if ref == {"name": keda.REDIS_SECRET, "key": "password"}:
                    holders.append((obj["kind"], obj["metadata"]["name"]))
    assert set(holders) == {("StatefulSet", "redis")}


def test_the_vllm_sidecar_worker_logs_in_as_a_worker() -> None:
    text = (K8S / "overlays" / "vllm-sidecar" / "kustomization.yaml").read_text()
    assert "key: worker-password" in text and "key: password\n" not in text


def startup_users(tmp_path: Path) -> dict[str, list[str]]:
    """Run the StatefulSet's start-up script (not Redis) with test secrets; its users."""
    statefulset = find(base_objects(), "StatefulSet", "redis")
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    env = env_of(container)
    rules = committed_role_rules()
    refs = {"PRODUCER_ACL_RULES": "producer", "WORKER_ACL_RULES": "worker"}
    for name, key in refs.items():
        assert env[name]["valueFrom"]["configMapKeyRef"] == {
            "name": keda.ROLE_ACL_CONFIGMAP, "key": key
        }  # fmt: skip
    values = {
        "REDIS_PASSWORD": "admin-pw", "KEDA_USERNAME": "keda-t", "KEDA_PASSWORD": "keda-pw",
        "KEDA_ACL_RULES": "-@all +ping", "PRODUCER_USERNAME": "producer-t",
        "PRODUCER_PASSWORD": "producer-pw", "PRODUCER_ACL_RULES": rules["producer"],
        "WORKER_USERNAME": "worker-t", "WORKER_PASSWORD": "worker-pw",
        "WORKER_ACL_RULES": rules["worker"],
    }  # fmt: skip
    return redis_startup_users(tmp_path, values)


def test_redis_startup_writes_each_role_user_with_its_generated_rules(
    tmp_path: Path, clean_redis: str
) -> None:
    users = startup_users(tmp_path)
    assert set(users) == {"default", "keda-t", "producer-t", "worker-t"}
    admin = redis.Redis.from_url(clean_redis, socket_timeout=5)
    try:
        for name in ("producer-t", "worker-t"):
            admin.execute_command("ACL", "SETUSER", name, "reset", *users[name])  # type: ignore[no-untyped-call]
        worker = redis.Redis.from_url(clean_redis, username="worker-t", password="worker-pw")
        assert worker.ping()
        with pytest.raises(redis.exceptions.NoPermissionError):
            worker.config_get("dir")
        worker.close()
    finally:
        for name in ("producer-t", "worker-t"):
            admin.execute_command("ACL", "DELUSER", name)  # type: ignore[no-untyped-call]
        admin.close()


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def compose_acl_file() -> str:
    """The ACL file the compose Redis loads (passwords as written, not interpolated)."""
    redis_service = compose()["services"]["redis"]
    command = redis_service["command"]
    target = command[command.index("--aclfile") + 1]
    (mount,) = (c for c in redis_service["configs"] if c["target"] == target)
    return str(compose()["configs"][mount["source"]]["content"])


def compose_users() -> dict[str, str]:
    """The compose Redis's users: name -> the rest of its ``user`` line."""
    users = {}
    for line in compose_acl_file().splitlines():
        word, rest = line.split(" ", 1)
        assert word == "user", line
        users[rest.split()[0]] = rest
    return users


COMPOSE_USERS = redis_acl.DEFAULT_USERS
COMPOSE_PASSWORDS = {
    "producer": "${OCRQ_REDIS_PRODUCER_PASSWORD:-local-producer-password}",
    "worker": "${OCRQ_REDIS_WORKER_PASSWORD:-local-worker-password}",
}
COMPOSE_ROLES: dict[str, redis_acl.Role] = {
    "producer": "producer", "consumer": "worker", "consumer-gpu": "worker"
}  # fmt: skip


def test_compose_redis_has_the_generated_users_and_an_unprivileged_default() -> None:
    # As compose resolves it with nothing set: ${VAR:-default} is its default.
    env = {
        k: re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", str(v))
        for k, v in (compose().get("x-ocrq-env") or {}).items()
    }
    settings = load_settings(env, redis_url="redis://redis:6379/0")
    users = compose_users()
    for role, name in COMPOSE_USERS.items():
        rules = redis_acl.role_rules(settings, role)
        expected = redis_acl.user_line(name, COMPOSE_PASSWORDS[role], rules)
        assert users.get(name) == expected, (
            "docker-compose.yml's redis-users config drifted from `ocrq k8s acl` (its password "
            f"as a ${{OCRQ_REDIS_…_PASSWORD}} default); the line should be: user {expected}"
        )
    # Without a password: PING only (the health check), nothing a compromised pod could use.
    assert users["default"] == "default on nopass resetkeys resetchannels -@all +ping"


def test_ocrq_k8s_acl_prints_the_users_compose_loads(capsys: pytest.CaptureFixture[str]) -> None:
    assert k8s.main(["acl"]) == 0
    printed = capsys.readouterr().out.splitlines()
    users = compose_users()
    expected = []
    for role, name in COMPOSE_USERS.items():
        expected.append(
            f"user {users[name]}".replace(COMPOSE_PASSWORDS[role], f"{role.upper()}_PASSWORD")
        )
    assert printed == expected


def test_compose_services_log_in_as_their_role() -> None:
    services = compose()["services"]
    assert "OCRQ_REDIS_URL" not in (compose().get("x-ocrq-env") or {})
    for service, role in COMPOSE_ROLES.items():
        url = services[service]["environment"]["OCRQ_REDIS_URL"]
        assert url == f"redis://{COMPOSE_USERS[role]}:{COMPOSE_PASSWORDS[role]}@redis:6379/0"


def test_compose_user_arguments_load_into_a_real_redis_server(tmp_path: Path) -> None:
    text = compose_acl_file()
    for role, password in COMPOSE_PASSWORDS.items():
        text = text.replace(password, f"{role}-pw")
    (tmp_path / "users.acl").write_text(text)
    binary, port = find_server_binary(), free_port()
    extra = ["--aclfile", str(tmp_path / "users.acl")]
    server = EmbeddedServer(binary, tmp_path / "redis", port, aof=False, extra=extra)
    anonymous = redis.Redis(port=port, socket_timeout=5)
    try:
        # The default user may only PING: readiness is a PING, not the INFO start_server asks.
        wait_until(anonymous.ping, 10, "the compose Redis never answered")
        with pytest.raises(redis.exceptions.NoPermissionError):
            anonymous.get("ocrq:{p0}:job:x")
        worker = redis.Redis(
            port=port, username="ocrq-worker", password="worker-pw", socket_timeout=5
        )
        assert worker.hget("ocrq:{p0}:job:x", "status") is None
        with pytest.raises(redis.exceptions.NoPermissionError):
            worker.flushall()
        worker.close()
    finally:
        anonymous.close()
        server.stop()


def test_the_generated_file_is_part_of_the_base() -> None:
    kustomization = load_docs(K8S / "base" / "kustomization.yaml")[0]
    assert "keda/redis-acl.yaml" in kustomization["resources"]
