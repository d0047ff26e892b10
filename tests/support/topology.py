"""The Redis a test session runs on, whatever its shape: one server, a cluster, or Sentinel."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.sentinel import Sentinel

from ocrq.shared.connect import parse_sentinels, redis_mode
from ocrq.shared.embedded import start_server
from ocrq.shared.settings import Settings

from .redis_servers import start_cluster, start_sentinel_set

CLUSTER_PARTITIONS = 3  # one per master of the test cluster: every master gets jobs


@dataclass
class Topology:
    """How to reach the session's Redis, and the OCRQ_* settings that say its shape."""

    kind: str  # single | cluster | sentinel
    url: str
    settings: dict[str, Any]
    flush: Callable[[], None]


def sync_client(settings: Settings) -> Any:
    """A synchronous client of the kind the settings say (the caller closes it).

    Typed Any: a test reads keys with it whatever the kind (they share the command API).
    """
    mode = redis_mode(settings)
    if mode == "cluster":
        return redis.RedisCluster.from_url(settings.store.redis_url, socket_timeout=5)
    if mode == "sentinel":
        sentinel = Sentinel(parse_sentinels(settings.store.redis_sentinels), socket_timeout=5)
        return sentinel.master_for(settings.store.redis_sentinel_master, socket_timeout=5)
    return redis.Redis.from_url(settings.store.redis_url)


@contextlib.contextmanager
def start_topology(kind: str, base: Path) -> Iterator[Topology]:
    """Start the session's Redis of this kind, and stop it afterwards."""
    if kind == "cluster":
        cluster = start_cluster(base, masters=3)
        settings = {"redis_mode": "cluster", "partitions": CLUSTER_PARTITIONS}
        try:
            yield Topology(kind, cluster.url, settings, cluster.flush)
        finally:
            cluster.stop()
    elif kind == "sentinel":
        found = start_sentinel_set(base)
        primary = f"redis://127.0.0.1:{found.primary_port()}/0"
        settings = {"redis_sentinels": found.addresses, "redis_sentinel_master": found.master}
        try:
            yield Topology(kind, primary, settings, found.flush)
        finally:
            found.stop()
    elif kind == "single":
        with _single(base) as url:
            yield Topology(kind, url, {}, lambda: _flushdb(url))
    else:
        raise ValueError(f"OCRQ_TEST_TOPOLOGY={kind!r}: single, cluster or sentinel")


@contextlib.contextmanager
def _single(base: Path) -> Iterator[str]:
    """OCRQ_TEST_REDIS_URL, else a fresh server (OCRQ_TEST_SERVER: auto | redis | valkey)."""
    external = os.environ.get("OCRQ_TEST_REDIS_URL")
    if external:
        yield external
        return
    server = start_server(base, aof=False, prefer=os.environ.get("OCRQ_TEST_SERVER", "auto"))
    try:
        yield server.url
    finally:
        server.stop()


def _flushdb(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()
