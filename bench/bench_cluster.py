"""One Redis against a 3-master Redis Cluster on the same box: ingest, and the pub/sub choice.

    .venv/bin/python -m bench.bench_cluster --repeats 3 --clients 16

Everything runs on this machine, side by side in one run, so a cluster shows its overhead
here, not the gain of more machines (docs/scaling.md, "Outgrowing one Redis"). It starts a
single Redis, a 3-master cluster (no replicas) and a primary + replica pair (AOF off), then:

1. Ingest, for 100 kB and 1 MB documents (C concurrent clients in one separate process, raw
   body uploads, as bench/bench_enqueue.py does), jobs/s through ``ocrq producer`` with 1 and
   2 uvicorn processes on: the single node (``OCRQ_REDIS_MODE=single``); the cluster with
   ``OCRQ_PARTITIONS=3`` (one partition per master) and with 1 partition; the primary with
   ``OCRQ_REDIS_WAIT_REPLICAS=1`` (a WAIT per upload). Plus the raw Redis ceiling of each
   (C asyncio clients doing MULTI HSET+XADD+EXEC; on the cluster through RedisCluster with
   keys hash-tagged per partition, and once more through a plain client of each partition's
   master, which tells the servers' cost from redis-py's cluster client's). Rounds are
   interleaved (every phase once per round) and each Redis is flushed before each phase; the
   table gives the median of the rounds (min..max) and the ratio to the single node's median
   for the same phase.
2. Pub/sub (the producers stopped first: they subscribe to ocrq:events), one subscriber
   connected, checked with PUBSUB NUMSUB/SHARDNUMSUB over every node: ~80-byte JSON events
   as the Lua scripts publish them, PUBLISH on the single node, PUBLISH on the cluster
   (publisher on one master, subscriber on another: the message crosses the cluster bus,
   which broadcasts it to every node) and SPUBLISH on the cluster (publisher and SSUBSCRIBEr
   on the channel's shard). Delivered messages/s (publishes pipelined in windows of 100, each
   window drained by the subscriber), the server CPU per message summed over every node, the
   cluster-bus publish messages sent per message, and the latency publish → subscriber
   (p50/p99, one message at a time).
3. WAIT: the round trip of SET + WAIT 1 (what OCRQ_REDIS_WAIT_REPLICAS=1 adds per upload)
   against SET alone, on the primary with its replica.

``--parts ingest,pubsub,wait`` picks parts; everything it starts is stopped when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from bench import arguments, bench_enqueue
from ocrq.shared.embedded import EmbeddedServer, start_server
from ocrq.shared.keys import partition_tags
from tests.support import measuring, services
from tests.support.processes import wait_until
from tests.support.redis_servers import FAST_SYNC, Cluster, start_cluster

SIZES = {"100k": 100 * 1024, "1m": 1024 * 1024}
PARTS = ("ingest", "pubsub", "wait")
DOCS = {"100k": 600, "1m": 200}  # per phase and round
SINGLE, CLUSTER3, CLUSTER1, WAIT = (
    "single node",
    "cluster, 3 partitions",
    "cluster, 1 partition",
    "primary+replica, WAIT 1",
)
PLAIN3 = "cluster, 3 partitions, plain client per master"
RAW, OCRQ1, OCRQ2 = "raw Redis ceiling (MULTI HSET+XADD)", "ocrq, 1 process", "ocrq, 2 processes"
EVENT = json.dumps({"id": "p1." + "x" * 22, "status": "running", "pages_done": 3}).encode()


@dataclass
class Servers:
    """The Redis topologies under test."""

    single: EmbeddedServer
    cluster: Cluster
    primary: EmbeddedServer
    replica: EmbeddedServer

    def flusher(self, topology: str) -> Callable[[], None]:
        """Empty the Redis a topology writes to."""
        if topology in (CLUSTER3, CLUSTER1, PLAIN3):
            return self.cluster.flush
        server = self.primary if topology == WAIT else self.single
        return lambda: _flush(server.port)


def _flush(port: int) -> None:
    with redis.Redis(port=port) as r:
        r.flushall()


def start_servers(base: Path, stop: contextlib.ExitStack) -> Servers:
    """A single node, a 3-master cluster and a primary + replica pair, all AOF off."""
    single = start_server(base / "single", aof=False)
    stop.callback(single.stop)
    cluster = start_cluster(base / "cluster", masters=3, replicas=0, aof=False)
    stop.callback(cluster.stop)
    primary = start_server(base / "primary", aof=False, extra=FAST_SYNC)
    stop.callback(primary.stop)
    replica_of = ["--replicaof", "127.0.0.1", str(primary.port), *FAST_SYNC]
    replica = start_server(base / "replica", aof=False, extra=replica_of)
    stop.callback(replica.stop)

    def synced() -> bool:
        with redis.Redis(port=replica.port) as r:
            return r.info("replication").get("master_link_status") == "up"

    wait_until(synced, 30, "the replica never synced")
    return Servers(single, cluster, primary, replica)


async def raw_cluster_limit(
    url: str, data: bytes, count: int, clients: int, tags: tuple[str, ...], plain: bool
) -> float:
    """jobs/s of MULTI HSET + XADD on the cluster, keys hash-tagged per partition: through
    RedisCluster, or (plain) through a plain client of each tag's master (no cluster client).
    """
    cluster = RedisCluster.from_url(url, max_connections=clients)
    await cluster.initialize()
    owners = {tag: cluster.get_node_from_key(f"{{{tag}}}") for tag in tags}
    direct = {
        tag: aioredis.Redis(host=node.host, port=node.port, max_connections=clients)
        for tag, node in owners.items()
    }
    todo = iter(range(count))

    async def client() -> None:
        for n in todo:
            tag, job_id = tags[n % len(tags)], secrets.token_urlsafe(16)
            target: Any = direct[tag] if plain else cluster
            async with target.pipeline(transaction=True) as pipe:
                pipe.hset(
                    f"raw:{{{tag}}}:job:{job_id}", mapping=measuring.raw_job_fields(job_id, data)
                )
                pipe.xadd(f"raw:{{{tag}}}:stream", {"id": job_id})
                await pipe.execute()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    for one in direct.values():
        await one.aclose()
    await cluster.aclose()
    return count / elapsed


@dataclass
class Phase:
    """One cell of the ingest table: how to flush its Redis and run it for a size."""

    row: str
    topology: str
    flush: Callable[[], None]
    run: Callable[[str], float]
    rates: dict[str, list[float]] = field(default_factory=dict)


def raw_phases(servers: Servers, args: argparse.Namespace) -> list[Phase]:
    """The raw Redis ceiling: single node; cluster (3, 1 partitions; 3 without RedisCluster)."""
    docs = {name: bench_enqueue.document(size) for name, size in SIZES.items()}

    def single(name: str) -> float:
        data, count = docs[name], docs_for(name, args)
        return asyncio.run(bench_enqueue.raw_limit(servers.single.url, data, count, args.clients))

    def on_cluster(partitions: int, plain: bool = False) -> Callable[[str], float]:
        tags, url = partition_tags(partitions), servers.cluster.url
        return lambda name: asyncio.run(
            raw_cluster_limit(url, docs[name], docs_for(name, args), args.clients, tags, plain)
        )

    return [
        Phase(RAW, SINGLE, servers.flusher(SINGLE), single),
        Phase(RAW, CLUSTER3, servers.flusher(CLUSTER3), on_cluster(3)),
        Phase(RAW, CLUSTER1, servers.flusher(CLUSTER1), on_cluster(1)),
        Phase(RAW, PLAIN3, servers.flusher(PLAIN3), on_cluster(3, plain=True)),
    ]


def producer_phases(
    servers: Servers, args: argparse.Namespace, base: Path, stop: contextlib.ExitStack
) -> list[Phase]:
    """Start one `ocrq producer` per configuration (all kept up); a phase for each."""
    cluster = {"redis_mode": "cluster"}
    configs = [
        (OCRQ1, SINGLE, servers.single.url, 1, {}),
        (OCRQ2, SINGLE, servers.single.url, 2, {}),
        (OCRQ1, CLUSTER3, servers.cluster.url, 1, {**cluster, "partitions": "3"}),
        (OCRQ2, CLUSTER3, servers.cluster.url, 2, {**cluster, "partitions": "3"}),
        (OCRQ1, CLUSTER1, servers.cluster.url, 1, {**cluster, "partitions": "1"}),
        (OCRQ1, WAIT, servers.primary.url, 1, {"redis_wait_replicas": "1"}),
    ]
    phases = []
    for i, (row, topology, redis_url, workers, env) in enumerate(configs):
        if topology == WAIT and args.no_wait:
            continue
        folder = base / f"producer{i}"
        folder.mkdir()
        url = stop.enter_context(
            services.producer(redis_url, folder, workers, max_backlog="1000000", **env)
        )

        def upload(name: str, url: str = url) -> float:
            size, count = SIZES[name], docs_for(name, args)
            return bench_enqueue.http_load(url, "raw", size, count, args.clients)[0]

        phases.append(Phase(row, topology, servers.flusher(topology), upload))
    return phases


def docs_for(name: str, args: argparse.Namespace) -> int:
    """Documents per phase and round for a size."""
    return max(args.min_docs, DOCS[name] // args.scale)


def run_ingest(phases: list[Phase], sizes: list[str], repeats: int) -> None:
    """Every phase once per round and size, Redis flushed before each; rates kept per size."""
    for round_no in range(repeats):
        for name in sizes:
            for phase in phases:
                phase.flush()
                rate = phase.run(name)
                phase.rates.setdefault(name, []).append(rate)
                print(
                    f"  round {round_no + 1} {name} {phase.row} / {phase.topology}: {rate:,.1f}/s",
                    file=sys.stderr,
                    flush=True,
                )


def spread(values: list[float], digits: int = 1) -> str:
    """Median (min..max) of a list."""
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med:,.{digits}f} ({low:,.{digits}f}..{high:,.{digits}f})"


def ingest_table(phases: list[Phase], name: str, clients: int) -> list[str]:
    """The Markdown table for one size: every phase, and its ratio to the single node."""
    single = {p.row: statistics.median(p.rates[name]) for p in phases if p.topology == SINGLE}
    lines = [
        f"\n### Ingest, {name} documents, {clients} clients, raw body uploads\n",
        "| phase | topology | jobs/s median (min..max) | vs single node |",
        "|---|---|---|---|",
    ]
    for p in phases:
        ratio = statistics.median(p.rates[name]) / single[p.row]
        lines.append(f"| {p.row} | {p.topology} | {spread(p.rates[name])} | {ratio:.2f}x |")
    return lines


@dataclass
class PubCase:
    """One pub/sub setup: the command, where it publishes and where the subscriber sits."""

    command: str
    topology: str
    pub_port: int
    sub_port: int
    channel: str
    ports: list[int]  # every node of the topology: CPU and cluster-bus counters
    rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    bus: list[float] = field(default_factory=list)
    latency_us: list[float] = field(default_factory=list)


def pub_cases(servers: Servers) -> list[PubCase]:
    """PUBLISH on one node, PUBLISH across the cluster, SPUBLISH on the channel's shard."""
    cluster = servers.cluster
    masters = cluster.master_ports()
    every = [n.port for n in cluster.nodes]
    shard_channel = f"ocrq:{{{partition_tags(1)[0]}}}:events"
    rc = cluster.client()
    try:
        owner = rc.get_node_from_key(shard_channel).port
    finally:
        rc.close()
    one = servers.single.port
    return [
        PubCase("PUBLISH", "1 node", one, one, "ocrq:events", [one]),
        PubCase(
            "PUBLISH",
            "cluster, subscriber on another master",
            masters[0],
            masters[1],
            "ocrq:events",
            every,
        ),
        PubCase("SPUBLISH", "cluster, on the channel's shard", owner, owner, shard_channel, every),
    ]


