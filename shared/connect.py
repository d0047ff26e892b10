"""The Redis client of a process: one server, a Redis Cluster, or a primary behind Sentinel.

Each process builds exactly one client (with one connection pool) from the settings and
passes it down. The three kinds share the command API that ocrq uses, so the rest of the code
has one path: the cluster client routes each command to the slot's master (every script and
transaction of ocrq touches one slot, see keys.py), and the Sentinel client asks the
sentinels for the current primary on every new connection, so it follows a failover.
"""

from __future__ import annotations

from typing import cast
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import (
    AskError,
    ClusterError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ocrq.shared.settings import Settings

# Redis unreachable, too slow, failing over (a cluster slot without a master, a primary
# demoted to a read-only replica, a slot that moved): wait and try again; never a job's
# outcome.
REDIS_DOWN: tuple[type[Exception], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
    ClusterError,
    TryAgainError,
    ReadOnlyError,
    RedisClusterException,
    AskError,
)


def redis_mode(settings: Settings) -> str:
    """single, cluster or sentinel: OCRQ_REDIS_SENTINELS alone selects sentinel."""
    if settings.store.redis_sentinels and settings.store.redis_mode == "single":
        return "sentinel"
    return settings.store.redis_mode


def parse_sentinels(raw: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` (OCRQ_REDIS_SENTINELS) as address pairs."""
    out: list[tuple[str, int]] = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"OCRQ_REDIS_SENTINELS entry {item!r} is not host:port")
        out.append((host, int(port)))
    if not out:
        raise ValueError("OCRQ_REDIS_MODE=sentinel needs OCRQ_REDIS_SENTINELS (host:port,…)")
    return out


def make_redis(settings: Settings) -> aioredis.Redis:
    """The process's one client, with a bounded pool and explicit socket timeouts.

    A cluster client is typed as Redis: it offers the same command methods, and keeping
    one type keeps one code path (keys.py guarantees that each call touches one slot).
    """
    mode = redis_mode(settings)
    if mode == "cluster":
        return cast(aioredis.Redis, _cluster_client(settings))
    if mode == "sentinel":
        return _sentinel_client(settings)
    pool = aioredis.BlockingConnectionPool.from_url(
        settings.store.redis_url,
        max_connections=settings.store.redis_max_connections,
        timeout=settings.store.redis_connect_timeout_s,
        socket_timeout=settings.store.redis_socket_timeout_s,
        socket_connect_timeout=settings.store.redis_connect_timeout_s,
        health_check_interval=30,
    )
    return aioredis.Redis(connection_pool=pool)


def _cluster_client(settings: Settings) -> RedisCluster:
    """A cluster client seeded by redis_url (any node); it learns the others itself."""
    return RedisCluster.from_url(
        settings.store.redis_url,
        max_connections=settings.store.redis_max_connections,  # per node
        socket_timeout=settings.store.redis_socket_timeout_s,
        socket_connect_timeout=settings.store.redis_connect_timeout_s,
        health_check_interval=30,
    )


def _sentinel_client(settings: Settings) -> aioredis.Redis:
    """A client on the primary the sentinels name; each new connection asks them again.

    The primary is reached as OCRQ_REDIS_URL's user (its role's ACL user), the sentinels
    without credentials (they have ACLs of their own).
    """
    timeouts = {
        "socket_timeout": settings.store.redis_socket_timeout_s,
        "socket_connect_timeout": settings.store.redis_connect_timeout_s,
    }
    url = urlsplit(settings.store.redis_url)  # unquoted as redis-py's from_url does
    username = unquote(url.username) if url.username else None
    password = unquote(url.password) if url.password is not None else None
    # redis-py types Sentinel() from 8.2 on; before, mypy sees an untyped call.
    sentinel = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        parse_sentinels(settings.store.redis_sentinels),
        sentinel_kwargs=timeouts,
        username=username,
        password=password,
        socket_timeout=settings.store.redis_socket_timeout_s,
        socket_connect_timeout=settings.store.redis_connect_timeout_s,
    )
    client: aioredis.Redis = sentinel.master_for(
        settings.store.redis_sentinel_master,
        max_connections=settings.store.redis_max_connections,
        health_check_interval=30,
    )
    return client
