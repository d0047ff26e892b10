"""Plain clients of a cluster's masters, for what must run on one connection of one node.

redis-py's asyncio cluster client runs each command of a MULTI/EXEC transaction in a new
thread with its own event loop (redis-py 8.1, ``TransactionStrategy``): the enqueue
transaction took ~3.9 ms through it against ~0.5 ms through a plain client of the same
master (BENCHMARKS.md). And WAIT, which names no key, cannot be routed to the node that
took a write. So a producer on a cluster sends both through a plain client of the master
that owns the key's slot; every other command goes through the cluster client, which
follows slot moves and failovers itself. When a plain client meets a moved slot or a dead
master, the cluster client's slot map is read again and the caller's request fails as
Redis being away (503, retry): the next one goes to the new owner.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import AskError, ClusterDownError, ReadOnlyError, TryAgainError

# A cluster node's connection settings that a plain client of that node takes as they are.
_PLAIN_KWARGS = frozenset(
    {
        "username",
        "password",
        "socket_timeout",
        "socket_connect_timeout",
        "ssl",
        "ssl_ca_certs",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_cert_reqs",
        "health_check_interval",
    }
)


class NodeClients:
    """The process client, or on a cluster a plain client per master (made on first use)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.cluster: Any = redis if isinstance(redis, RedisCluster) else None
        self._masters: dict[tuple[str, int], aioredis.Redis] = {}

    def for_key(self, key: str) -> aioredis.Redis:
        """A client whose one connection reaches the master of the key's slot."""
        if self.cluster is None:
            return self.redis
        node = self.cluster.get_node_from_key(key)
        address = (node.host, node.port)
        if address not in self._masters:
            kwargs = {k: v for k, v in node.connection_kwargs.items() if k in _PLAIN_KWARGS}
            self._masters[address] = aioredis.Redis(
                host=node.host, port=node.port, max_connections=node.max_connections, **kwargs
            )
        return self._masters[address]

    async def refresh(self) -> None:
        """Read the cluster's slot map again (after a moved slot or a failed master)."""
        if self.cluster is not None:
            await self.cluster.nodes_manager.initialize()

    async def aclose(self) -> None:
        """Close the plain clients (the process client is its owner's to close)."""
        for client in self._masters.values():
            await client.aclose()
        self._masters.clear()


def is_moved(error: Exception) -> bool:
    """A reply saying the slot lives elsewhere now, or soon will (a reshard, a failover)."""
    return isinstance(error, (AskError, ClusterDownError, ReadOnlyError, TryAgainError))