def subscribe(case: PubCase) -> redis.client.PubSub:
    """The one subscriber, subscribed and proven live by a first message."""
    ps = redis.Redis(port=case.sub_port).pubsub(ignore_subscribe_messages=True)
    if case.command == "SPUBLISH":
        ps.ssubscribe(case.channel)
    else:
        ps.subscribe(case.channel)
    with redis.Redis(port=case.pub_port) as pub:
        pub.execute_command(case.command, case.channel, EVENT)
    receive(ps, 1)
    found = subscriber_count(case)
    if found != 1:
        raise RuntimeError(f"{case.channel} has {found} subscribers over the nodes, not 1")
    return ps


def subscriber_count(case: PubCase) -> int:
    """Subscribers of the case's channel, summed over every node of its topology."""
    total = 0
    for port in case.ports:
        with redis.Redis(port=port) as r:
            if case.command == "SPUBLISH":
                counts = r.pubsub_shardnumsub(case.channel)
            else:
                counts = r.pubsub_numsub(case.channel)
        total += sum(int(n) for _, n in counts)
    return total


def receive(ps: redis.client.PubSub, count: int, timeout_s: float = 10.0) -> None:
    """Wait until the subscriber has read `count` messages."""
    deadline, got = time.monotonic() + timeout_s, 0
    while got < count:
        if ps.get_message(timeout=1.0) is not None:
            got += 1
        elif time.monotonic() > deadline:
            raise TimeoutError(f"the subscriber got {got} of {count} messages")


