"""Fresh Redis servers with the producer's and the workers' own users, for tests/deploy.

Each test gets its own server (the session's server keeps its open default user for the other
tests) with the users that k8s/base/keda/redis-acl.yaml ships. Every refusal Redis makes is in
its ACL LOG: a test that ends with an entry there failed, whatever the processes answered.
The fixtures (``roles``, ``sentinel_roles``, ``cluster_roles``) are in conftest.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from ocrq.deploy import keda, redis_acl
from ocrq.shared.embedded import start_server
from ocrq.shared.settings import Settings, load_settings

from .deploy_tree import base_objects, find
from .redis_servers import start_cluster, start_sentinel_set

USERS = {"producer": "producer-t", "worker": "worker-t"}
PARTITIONS = 2  # ids that carry a tag (p1.…) as well as bare ones
# redis-py sends CLIENT SETINFO on connect and ignores a refusal; Redis 7.0 cannot name it in
# a rule (7.2 added it), so a 7.2+ server logs its refusal. Nothing else may be refused.
IGNORED_REFUSALS = frozenset({"client|setinfo"})


@dataclass
class RoleServer:
    """A fresh Redis with the shipped role users, and admin clients (the default user) of
    each of its servers, the one the URL names first.

    ``via``: the settings that reach it some other way than its URL (Sentinel, a cluster).
    """

    port: int
    admins: list[redis.Redis]
    passwords: dict[str, str]
    via: dict[str, Any] = field(default_factory=dict)

    @property
    def admin(self) -> redis.Redis:
        return self.admins[0]

    def url(self, role: str) -> str:
        return f"redis://{USERS[role]}:{self.passwords[role]}@127.0.0.1:{self.port}/0"

    def client(self, role: str) -> redis.Redis:
        return redis.Redis.from_url(self.url(role), socket_timeout=5)

    def settings(self, role: str, **overrides: Any) -> Settings:
        given = {"partitions": PARTITIONS, **self.via, **overrides}
        return load_settings({}, redis_url=self.url(role), **given)

    def refusals(self) -> list[dict[str, Any]]:
        """What its servers refused, from their ACL LOGs."""
        log: list[Any] = [e for admin in self.admins for e in admin.acl_log()]
        return [e for e in log if str(e.get("object")) not in IGNORED_REFUSALS]

    def logged_in(self) -> set[str]:
        """The users of the connections its servers have now."""
        return {str(c["user"]) for admin in self.admins for c in admin.client_list()}

    def close(self) -> None:
        for admin in self.admins:
            admin.close()


def shipped_rules() -> dict[str, str]:
    data = find(base_objects(), "ConfigMap", keda.ROLE_ACL_CONFIGMAP)["data"]
    return {str(k): str(v) for k, v in data.items()}


def add_users(port: int, passwords: dict[str, str], rules: dict[str, str] | None = None) -> None:
    """The role users (as shipped, unless ``rules`` says), on one server."""
    with redis.Redis(port=port, socket_timeout=5) as admin:
        for role, rules_of_role in (rules or shipped_rules()).items():
            words = ["reset", "on", f">{passwords[role]}", *rules_of_role.split()]
            admin.execute_command("ACL", "SETUSER", USERS[role], *words)


def single_server(tmp_path: Path) -> Iterator[RoleServer]:
    """One server, the users on it."""
    server = start_server(tmp_path / "redis", aof=False)
    passwords = {role: secrets.token_hex(16) for role in USERS}
    found = RoleServer(server.port, [redis.Redis(port=server.port, socket_timeout=5)], passwords)
    try:
        add_users(server.port, passwords)
        yield found
    finally:
        found.close()
        server.stop()


def sentinel_servers(tmp_path: Path) -> Iterator[RoleServer]:
    """A primary and a replica behind three sentinels, the users on both servers."""
    sentinels = start_sentinel_set(tmp_path / "sentinel", aof=False)
    passwords = {role: secrets.token_hex(16) for role in USERS}
    primary = sentinels.primary_port()
    via = {"redis_sentinels": sentinels.addresses, "redis_sentinel_master": sentinels.master}
    found = RoleServer(primary, [redis.Redis(port=primary, socket_timeout=5)], passwords, via)
    try:
        for server in sentinels.servers:
            add_users(server.port, passwords)
        yield found
    finally:
        found.close()
        sentinels.stop()


def cluster_servers(tmp_path: Path) -> Iterator[RoleServer]:
    """A three-master cluster, the users (with the cluster's rules) on every node."""
    cluster = start_cluster(tmp_path / "cluster", masters=3)
    passwords = {role: secrets.token_hex(16) for role in USERS}
    via = {"redis_mode": "cluster", "partitions": 3}
    settings = load_settings({}, redis_url=cluster.url, **via)
    rules: dict[str, str] = {r: redis_acl.role_rules(settings, r) for r in redis_acl.ROLES}
    admins = [redis.Redis(port=n.port, socket_timeout=5) for n in cluster.nodes]
    found = RoleServer(cluster.nodes[0].port, admins, passwords, via)
    try:
        for node in cluster.nodes:
            add_users(node.port, passwords, rules)
        yield found
    finally:
        found.close()
        cluster.stop()