def server_cpu(ports: list[int]) -> float:
    """CPU seconds (user + sys) every node has used so far."""
    total = 0.0
    for port in ports:
        with redis.Redis(port=port) as r:
            info = r.info("cpu")
        total += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return total


def bus_sent(ports: list[int]) -> int:
    """Publish messages (classic and sharded) the cluster's nodes have sent over the bus."""
    if len(ports) == 1:
        return 0
    total = 0
    for port in ports:
        with redis.Redis(port=port, decode_responses=True) as r:
            text = r.execute_command("CLUSTER", "INFO")
        for line in str(text).splitlines():
            key, _, value = line.partition(":")
            if "publish" in key and key.endswith("_sent"):
                total += int(value)
    return total


def measure_pub(case: PubCase, ps: redis.client.PubSub, messages: int, samples: int) -> None:
    """Delivered msgs/s in windows of 100, CPU and bus per message, then one-at-a-time latency."""
    window = 100
    with redis.Redis(port=case.pub_port) as pub:
        cpu, bus, started = server_cpu(case.ports), bus_sent(case.ports), time.perf_counter()
        for _ in range(messages // window):
            pipe = pub.pipeline(transaction=False)
            for _ in range(window):
                pipe.execute_command(case.command, case.channel, EVENT)
            pipe.execute()
            receive(ps, window)
        sent = messages // window * window
        case.rates.append(sent / (time.perf_counter() - started))
        case.cpu_us.append((server_cpu(case.ports) - cpu) / sent * 1e6)
        case.bus.append((bus_sent(case.ports) - bus) / sent)
        for _ in range(samples):
            t0 = time.perf_counter()
            pub.execute_command(case.command, case.channel, EVENT)
            receive(ps, 1)
            case.latency_us.append((time.perf_counter() - t0) * 1e6)


def run_pubsub(servers: Servers, args: argparse.Namespace) -> list[PubCase]:
    """Each case once per round, one subscriber each, kept for the whole run."""
    cases = pub_cases(servers)
    subscribers = [subscribe(case) for case in cases]
    try:
        for _ in range(args.repeats):
            for case, ps in zip(cases, subscribers, strict=True):
                measure_pub(case, ps, args.messages, args.samples)
    finally:
        for ps in subscribers:
            ps.close()
    return cases


def pubsub_table(cases: list[PubCase], args: argparse.Namespace) -> list[str]:
    """The Markdown table of the pub/sub cases."""
    base = statistics.median(cases[0].rates)
    lines = [
        f"\n### Pub/sub, one subscriber, {len(EVENT)}-byte events, {args.messages:,} "
        f"messages and {args.samples:,} latency samples per round\n",
        "| command | topology | delivered msgs/s median (min..max) | vs 1 node "
        "| server CPU µs/msg, all nodes | bus msgs sent/msg | latency p50 / p99 µs |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        pct = statistics.quantiles(c.latency_us, n=100)
        ratio = statistics.median(c.rates) / base
        lines.append(
            f"| {c.command} | {c.topology} | {spread(c.rates, 0)} | {ratio:.2f}x "
            f"| {statistics.median(c.cpu_us):.1f} | {statistics.median(c.bus):.2f} "
            f"| {pct[49]:.0f} / {pct[98]:.0f} |"
        )
    return lines


def wait_cost(port: int, samples: int) -> list[str]:
    """Round trip of what ReplicaWait.confirm sends per upload (SET, WAIT 1) against SET alone."""
    times: dict[str, list[float]] = {"SET": [], "SET + WAIT 1": []}
    with redis.Redis(port=port) as r:
        for _ in range(samples):
            for label, spent in times.items():
                pipe = r.pipeline(transaction=False)
                pipe.set("ocrq:{p0}:replicated", "x", px=60_000)
                if label != "SET":
                    pipe.execute_command("WAIT", 1, 1000)
                started = time.perf_counter()
                pipe.execute()
                spent.append((time.perf_counter() - started) * 1e6)
    lines = [
        f"\n### WAIT on the primary with one replica, {samples:,} samples each, interleaved\n",
        "| pipeline | p50 µs | p99 µs |",
        "|---|---|---|",
    ]
    for label, spent in times.items():
        pct = statistics.quantiles(spent, n=100)
        lines.append(f"| {label} | {pct[49]:.0f} | {pct[98]:.0f} |")
    return lines


def parse_args() -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=arguments.names_of(SIZES), default="100k,1m")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--scale", type=int, default=1, help="divide the document counts by this")
    p.add_argument("--min-docs", type=int, default=20)
    p.add_argument("--no-wait", action="store_true", help="skip the WAIT row")
    p.add_argument("--parts", type=arguments.names_of(PARTS), default="ingest,pubsub,wait")
    p.add_argument("--messages", type=int, default=10_000, help="pub/sub messages per round")
    p.add_argument("--samples", type=int, default=1_000, help="latency samples per round")
    return p.parse_args()


def main() -> None:
    """Start the topologies, run the parts asked for, print the tables, stop everything."""
    args = parse_args()
    sizes, parts = args.sizes, args.parts
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()}, `{' '.join(sys.argv)}`"
    )
    with services.scratch_dir() as tmp, contextlib.ExitStack() as stop:
        servers = start_servers(tmp, stop)
        with redis.Redis(port=servers.single.port) as r:
            print(f"redis-server {r.info('server')['redis_version']}, AOF off")
        if "ingest" in parts:
            with contextlib.ExitStack() as producers:  # stopped before pub/sub: they subscribe
                phases = raw_phases(servers, args) + producer_phases(servers, args, tmp, producers)
                run_ingest(phases, sizes, args.repeats)
            for name in sizes:
                print("\n".join(ingest_table(phases, name, args.clients)), flush=True)
        if "pubsub" in parts:
            print("\n".join(pubsub_table(run_pubsub(servers, args), args)), flush=True)
        if "wait" in parts:
            print("\n".join(wait_cost(servers.primary.port, args.samples * 2)), flush=True)


if __name__ == "__main__":
    main()
